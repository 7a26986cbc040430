"""Views beside Runs and Approvals: schedules, batches and watched folders."""

"""APScheduler wiring: wake-ups, schedules, deadlines and retention."""

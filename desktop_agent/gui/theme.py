"""Colors, labels and icon names for statuses, and step kinds' colors, for light and dark.

Colors come in pairs (light, dark): the dark variant is lighter so that it stays readable
on a dark background. ``is_dark`` decides from the palette actually in use, so the app
follows the system's color scheme without a setting of its own. A step kind's pair, label
and icon are in its description (:mod:`desktop_agent.client.stepkinds`), shared with the
CLI; this module only turns the pair into a ``QColor``.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QGuiApplication, QPalette

from desktop_agent.client.stepkinds import describe
from desktop_agent.domain import Run, RunStatus, StepKind, StepStatus, WaitReason

_STATUS_COLORS: dict[RunStatus, tuple[str, str]] = {
    RunStatus.QUEUED: ("#5f6873", "#a9b1bb"),
    RunStatus.RUNNING: ("#1565c0", "#64a8f0"),
    RunStatus.PAUSED: ("#9a6700", "#e3b341"),
    RunStatus.WAITING: ("#6a3fb5", "#b39ddb"),
    RunStatus.NEEDS_ATTENTION: ("#c2410c", "#ff9a5c"),
    RunStatus.STOPPED: ("#4f6b95", "#9db4dc"),
    RunStatus.COMPLETED: ("#1f7a3a", "#6fcf8a"),
    RunStatus.FAILED: ("#c62828", "#ff7b72"),
    RunStatus.CANCELLED: ("#5f6873", "#a9b1bb"),
}

STATUS_LABELS: dict[RunStatus, str] = {
    RunStatus.QUEUED: "Queued",
    RunStatus.RUNNING: "Running",
    RunStatus.PAUSED: "Paused",
    RunStatus.WAITING: "Waiting",
    RunStatus.NEEDS_ATTENTION: "Needs attention",
    RunStatus.STOPPED: "Stopped",
    RunStatus.COMPLETED: "Completed",
    RunStatus.FAILED: "Failed",
    RunStatus.CANCELLED: "Cancelled",
}

_WAIT_LABELS: dict[WaitReason, str] = {
    WaitReason.APPROVAL: "for approval",
    WaitReason.TIMER: "on a timer",
    WaitReason.RATE_LIMIT: "rate limited",
    WaitReason.BUDGET: "budget reached",
    WaitReason.HUMAN_INPUT: "for your answer",
    WaitReason.CREDENTIALS: "for an API key",
}

NEEDS_USER_WAITS = frozenset(
    {WaitReason.APPROVAL, WaitReason.HUMAN_INPUT, WaitReason.BUDGET, WaitReason.CREDENTIALS}
)
"""Wait reasons only the analyst can end."""


def is_dark(palette: QPalette | None = None) -> bool:
    """Whether the palette in use is a dark one."""
    pal = palette or QGuiApplication.palette()
    return pal.color(QPalette.ColorRole.Window).lightness() < 128


def _pick(pair: tuple[str, str], palette: QPalette | None) -> QColor:
    return QColor(pair[1] if is_dark(palette) else pair[0])


def status_color(status: RunStatus, palette: QPalette | None = None) -> QColor:
    """Text color of a run status."""
    return _pick(_STATUS_COLORS[status], palette)


def kind_color(kind: StepKind, palette: QPalette | None = None) -> QColor:
    """Color of a step kind in the timeline and charts."""
    return _pick(describe(kind).colors, palette)


def step_status_color(status: StepStatus, palette: QPalette | None = None) -> QColor:
    """Color of a step's outcome."""
    pair = {
        StepStatus.STARTED: _STATUS_COLORS[RunStatus.RUNNING],
        StepStatus.COMPLETED: _STATUS_COLORS[RunStatus.COMPLETED],
        StepStatus.FAILED: _STATUS_COLORS[RunStatus.FAILED],
    }[status]
    return _pick(pair, palette)


def warning_color(palette: QPalette | None = None) -> QColor:
    """Color for retries and other things to notice."""
    return _pick(("#b45309", "#f0b94b"), palette)


def status_icon_name(status: RunStatus) -> str:
    """Name of the icon of a run status."""
    return "status-" + status.value.replace("_", "-")


def status_text(run: Run) -> str:
    """Status label with the wait reason, e.g. ``Waiting for approval``."""
    label = STATUS_LABELS[run.status]
    if run.status == RunStatus.WAITING and run.wait_reason is not None:
        return f"{label} {_WAIT_LABELS[run.wait_reason]}"
    return label


def needs_user(run: Run) -> bool:
    """Whether only the analyst can move the run on."""
    return run.status == RunStatus.NEEDS_ATTENTION or (
        run.status == RunStatus.WAITING and run.wait_reason in NEEDS_USER_WAITS
    )


def dark_palette() -> QPalette:
    """A dark palette for the Fusion style (used for dark screenshots and checks)."""
    pal = QPalette()
    base, window, text = QColor("#1e1f22"), QColor("#2b2d30"), QColor("#dfe1e5")
    roles = {
        QPalette.ColorRole.Window: window,
        QPalette.ColorRole.WindowText: text,
        QPalette.ColorRole.Base: base,
        QPalette.ColorRole.AlternateBase: QColor("#25272a"),
        QPalette.ColorRole.ToolTipBase: window,
        QPalette.ColorRole.ToolTipText: text,
        QPalette.ColorRole.PlaceholderText: QColor("#8c9096"),
        QPalette.ColorRole.Text: text,
        QPalette.ColorRole.Button: QColor("#35373b"),
        QPalette.ColorRole.ButtonText: text,
        QPalette.ColorRole.BrightText: QColor("#ff7b72"),
        QPalette.ColorRole.Highlight: QColor("#2f65ca"),
        QPalette.ColorRole.HighlightedText: QColor("#ffffff"),
        QPalette.ColorRole.Link: QColor("#64a8f0"),
        QPalette.ColorRole.Mid: QColor("#4a4d52"),
        QPalette.ColorRole.Dark: QColor("#18191b"),
        QPalette.ColorRole.Light: QColor("#45484d"),
        QPalette.ColorRole.Midlight: QColor("#3c3f44"),
        QPalette.ColorRole.Shadow: QColor("#000000"),
    }
    for role, color in roles.items():
        pal.setColor(role, color)
    for role in (
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
    ):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6f737a"))
    return pal

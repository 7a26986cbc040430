"""Colors, labels and icon names for statuses, and step kinds' colors, for light and dark.

Colors come in pairs (light, dark): the dark variant is lighter so that it stays readable
on a dark background. ``is_dark`` decides from the palette actually in use, so the
colors follow the system's scheme, or the one chosen in View ▸ Palette
(:mod:`desktop_agent.gui.palette`). A step kind's pair, label
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
    WaitReason.BATCH: "in a batch",
}


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
    return run.needs_analyst


def dark_palette() -> QPalette:
    """A dark palette for the Fusion style (View ▸ Palette ▸ Dark, and dark screenshots)."""
    return _palette(
        {
            "window": "#2b2d30",
            "text": "#dfe1e5",
            "base": "#1e1f22",
            "alternate": "#25272a",
            "placeholder": "#8c9096",
            "button": "#35373b",
            "bright": "#ff7b72",
            "highlight": "#2f65ca",
            "link": "#64a8f0",
            "mid": "#4a4d52",
            "dark": "#18191b",
            "light": "#45484d",
            "midlight": "#3c3f44",
            "disabled": "#6f737a",
        }
    )


def light_palette() -> QPalette:
    """A light palette for the Fusion style (View ▸ Palette ▸ Light), whatever the desktop's."""
    return _palette(
        {
            "window": "#efefef",
            "text": "#1f2328",
            "base": "#ffffff",
            "alternate": "#f5f6f7",
            "placeholder": "#6e7781",
            "button": "#e8e8e8",
            "bright": "#c62828",
            "highlight": "#2f65ca",
            "link": "#1565c0",
            "mid": "#b8b8b8",
            "dark": "#a0a0a0",
            "light": "#ffffff",
            "midlight": "#f7f7f7",
            "disabled": "#8c959f",
        }
    )


def _palette(c: dict[str, str]) -> QPalette:
    """Every color role of a palette, from a few named colors (one scheme for both)."""
    pal = QPalette()
    base, window, text = QColor(c["base"]), QColor(c["window"]), QColor(c["text"])
    roles = {
        QPalette.ColorRole.Window: window,
        QPalette.ColorRole.WindowText: text,
        QPalette.ColorRole.Base: base,
        QPalette.ColorRole.AlternateBase: QColor(c["alternate"]),
        QPalette.ColorRole.ToolTipBase: window,
        QPalette.ColorRole.ToolTipText: text,
        QPalette.ColorRole.PlaceholderText: QColor(c["placeholder"]),
        QPalette.ColorRole.Text: text,
        QPalette.ColorRole.Button: QColor(c["button"]),
        QPalette.ColorRole.ButtonText: text,
        QPalette.ColorRole.BrightText: QColor(c["bright"]),
        QPalette.ColorRole.Highlight: QColor(c["highlight"]),
        QPalette.ColorRole.HighlightedText: QColor("#ffffff"),
        QPalette.ColorRole.Link: QColor(c["link"]),
        QPalette.ColorRole.Mid: QColor(c["mid"]),
        QPalette.ColorRole.Dark: QColor(c["dark"]),
        QPalette.ColorRole.Light: QColor(c["light"]),
        QPalette.ColorRole.Midlight: QColor(c["midlight"]),
        QPalette.ColorRole.Shadow: QColor("#000000"),
    }
    for role, color in roles.items():
        pal.setColor(role, color)
    for role in (
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
    ):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor(c["disabled"]))
    return pal

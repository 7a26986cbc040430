"""The forecast line of New run: what the run as chosen is expected to cost and take.

The figures are read off the GUI thread (a task of the window's ``TaskRunner``): the line
asks again when the model, the effort or the template changes, one read at a time (a
change made while a read runs is asked for when it comes back; an answer to an older
question is dropped). Both modes are in every forecast, so switching economy mode on or
off only changes which one leads (:meth:`ForecastLine.set_economy`), without a read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import shiboken6
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QWidget

from desktop_agent.client.api import Client
from desktop_agent.client.forecast import Forecast, forecast, summary
from desktop_agent.client.messages import plain_error
from desktop_agent.domain import AgentSpec

RunTask = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[Exception], None]], None]
"""Runs a function off the GUI thread, then one of the two callbacks on it."""


@dataclass(frozen=True)
class ForecastQuestion:
    """What a forecast is asked for: the run's model and effort, whose runs, how many.

    Attributes:
        model: the model id.
        effort: the effort level ("" for the model's default).
        template: a schedule's, watched folder's or batch's id whose runs come first.
        items: how many runs.
    """

    model: str
    effort: str = ""
    template: str | None = None
    items: int = 1


Estimate = Callable[[ForecastQuestion], Forecast]
"""Makes the forecast for a question (blocking: run off the GUI thread)."""


def estimate_with(client: Client) -> Estimate:
    """Forecasts from ``client``'s past runs (only the model and the effort of a run count)."""

    def estimate(question: ForecastQuestion) -> Forecast:
        spec = AgentSpec(model=question.model, system_prompt="", effort=question.effort)
        return forecast(client, spec, template=question.template, items=question.items)

    return estimate


class ForecastLine(QLabel):
    """``Forecast: ≈ $0.42 (90%: $0.80) · ≈ 6m (90%: 12m) · economy ≈ $0.21 … · from 14 runs``.

    Hidden until :meth:`set_source` gives it a way to read forecasts.

    Args:
        parent: owner.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.economy = False
        """The mode the run is to use: economy (True) or streamed."""
        self.forecast: Forecast | None = None
        """The forecast shown (None: none yet, or it could not be read)."""
        self._run_task: RunTask | None = None
        self._estimate: Estimate | None = None
        self._wanted: ForecastQuestion | None = None
        self._shown: ForecastQuestion | None = None
        self._asking: ForecastQuestion | None = None
        self.hide()

    def set_source(self, run_task: RunTask, estimate: Estimate) -> None:
        """Read forecasts with ``estimate`` through ``run_task``, from now on."""
        self._run_task, self._estimate = run_task, estimate
        self.show()
        self._ask_next()

    def ask(self, question: ForecastQuestion) -> None:
        """Show the forecast for ``question`` (read now, or when the read running ends)."""
        self._wanted = question
        self._ask_next()

    def set_economy(self, on: bool) -> None:
        """Lead with economy mode's figures (True) or streamed ones."""
        if on != self.economy:
            self.economy = on
            self._render()

    @property
    def busy(self) -> bool:
        """Whether a read is under way."""
        return self._asking is not None

    def _ask_next(self) -> None:
        run_task, estimate, question = self._run_task, self._estimate, self._wanted
        if run_task is None or estimate is None or question is None or self.busy:
            return
        if question == self._shown:
            return
        self._asking = question
        if self.forecast is None:
            self.setText("Forecast: reading past runs…")
        run_task(lambda: estimate(question), self._on_read, self._on_failed)

    def _on_read(self, forecast: Forecast) -> None:
        if not shiboken6.isValid(self):
            return  # its dialog was closed and deleted while the read ran
        self._shown, self._asking = self._asking, None
        self.forecast = forecast
        self._render()
        self._ask_next()  # the choice changed meanwhile

    def _on_failed(self, exc: Exception) -> None:
        if not shiboken6.isValid(self):
            return
        self._shown, self._asking = self._asking, None
        self.forecast = None
        self.setText(f"No forecast: {plain_error(exc)}")
        self.setToolTip("")
        self._ask_next()

    def _render(self) -> None:
        f = self.forecast
        if f is None:
            return
        shown = replace(f, economy=self.economy)
        self.setText(f"Forecast: {summary(shown)}")
        self.setToolTip(shown.explain[:1].upper() + shown.explain[1:])

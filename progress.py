"""Progress on a terminal for long builds (rich), silent when stderr is not a terminal."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from types import TracebackType
from typing import Any

from tlsite.terminal import markup_safe

#: The unit of a stage that counts bytes (shown in MB, not as raw byte counts).
BYTES = "bytes"
#: Seconds a build runs before its bar is drawn: a build over by then draws none.
SHOW_AFTER_S = 0.5


def amount(completed: float, total: float | None, unit: str = "") -> str:
    """How far a stage is, as the bar's text: ``12.3/45.6 MB`` for bytes, ``12/40`` else."""
    if unit == BYTES:
        done = f"{completed / 1e6:,.1f}"
        return f"{done} MB" if total is None else f"{done}/{total / 1e6:,.1f} MB"
    done = f"{int(completed):,}"
    return done if total is None else f"{done}/{int(total):,}"


class Progress:
    """One bar per stage: bytes read while parsing, pages written while building.

    The bar is drawn once the build has run for ``delay`` seconds (by a timer thread), with
    the stage it is in and how far it got. A small build is over before: a bar it flashed
    was nothing to read, and importing rich and drawing from a thread cost it more than it
    showed.
    """

    def __init__(self, *, enabled: bool, console: Any = None, delay: float = SHOW_AFTER_S) -> None:
        self.enabled = enabled
        self._console = console
        self._delay = delay
        self._lock = threading.Lock()  # the timer's thread draws the bar, the build steps it
        self._timer: threading.Timer | None = None
        self._progress: Any = None
        self._task: Any = None
        self._stage: tuple[str, float | None, str] | None = None  # until the bar is drawn
        self._done: float = 0
        self._since = time.monotonic()  # when the current stage began
        self._closed = False  # the build is over: a bar not drawn by now never is

    def __enter__(self) -> Progress:
        if self.enabled and self._delay <= 0:
            self._draw()
        elif self.enabled:
            self._timer = threading.Timer(self._delay, self._draw)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _draw(self) -> None:
        """Draw the bar, with the current stage as far as it got."""
        from rich.progress import BarColumn, ProgressColumn, TextColumn
        from rich.progress import Progress as RichProgress
        from rich.text import Text

        class Amount(ProgressColumn):  # here: rich is imported only when a bar is drawn
            def render(self, task: Any) -> Text:
                return Text(amount(task.completed, task.total, task.fields.get("unit", "")))

        class Elapsed(ProgressColumn):  # the stage's time since it began, not since drawn
            def render(self, task: Any) -> Text:
                seconds = int(time.monotonic() - task.fields.get("since", time.monotonic()))
                return Text(str(timedelta(seconds=max(seconds, 0))), style="progress.elapsed")

        with self._lock:
            if self._closed:
                return
            progress = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                Amount(),
                Elapsed(),
                transient=True,
                console=self._console,
            )
            progress.__enter__()
            if self._stage is not None:
                text, total, unit = self._stage
                self._task = progress.add_task(
                    markup_safe(text), total=total, unit=unit, since=self._since
                )
                progress.advance(self._task, self._done)
            self._progress = progress  # drawn with its stage: the build steps it from now on

    def stage(self, text: str, total: float | None = None, *, unit: str = "") -> None:
        """Start a stage of ``total`` steps (``unit`` :data:`BYTES`: bytes, shown in MB)."""
        if not self.enabled:
            return
        with self._lock:
            self._since = time.monotonic()
            if self._progress is None:
                self._stage, self._done = (text, total, unit), 0
                return
            if self._task is not None:
                self._progress.update(self._task, visible=False)
            self._task = self._progress.add_task(
                markup_safe(text), total=total, unit=unit, since=self._since
            )

    def advance(self, amount: float = 1) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self._progress is None:
                self._done += amount
            elif self._task is not None:
                self._progress.advance(self._task, amount)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            self._closed = True  # a timer importing rich now draws nothing when it is done
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()
        if self._progress is not None:
            self._progress.__exit__(exc_type, exc, tb)

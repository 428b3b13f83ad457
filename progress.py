"""Progress on a terminal for long builds (rich), silent when stderr is not a terminal."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from tlsite.terminal import markup_safe

#: The unit of a stage that counts bytes (shown in MB, not as raw byte counts).
BYTES = "bytes"


def amount(completed: float, total: float | None, unit: str = "") -> str:
    """How far a stage is, as the bar's text: ``12.3/45.6 MB`` for bytes, ``12/40`` else."""
    if unit == BYTES:
        done = f"{completed / 1e6:,.1f}"
        return f"{done} MB" if total is None else f"{done}/{total / 1e6:,.1f} MB"
    done = f"{int(completed):,}"
    return done if total is None else f"{done}/{int(total):,}"


class Progress:
    """One bar per stage: bytes read while parsing, pages written while building."""

    def __init__(self, *, enabled: bool, console: Any = None) -> None:
        self.enabled = enabled
        self._console = console
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress
            from rich.text import Text

            class Amount(ProgressColumn):  # here: rich is imported only when a bar is shown
                def render(self, task: Any) -> Text:
                    return Text(amount(task.completed, task.total, task.fields.get("unit", "")))

            self._progress = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                Amount(),
                TimeElapsedColumn(),
                transient=True,
                console=self._console,
            )
            self._progress.__enter__()
        return self

    def stage(self, text: str, total: float | None = None, *, unit: str = "") -> None:
        """Start a stage of ``total`` steps (``unit`` :data:`BYTES`: bytes, shown in MB)."""
        if self._progress is None:
            return
        if self._task is not None:
            self._progress.update(self._task, visible=False)
        self._task = self._progress.add_task(markup_safe(text), total=total, unit=unit)

    def advance(self, amount: float = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, amount)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.__exit__(exc_type, exc, tb)

"""Progress on a terminal for long builds (rich), silent when stderr is not a terminal."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from tlsite.terminal import markup_safe


class Progress:
    """One bar per stage: bytes read while parsing, pages written while building."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=True,
            )
            self._progress.__enter__()
        return self

    def stage(self, text: str, total: float | None = None) -> None:
        if self._progress is None:
            return
        if self._task is not None:
            self._progress.update(self._task, visible=False)
        self._task = self._progress.add_task(markup_safe(text), total=total)

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

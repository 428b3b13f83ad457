"""A stage indicator for long builds on a terminal (rich), silent otherwise."""

from __future__ import annotations

from types import TracebackType


class Progress:
    """Shows which stage a build is in, with elapsed time, on stderr."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._status = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console

            self._status = Console(stderr=True).status("Starting")
            self._status.__enter__()
        return self

    def stage(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text + " …")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._status is not None:
            self._status.__exit__(exc_type, exc, tb)

"""Open what the user gave us (file, .gz, .zip, .7z, directory, stdin) as binary log streams.

INTERFACE STUB — being implemented; see the docstrings for the contract.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO


class InputError(Exception):
    """A problem with the input path, as one line that names the path."""


@dataclass(frozen=True)
class LogSource:
    """One log to read: a name to show the user and a way to open its decompressed bytes."""

    display_name: str
    opener: Callable[[], BinaryIO]
    rank: int | None = None
    size_hint: int | None = None

    def open(self) -> BinaryIO:
        return self.opener()


@dataclass
class ResolvedInput:
    """The logs found for one input path, and what was looked at but not used."""

    logs: list[LogSource]
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    is_multi_rank: bool = False


def resolve_input(path: str | os.PathLike[str], *, latest: bool = False) -> ResolvedInput:
    """Find the log(s) to read for ``path``."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise InputError(f"{p}: not a file")
    return ResolvedInput(logs=[LogSource(os.path.basename(p), lambda: open(p, "rb"))])

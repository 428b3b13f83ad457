"""Stack frames and the per-log string intern table.

PyTorch interns frame filenames: a ``{"str": [name, id]}`` record defines an id before any
stack uses it, so frames are resolved to real file names while the log is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

UNKNOWN_FILE = "(unknown)"
_SEED_NSPID = re.compile(r"^.*?[^/]*-seed-nspid[^/]*/")
EVAL_WITH_KEY = re.compile(r"<eval_with_key>\.(\d+)")


@dataclass(frozen=True, slots=True)
class Frame:
    """One Python frame: file, line, function and (torch ≥ 2.7) the source line."""

    filename: str
    line: int
    name: str
    loc: str | None = None

    @property
    def short_filename(self) -> str:
        return shorten_filename(self.filename)

    def describe(self) -> str:
        return f"{self.short_filename}:{self.line} in {self.name}"


def shorten_filename(filename: str) -> str:
    """Drop fbcode XAR/PAR prefixes the way tlparse does (``#link-tree/``, ``*-seed-nspid*/``)."""
    marker = filename.find("#link-tree/")
    if marker >= 0:
        return filename[marker + len("#link-tree/") :]
    return _SEED_NSPID.sub("", filename, count=1)


class InternTable:
    """The ``str`` records of one log: id → string, resolved as frames are read."""

    def __init__(self) -> None:
        self._strings: dict[int, str] = {}
        self._lowest: int | None = None  # the lowest id defined so far
        #: ids used, never defined, and below every id this log defines: torch numbers file
        #: names once per process, so these were interned in another log of the process (the
        #: main log, for a ``TORCH_DTRACE`` draft-export log read alone)
        self.elsewhere: set[int] = set()
        #: each distinct frame once: stacks repeat the same frames in thousands of records
        self._frames: dict[Frame, Frame] = {}

    def define(self, value: Any) -> bool:
        """Record a ``str`` envelope value ``[string, id]``; False when it is malformed."""
        if (
            isinstance(value, list)
            and len(value) == 2
            and isinstance(value[0], str)
            and type(value[1]) is int
            and value[1] >= 0
        ):
            self._strings[value[1]] = value[0]
            if self._lowest is None or value[1] < self._lowest:
                self._lowest = value[1]
            return True
        return False

    def frame(self, frame: Frame) -> Frame:
        """The one :class:`Frame` object equal to ``frame``."""
        return self._frames.setdefault(frame, frame)

    def lookup(self, key: Any) -> str:
        if isinstance(key, str):  # some producers write literal file names
            return key
        if type(key) is int:
            found = self._strings.get(key)
            if found is not None:
                return found
            if self._lowest is not None and 0 <= key < self._lowest:
                self.elsewhere.add(key)
                return f"(file #{key}, interned in another log)"
        return UNKNOWN_FILE

    def as_list(self) -> list[str | None]:
        """tlparse's ``string_table``: indexed by id, ``null`` for ids never defined."""
        size = max(self._strings, default=0) + 1
        return [self._strings.get(i) for i in range(size)]

    def __len__(self) -> int:
        return len(self._strings)


def read_stack(raw: Any, strings: InternTable) -> list[Frame]:
    """Turn a logged stack into frames, skipping entries that are not frame objects."""
    if not isinstance(raw, list):
        return []
    frames = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        line = item.get("line")
        name = item.get("name")
        loc = item.get("loc")
        frame = Frame(
            filename=strings.lookup(item.get("filename")),
            line=line if type(line) is int else 0,
            name=name if isinstance(name, str) else "?",
            loc=loc if isinstance(loc, str) else None,
        )
        frames.append(strings.frame(frame))
    return frames


#: Files that are not the user's: installed packages, the standard library, ``<string>``-like
#: code, and torch itself (a source checkout of torch is not under site-packages).
_LIBRARY_FILE = re.compile(
    r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib(?:64)?[/\\]python\d[\d.]*[/\\]|^<|(?:^|[/\\])torch[/\\]"
)


def is_user_frame(frame: Frame) -> bool:
    """Whether the frame is in the user's code (not torch, a library or the standard library)."""
    return frame.filename != UNKNOWN_FILE and not _LIBRARY_FILE.search(frame.filename)


def user_frame(stacks: Mapping[str, list[Frame]]) -> Frame | None:
    """The user's line a record points at: the innermost user frame of ``user_stack``, else of
    ``stack`` (torch 2.15 logs ``user_stack: []`` outside a traced frame, torch <= 2.6 no user
    stack on some events; both are outermost first), else the last ``user_stack`` frame."""
    user = stacks.get("user_stack") or []
    for frames in (user, stacks.get("stack") or []):
        for frame in reversed(frames):
            if is_user_frame(frame):
                return frame
    return user[-1] if user else None


_CONVERT_FRAME = "torch/_dynamo/convert_frame.py"


def drop_convert_frame_suffix(frames: list[Frame]) -> list[Frame]:
    """Remove dynamo's own trailing convert_frame frames from a dynamo_start stack (as tlparse)."""
    tail = frames[-3:]
    if len(tail) == 3 and all(f.short_filename == _CONVERT_FRAME for f in tail):
        names = [f.name for f in tail]
        if names == ["catch_errors", "_convert_frame", "_convert_frame_assert"]:
            frames = frames[:-3]
    tail = frames[-3:]
    if len(tail) == 3 and all(
        f.short_filename == _CONVERT_FRAME and f.name == "__call__" for f in tail
    ):
        frames = frames[:-3]
    return frames

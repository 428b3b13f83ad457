"""How much of each kind of item the model keeps and a page lists in full: every cap here.

A runaway or hostile trace can log hundreds of thousands of guards, symbols or graph breaks.
Keeping each as an object made memory grow with the record count, and a page with one heading
per item took time quadratic in their count (Markdown, the table of contents, the search
index). Past a cap an item is counted, not kept or listed, and the page says how many more
there are and where they are. Real traces stay far below every cap.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

#: Records of one event type kept per compile (guards, symbols, unknown events, metrics),
#: and in all; the rest are counted with their first and last line (``CompileUnit.unlisted``).
RECORDS_PER_KIND = 5_000
RECORDS_PER_TRACE = 200_000
#: Artifacts kept as objects per compile, and in all; the rest wait on disk as compact records
#: (``model.ArtifactList``) and are read back one at a time by whatever lists every artifact.
ARTIFACTS_PER_COMPILE = 5_000
ARTIFACTS_PER_TRACE = 20_000
#: Distinct event types (and unknown top-level keys) counted by name, in the trace and in each
#: compile; records of further names are counted together under :data:`OTHER_TYPES`.
NAMES = 1_000
OTHER_TYPES = "(other event types)"
OTHER_KEYS = "(other keys)"
#: Items a page shows with a heading each (artifacts, graph breaks, failures, frames, ...).
SECTIONS = 500
#: Rows of one table, or items of one bullet list.
ROWS = 5_000
#: Items of one kind under one heading of a page with many (the symbols of each compile on the
#: symbolic-shapes page: the compile's own page lists all of them).
ITEMS_PER_SECTION = 100
#: Compile-id links in one sentence ("Compile ids: [0/1], [0/2], …").
LINKS = 100

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Shown(Generic[T]):
    """The first ``limit`` items of a list, and how many there were in all."""

    items: Sequence[T]
    total: int

    @property
    def more(self) -> int:
        """How many items are not shown."""
        return self.total - len(self.items)

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return self.total > 0


def shown(items: Sequence[T], limit: int) -> Shown[T]:
    """The part of ``items`` a page lists in full."""
    return Shown(items[:limit], len(items))


@dataclass(slots=True)
class Unlisted:
    """Records of one type in one compile past :data:`RECORDS_PER_KIND`: only counted."""

    count: int
    first_line: int
    last_line: int

    def add(self, line: int) -> None:
        self.count += 1
        self.last_line = line

    @property
    def lines(self) -> str:
        """Where they are in the log, e.g. ``lines 2,001–9,000``."""
        if self.first_line == self.last_line:
            return f"line {self.first_line:,}"
        return f"lines {self.first_line:,}–{self.last_line:,}"


def count_name(counter: Counter[str], name: str, other: str = OTHER_TYPES) -> str:
    """Count ``name`` in ``counter``, or under ``other`` once it counts :data:`NAMES` names
    (a trace of a million made-up event types grew memory by a name each); the key used."""
    if name not in counter and len(counter) >= NAMES:
        name = other
    counter[name] += 1
    return name

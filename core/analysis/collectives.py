"""Collective operations: what Inductor scheduled versus what its output code calls.

A graph whose generated code issues a different number of collectives than the scheduler
planned, or that starts collectives it never waits for, is a classic source of distributed
hangs. tlparse checks this per rank (``collectives_parity.json``); these are the same rules,
applied to the raw output-code payload (tlparse stripped tags from highlighted HTML first,
and its comment stripper then tripped over escaped quotes such as ``&#39;``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

#: Collective kinds, in the order an op name is tested against them (first match wins).
COLLECTIVE_KINDS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all")

_CALL = re.compile(
    r"torch\s*\.\s*ops\s*\.\s*_?c10d_functional\s*\.\s*([A-Za-z0-9_]+)\s*\.\s*default\s*\("
)
# Python and C++ comments: a collective mentioned in a comment is not a call.
_COMMENT = re.compile(r"#[^\n]*|//[^\n]*|/\*[\s\S]*?\*/")
_OP_PREFIX = re.compile(r"^torch\.ops\._?c10d_functional\.")


def normalize_op(op: str) -> str | None:
    """The collective kind an op name stands for, or None for anything else (waits included)."""
    op = op.rstrip("_")
    for kind in COLLECTIVE_KINDS:
        if kind in op:
            return kind
    if "reduce" in op:
        return "reduce"
    return None


def short_op(op: str) -> str:
    """``torch.ops._c10d_functional.all_reduce_.default`` → ``all_reduce_`` (for display)."""
    name = _OP_PREFIX.sub("", op)
    return name[: -len(".default")] if name.endswith(".default") else name


def schedule_counts(ops: Iterable[str]) -> Counter[str]:
    """Collectives per kind in a scheduler's list of op names."""
    counts: Counter[str] = Counter()
    for op in ops:
        kind = normalize_op(op)
        if kind is not None:
            counts[kind] += 1
    return counts


def code_counts(code: str) -> tuple[Counter[str], int]:
    """Collective calls per kind in generated code, and how many ``wait_tensor`` calls it has."""
    counts: Counter[str] = Counter()
    waits = 0
    for match in _CALL.finditer(_COMMENT.sub("", code)):
        op = match.group(1)
        if op == "wait_tensor":
            waits += 1
            continue
        kind = normalize_op(op)
        if kind is not None:
            counts[kind] += 1
    return counts, waits


@dataclass(frozen=True, slots=True)
class Parity:
    """How a graph's generated code departs from its collective schedule."""

    offset: int  # Σ over kinds of |scheduled − called|
    missing_waits: int  # collectives called minus waits called (never negative)
    scheduled: int
    called: int
    waits: int

    @property
    def ok(self) -> bool:
        return self.offset == 0 and self.missing_waits == 0


def parity(schedule_ops: Iterable[str], code: str) -> Parity:
    """Compare a collective schedule with the output code of the same graph."""
    planned = schedule_counts(schedule_ops)
    called, waits = code_counts(code)
    offset = sum(abs(planned[k] - called[k]) for k in set(planned) | set(called))
    total = sum(called.values())
    return Parity(
        offset=offset,
        missing_waits=max(0, total - waits),
        scheduled=sum(planned.values()),
        called=total,
        waits=waits,
    )

"""What many problems have in common, said once: the overview's "Worst problems first" names
a pattern ("all 48 recompiles failed the same guard") instead of listing 48 lines.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..model import CompileUnit
from .views import Failure, FrameCompiles

#: "0/3: " before a recompile reason: which cache entry's guard failed.
_ENTRY = re.compile(r"^\s*\d+/\d+:\s*")
#: The source line torch appends to a guard: "mode == 'relu'    # if mode == 'relu':  # f.py:24".
_SOURCE = re.compile(r"\s+#.*$")
#: Values that change from one recompile to the next while the guard stays the same.
_VALUE = re.compile(
    r"""(?P<op>==|!=|<=|>=|<|>|\bis)\s+(?P<value>'[^']*'|"[^"]*"|-?\d[\w.]*|None|True|False)"""
    r"""|(?P<said>\bexpected|\bactual)\s+[\w.'"\[\]-]+"""
    r"""|(?P<id>)\b\d{5,}\b"""  # an object id (___check_obj_id)
)


def guard_of(reason: str) -> str:
    """A recompile reason without its values: the guard that failed and on which input
    (``tensor 'x' size mismatch at index 0. expected …, actual …``)."""
    first = _SOURCE.sub("", _ENTRY.sub("", reason.strip().split("\n", 1)[0]))
    return _VALUE.sub(lambda m: f"{m['op'] or m['said'] or ''} …".lstrip(), first)


@dataclass
class RecompilePattern:
    """The guards a frame's recompiles failed, most frequent first."""

    count: int  # recompiles
    guards: list[tuple[str, int]]  # (guard, how many recompiles failed it)

    @property
    def same_guard(self) -> bool:
        return len(self.guards) == 1 and self.count > 1


def recompile_pattern(frame: FrameCompiles) -> RecompilePattern:
    counts = Counter(guard_of(r.reason) for r in frame.recompiles if r.reason)
    return RecompilePattern(len(frame.recompiles), counts.most_common())


@dataclass
class FailureGroup:
    """Compilation failures with the same exception type and summary (the exception said)."""

    kind: str
    message: str
    units: list[CompileUnit] = field(default_factory=list)


def failure_groups(failures: list[Failure]) -> list[FailureGroup]:
    """Failures grouped by kind and summary, in order of first appearance."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    for failure in failures:
        message = failure.headline
        key = (failure.kind, message)
        group = groups.get(key)
        if group is None:
            group = groups[key] = FailureGroup(failure.kind, message)
        group.units.append(failure.unit)
    return list(groups.values())

"""What many problems have in common, said once: the overview's "Worst problems first" names
a pattern ("all 48 recompiles failed the same guard") instead of listing 48 lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model import CompileUnit
from .views import Failure, FrameCompiles

if TYPE_CHECKING:
    from .exports import ExportCall

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


def _first_line(reason: str) -> str:
    return _SOURCE.sub("", _ENTRY.sub("", reason.strip().split("\n", 1)[0]))


def guard_of(reason: str) -> str:
    """A recompile reason without its values: the guard that failed and on which input
    (``tensor 'x' size mismatch at index 0. expected …, actual …``)."""
    return _VALUE.sub(lambda m: f"{m['op'] or m['said'] or ''} …".lstrip(), _first_line(reason))


def values_of(reason: str) -> str:
    """The values :func:`guard_of` leaves out (``'relu'``, ``expected 4, actual 6``)."""
    found = (m["value"] or m[0] for m in _VALUE.finditer(_first_line(reason)))
    return ", ".join(v.strip() for v in found if v.strip())


#: Values listed for one guard ("'relu' → 'gelu'") before "…".
MAX_VALUES = 3


@dataclass
class GuardFailures:
    """One guard a frame's recompiles failed: how often, and with which values."""

    guard: str
    count: int
    values: list[str] = field(default_factory=list)  # distinct, in the order seen

    @property
    def shown_values(self) -> str:
        more = " → …" if len(self.values) > MAX_VALUES else ""
        return " → ".join(self.values[:MAX_VALUES]) + more


@dataclass
class RecompilePattern:
    """The guards a frame's recompiles failed, most frequent first (ties in the order seen)."""

    count: int  # recompiles
    guards: list[GuardFailures]

    @property
    def same_guard(self) -> bool:
        return len(self.guards) == 1 and self.count > 1


def recompile_pattern(frame: FrameCompiles) -> RecompilePattern:
    found: dict[str, GuardFailures] = {}
    for recompile in frame.recompiles:
        if not recompile.reason:
            continue
        guard = guard_of(recompile.reason)
        entry = found.setdefault(guard, GuardFailures(guard, 0))
        entry.count += 1
        value = values_of(recompile.reason)
        if value and value not in entry.values:
            entry.values.append(value)
    guards = sorted(found.values(), key=lambda g: -g.count)  # stable: ties keep their order
    return RecompilePattern(len(frame.recompiles), guards)


@dataclass
class FailureGroup:
    """Compilation failures with the same exception type and summary (the exception said)."""

    kind: str
    message: str
    units: list[CompileUnit] = field(default_factory=list)
    exports: list[ExportCall] = field(default_factory=list)  # the torch.export calls that failed


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
        if failure.export_call is not None:
            group.exports.append(failure.export_call)
    return list(groups.values())

"""The questions users arrive with, answered from the model.

Distinct graph breaks, recompiles per frame (with the failed guard and the guard diff),
failures and restarts. Pure functions of a :class:`Trace` (compile times: compile_time.py).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..model import Artifact, CompileUnit, Trace

_BREAK_AT = re.compile(r"Graph break in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_GB_LINK = re.compile(r"https?://\S+/gb/(?P<code>gb\d+)\.html")


# -- graph breaks ------------------------------------------------------------------------------
@dataclass
class GraphBreak:
    """One distinct graph break: a reason at a user location, and every compile that hit it."""

    reason: str
    location: str  # "file.py:21", or "" when the trace does not say
    detail: str  # explanation and hints
    user_stack: str
    doc_url: str | None
    units: list[CompileUnit] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.units)

    @property
    def short_location(self) -> str:
        """``file.py:21`` without the folders, for tables."""
        return self.location.rsplit("/", 1)[-1]

    @property
    def compile_ids(self) -> list[str]:
        return [u.display for u in self.units]


def parse_graph_break(text: str) -> dict[str, str]:
    """Split a ``dynamo_graph_break_reason`` payload into reason, location, detail, stack."""
    location = ""
    match = _BREAK_AT.search(text)
    if match:
        location = f"{match['file']}:{match['line']}"
    body = text.split("\nUser code traceback:", 1)
    head = body[0]
    stack = body[1].split("\n\nTraceback (most recent call last):", 1)[0] if len(body) > 1 else ""
    after = head.split("Graph Break Reason:", 1)
    explanation = after[1] if len(after) > 1 else head
    lines = explanation.split("\n")
    # the first line is "Encountered graph break when ...:"; the reason title follows it
    rest = [ln for ln in lines[1:] if ln.strip()] if len(after) > 1 else lines
    reason = rest[0].strip() if rest else lines[0].strip()
    doc = _GB_LINK.search(text)
    return {
        "reason": reason or "(no reason given)",
        "location": location,
        "detail": "\n".join(ln for ln in lines[1:]).strip("\n") if len(after) > 1 else head,
        "user_stack": stack.strip("\n"),
        "doc_url": doc.group(0) if doc else "",
    }


def graph_breaks(trace: Trace) -> list[GraphBreak]:
    """Distinct graph breaks, most frequent first, deduplicated by reason and location."""
    found: dict[tuple[str, str], GraphBreak] = {}
    for unit in trace.units.values():
        for artifact in unit.artifacts:
            if artifact.name != "dynamo_graph_break_reason" or artifact.payload is None:
                continue
            info = parse_graph_break(trace.read_payload(artifact.payload))
            _add_break(found, info, unit, artifact)
    if not found:  # older torch: only the restart reasons in compilation_metrics say it
        for unit in trace.units.values():
            for reason in _restart_reasons(unit):
                first = reason.strip().split("\n", 1)[0]
                info = {"reason": first, "location": _unit_location(unit), "detail": reason}
                _add_break(found, {**info, "user_stack": "", "doc_url": ""}, unit, None)
    return sorted(found.values(), key=lambda b: (-b.count, b.units[0].order))


def _add_break(
    found: dict[tuple[str, str], GraphBreak],
    info: dict[str, str],
    unit: CompileUnit,
    artifact: Artifact | None,
) -> None:
    key = (info["reason"], info["location"])
    entry = found.get(key)
    if entry is None:
        entry = found[key] = GraphBreak(
            reason=info["reason"],
            location=info["location"],
            detail=info["detail"],
            user_stack=info["user_stack"],
            doc_url=info["doc_url"] or None,
        )
    entry.units.append(unit)
    if artifact is not None:
        entry.artifacts.append(artifact)


def _restart_reasons(unit: CompileUnit) -> list[str]:
    reasons: list[str] = []
    for event in unit.compilation_metrics:
        value = event.meta.get("restart_reasons")
        if isinstance(value, list):
            reasons.extend(str(r) for r in value)
    return reasons


def _unit_location(unit: CompileUnit) -> str:
    filename = unit.metric("co_filename")
    line = unit.metric("co_firstlineno")
    return f"{filename}:{line}" if filename else ""


# -- recompiles --------------------------------------------------------------------------------
@dataclass
class Recompile:
    """One recompile of a frame: why, and how its guards differ from the previous compile's."""

    unit: CompileUnit
    previous: CompileUnit | None
    reason: str
    all_reasons: list[str]
    guard_diff: list[str]  # unified-diff lines, previous → this compile


@dataclass
class FrameCompiles:
    """All compiles of one frame (one code object), in order."""

    frame: str  # "0" or "!0/3"
    function: str
    location: str
    units: list[CompileUnit]
    recompiles: list[Recompile]


def frames(trace: Trace) -> list[FrameCompiles]:
    """Compile units grouped by frame, each with its recompile chain."""
    groups: dict[tuple[Any, Any], list[CompileUnit]] = {}
    for unit in trace.units.values():
        if unit.id is None or unit.id.frame_id is None:
            continue
        groups.setdefault((unit.id.compiled_autograd_id, unit.id.frame_id), []).append(unit)
    result = []
    for (ca, frame_id), units in groups.items():
        label = str(frame_id) if ca is None else f"!{ca}/{frame_id}"
        chain: list[Recompile] = []
        previous: CompileUnit | None = None
        for unit in units:
            if unit.id is not None and unit.id.attempt not in (0, None):
                continue  # restarts of one compile are not recompiles
            if previous is not None and (unit.id.frame_compile_id or 0) > 0:
                chain.append(_recompile(trace, unit, previous))
            previous = unit
        first = units[0]
        function = next((u.metric("co_name") for u in units if u.metric("co_name")), "")
        if not function and first.stack:
            function = first.stack[-1].name
        result.append(FrameCompiles(label, function or "?", _frame_location(units), units, chain))
    return result


def recompiles(trace: Trace) -> list[Recompile]:
    return [r for frame in frames(trace) for r in frame.recompiles]


def _frame_location(units: list[CompileUnit]) -> str:
    for unit in units:
        loc = _unit_location(unit)
        if loc:
            return loc
    for unit in units:
        if unit.stack:
            last = unit.stack[-1]
            return f"{last.filename}:{last.line}"
    return ""


def _recompile(trace: Trace, unit: CompileUnit, previous: CompileUnit) -> Recompile:
    reasons = recompile_reasons(trace, unit)
    reason = unit.metric("recompile_reason") or (reasons[0] if reasons else "")
    before = guard_lines(trace, previous)
    after = guard_lines(trace, unit)
    if not before or not after:  # a failed compile has no guards: a diff would mislead
        return Recompile(unit, previous, str(reason), reasons, [])
    diff = list(
        difflib.unified_diff(
            before, after, f"guards {previous.display}", f"guards {unit.display}", n=1, lineterm=""
        )
    )
    return Recompile(unit, previous, str(reason), reasons, diff)


def recompile_reasons(trace: Trace, unit: CompileUnit) -> list[str]:
    """The ``recompile_reasons`` artifact as a list of strings (it is a string or a list)."""
    for artifact in unit.artifacts:
        if artifact.name == "recompile_reasons" and artifact.payload is not None:
            text = trace.read_payload(artifact.payload)
            try:
                value = json.loads(text)
            except ValueError:
                return [text]
            if isinstance(value, list):
                return [str(v) for v in value]
            return [str(value)]
    reason = unit.metric("recompile_reason")
    return [str(reason)] if reason else []


def guard_lines(trace: Trace, unit: CompileUnit) -> list[str]:
    """The guards of a compile, one per line (dynamo_guards, else the C++ guard tree)."""
    for artifact in unit.artifacts:
        if artifact.kind == "dynamo_guards" and artifact.payload is not None:
            try:
                value = json.loads(trace.read_payload(artifact.payload))
            except ValueError:
                continue
            return [str(g.get("code")) for g in value if isinstance(g, dict)]
    for artifact in unit.artifacts:
        if artifact.kind == "dynamo_cpp_guards_str" and artifact.payload is not None:
            return [ln.rstrip() for ln in trace.read_payload(artifact.payload).split("\n")]
    return []


# -- failures and restarts ---------------------------------------------------------------------
@dataclass
class Failure:
    """A row of tlparse's Failures and Restarts table."""

    unit: CompileUnit
    kind: str  # "RestartAnalysis" or the exception type
    description: str
    source: str  # "file:line" for compilation failures
    is_restart: bool
    backward: bool = False


def failures(trace: Trace) -> list[Failure]:
    rows: list[Failure] = []
    for unit in trace.units.values():
        for event in unit.metrics:
            if event.type not in ("compilation_metrics", "bwd_compilation_metrics"):
                continue
            meta = event.meta
            backward = event.type.startswith("bwd")
            for reason in meta.get("restart_reasons") or []:
                rows.append(Failure(unit, "RestartAnalysis", str(reason), "", True, backward))
            if meta.get("fail_type"):
                filename = meta.get("fail_user_frame_filename") or "N/A"
                line = meta.get("fail_user_frame_lineno") or 0
                rows.append(
                    Failure(
                        unit,
                        str(meta["fail_type"]),
                        str(meta.get("fail_reason") or "(no reason logged)"),
                        f"{filename}:{line}",
                        False,
                        backward,
                    )
                )
    return rows

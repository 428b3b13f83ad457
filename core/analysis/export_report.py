"""The draft-export report: every issue ``torch.export.draft_export`` logged, with its context.

tlparse 0.4.3 builds this table in ``--export`` mode (spec §3.13). It rejects torch 2.13
records whose ``frame_locals`` hold lists, and panics on missing fields, so it can lose
failures. Here every field is read tolerantly: a missing or odd field gives an empty value,
never an error, and list values are shown as text.

A failure's symbolic-expression tree is built from the ``expression_created`` and
``create_unbacked_symbol`` records logged *before* it (ids are object ids, and torch reuses
them, so later records must not leak in). As in tlparse, each node appears once per tree:
a node reached again (shared sub-expression or cycle) is not repeated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..frames import Frame, is_user_frame, user_frame
from ..model import Artifact, CompileUnit, Event, Trace

GUARD_EVALUATED = "Guard Evaluated"
DATA_DEPENDENT_ERROR = "Data Dependent Error"
MISSING_FAKE_KERNEL = "Missing Fake Kernel"
MISMATCHED_FAKE_KERNEL = "Mismatched Fake Kernel"

#: tlparse's link for both fake-kernel failures ("how to write a fake kernel").
FAKE_KERNEL_DOC = (
    "https://docs.google.com/document/d/1_W62p8WJOQQUzPsJYa7s701JXt0qf2OfLub2sbkHOaU"
    "/edit#heading=h.ahugy69p2jmz"
)
NOT_LOGGED = "(not logged)"

#: A data-dependent expression draft export specialized (torch 2.6 names it without
#: ``_provenance``).
DATA_DEPENDENT_TYPES = ("propagate_real_tensors_provenance", "propagate_real_tensors")
FAILURE_TYPES = (
    "guard_added",
    *DATA_DEPENDENT_TYPES,
    "missing_fake_kernel",
    "mismatched_fake_kernel",
)
EXPRESSION_TYPES = ("expression_created", "create_unbacked_symbol")


@dataclass
class ExprNode:
    """One node of a symbolic-expression tree: an expression or an unbacked symbol."""

    id: int
    result: str  # the expression (or symbol) as text
    method: str | None  # sympy-ish operation, None for a symbol
    arguments: list[str]
    argument_ids: list[int]
    user_stack: list[Frame]
    stack: list[Frame]
    line: int  # log line of the record
    kind: str  # "expression_created" or "create_unbacked_symbol"
    value_range: str | None = None  # ``vr`` of an unbacked symbol
    children: list[ExprNode] = field(default_factory=list)

    def walk(self, depth: int = 0) -> Iterator[tuple[int, ExprNode]]:
        """(depth, node) in display order: a node, then its children (iteratively, no limit)."""
        pending = [(depth, self)]
        while pending:
            level, node = pending.pop()
            yield level, node
            pending.extend((level + 1, child) for child in reversed(node.children))


@dataclass
class ExportFailure:
    """One row of the draft-export report, with what is needed to explain it."""

    type: str  # GUARD_EVALUATED, DATA_DEPENDENT_ERROR, MISSING_/MISMATCHED_FAKE_KERNEL
    reason: str  # tlparse's wording, as Markdown (code in backticks)
    line: int
    unit: CompileUnit
    event: Event
    expr: str | None = None
    result: str | None = None  # what a data-dependent expression was specialised to
    op: str | None = None  # the custom operator of a fake-kernel failure
    mismatch: str | None = None  # why a fake kernel disagrees with the real one
    user_stack: list[Frame] = field(default_factory=list)
    stack: list[Frame] = field(default_factory=list)  # the framework stack
    locals: dict[str, str] = field(default_factory=dict)
    symbols: dict[str, str] = field(default_factory=dict)
    source_line: str | None = None  # ``frame_locals.loc``: the user's line of code
    symbol_to_sources: dict[str, str] = field(default_factory=dict)
    expr_node_id: int | None = None
    expr_tree: ExprNode | None = None
    page: Artifact | None = None  # symbolic_guard_information_N.html (export mode)
    doc_url: str | None = None
    occurrences: int = 1  # how often the trace logged this issue

    @property
    def is_guard(self) -> bool:
        """Guard failures have stacks, locals and an expression tree; fake-kernel ones do not."""
        return self.type in (GUARD_EVALUATED, DATA_DEPENDENT_ERROR)


@dataclass
class ExportReport:
    """The issues torch's own report lists, in log order, the exported program, and the
    guards torch evaluated but does not list (see :func:`export_failures`)."""

    failures: list[ExportFailure]
    exported_program: Artifact | Event | None
    guards: list[ExportFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def export_report(trace: Trace) -> ExportReport:
    """The whole report: what a "Draft Export Report" page needs."""
    issues, guards = _as_torch_reports(trace, logged_failures(trace))
    return ExportReport(issues, exported_program(trace), guards)


def export_failures(trace: Trace) -> list[ExportFailure]:
    """The issues torch's own draft-export report lists, in log order.

    torch (``torch/export/_draft_export.py``) counts an issue once however often it is logged:
    a missing fake kernel once per operator, a mismatched one once per operator and reason, a
    data-dependent error once per user stack (torch 2.6 logs the same one again for the retrace
    of each graph). It lists an evaluated guard only when the export raised a constraint
    violation and was retried with new dynamic shapes; tlparse lists every guard.
    """
    return _as_torch_reports(trace, logged_failures(trace))[0]


def _as_torch_reports(
    trace: Trace, logged: list[ExportFailure]
) -> tuple[list[ExportFailure], list[ExportFailure]]:
    """(issues torch lists, guards it does not): each repeat counted on its first record."""
    issues: list[ExportFailure] = []
    guards: list[ExportFailure] = []
    first: dict[tuple, ExportFailure] = {}
    for failure in logged:
        if failure.type == GUARD_EVALUATED and not _retried_after(trace, failure):
            guards.append(failure)
            continue
        key = _issue_key(failure)
        if key in first:
            first[key].occurrences += 1
            continue
        first[key] = failure
        issues.append(failure)
    return issues, guards


def _issue_key(failure: ExportFailure) -> tuple:
    if failure.type == MISSING_FAKE_KERNEL:
        return (failure.type, failure.op)
    if failure.type == MISMATCHED_FAKE_KERNEL:
        return (failure.type, failure.op, failure.mismatch)
    if failure.type == DATA_DEPENDENT_ERROR:
        user = failure.user_stack or [f for f in failure.stack if is_user_frame(f)]
        if user:
            return (failure.type, tuple((f.filename, f.line) for f in user))
    return (failure.type, failure.line)


_SPECIALIZED = re.compile(r"^Eq\(\s*[a-z]+\d+\s*,\s*-?\d+\s*\)$")


def _retried_after(trace: Trace, guard: ExportFailure) -> bool:
    """Whether the export was retried after this guard: torch gives the retry a new compile id
    (2.15); a trace with no compile ids cannot show it, and there a guard that specializes a
    symbol to a constant (``Eq(s0, 3)``, which violates a dim declared dynamic) counts."""
    unit = guard.unit
    if unit.id is None or unit.id.frame_id is None:
        return bool(_SPECIALIZED.match(guard.expr or ""))
    return any(
        other.id is not None and other.id.frame_id is not None and other.first_line > guard.line
        for other in trace.units.values()
    )


def logged_failures(trace: Trace) -> list[ExportFailure]:
    """Every draft-export failure record of a trace, in log order (whatever mode it was read
    in), as tlparse lists them."""
    index: dict[int, ExprNode] = {}
    failures: list[ExportFailure] = []
    for unit, event in _events_in_order(trace):
        if event.type in EXPRESSION_TYPES:
            node = expr_node(event)
            if node is not None:
                index[node.id] = node
            continue
        failure = _failure(unit, event)
        if failure is None:
            continue
        if failure.expr_node_id is not None:
            failure.expr_tree = expr_tree(failure.expr_node_id, index)
        failure.page = _guard_page(unit, event)
        failures.append(failure)
    return failures


def exported_program(trace: Trace) -> Artifact | Event | None:
    """The first ``exported_program``: a numbered artifact in export mode, else the event.

    Both carry ``payload`` and ``line``; use ``trace.read_payload(x.payload)`` for the text.
    """
    artifacts = [a for a in trace.artifacts() if a.kind == "exported_program"]
    if artifacts:
        return min(artifacts, key=lambda a: a.number)
    events = [e for u in trace.units.values() for e in u.events if e.type == "exported_program"]
    return min(events, key=lambda e: e.line) if events else None


def _events_in_order(trace: Trace) -> list[tuple[CompileUnit, Event]]:
    wanted = (*FAILURE_TYPES, *EXPRESSION_TYPES)
    found = [(u, e) for u in trace.units.values() for e in u.events if e.type in wanted]
    return sorted(found, key=lambda pair: pair[1].line)


# -- failures --------------------------------------------------------------------------------
def _failure(unit: CompileUnit, event: Event) -> ExportFailure | None:
    meta = event.meta
    if event.type == "guard_added":
        if meta.get("prefix") != "eval":
            return None  # tlparse reports only guards evaluated during export
        return _guard_failure(unit, event, GUARD_EVALUATED, _guard_reason(meta))
    if event.type in DATA_DEPENDENT_TYPES:
        return _guard_failure(unit, event, DATA_DEPENDENT_ERROR, _data_dependent_reason(meta))
    if event.type in ("missing_fake_kernel", "mismatched_fake_kernel"):
        return _fake_kernel_failure(unit, event)
    return None


def _guard_reason(meta: dict[str, Any]) -> str:
    expr = code(_text(meta.get("expr")) or NOT_LOGGED)
    return (
        f"When exporting, the following guard was evaluated {expr}. "
        "This might've resulted in a constraint violation error."
    )


def _data_dependent_reason(meta: dict[str, Any]) -> str:
    expr = code(_text(meta.get("expr")) or NOT_LOGGED)
    result = code(_text(meta.get("result")) or NOT_LOGGED)
    return (
        f"When exporting, we were unable to figure out if the expression {expr} always holds. "
        f"As a result, it was specialized to evaluate to {result}, "
        "and asserts were inserted into the graph."
    )


def _guard_failure(unit: CompileUnit, event: Event, kind: str, reason: str) -> ExportFailure:
    meta = event.meta
    frame_locals = _mapping(meta.get("frame_locals"))
    node_id = meta.get("expr_node_id")
    return ExportFailure(
        type=kind,
        reason=reason,
        line=event.line,
        unit=unit,
        event=event,
        expr=_text(meta.get("expr")),
        result=_text(meta.get("result")),
        user_stack=_user_stack(event),
        stack=list(event.stacks.get("stack", [])),
        locals=text_values(frame_locals.get("locals")),
        symbols=text_values(frame_locals.get("symbols")),
        source_line=_text(frame_locals.get("loc")),
        symbol_to_sources=text_values(meta.get("symbol_to_sources")),
        expr_node_id=node_id if _is_id(node_id) else None,
    )


def _fake_kernel_failure(unit: CompileUnit, event: Event) -> ExportFailure:
    meta = event.meta
    op = _text(meta.get("op"))
    name = code(f"torch.ops.{op or NOT_LOGGED}")
    if event.type == "missing_fake_kernel":
        kind, mismatch = MISSING_FAKE_KERNEL, None
        reason = f"{name} is missing a fake kernel implementation"
    else:
        kind, mismatch = MISMATCHED_FAKE_KERNEL, _text(meta.get("reason"))
        reason = (
            f"{name} has a fake kernel implementation, but it has incorrect behavior, "
            f"based on the real kernel. The reason for the mismatch is: {mismatch or NOT_LOGGED}"
        )
    return ExportFailure(
        type=kind,
        reason=reason,
        line=event.line,
        unit=unit,
        event=event,
        op=op,
        mismatch=mismatch,
        doc_url=FAKE_KERNEL_DOC,
    )


def _guard_page(unit: CompileUnit, event: Event) -> Artifact | None:
    """The ``symbolic_guard_information`` page the export-mode handler made for this record."""
    for artifact in unit.artifacts:
        if artifact.line == event.line and artifact.name == "symbolic_guard_information":
            return artifact
    return None


# -- the symbolic-expression tree -------------------------------------------------------------
def expr_node(event: Event) -> ExprNode | None:
    """A tree node from an ``expression_created`` or ``create_unbacked_symbol`` record."""
    meta = event.meta
    symbol = event.type == "create_unbacked_symbol"
    node_id = meta.get("node_id" if symbol else "result_id")
    if not _is_id(node_id):
        return None
    arguments = meta.get("arguments")
    argument_ids = meta.get("argument_ids")
    return ExprNode(
        id=node_id,
        result=_text(meta.get("symbol" if symbol else "result")) or "",
        method=None if symbol else _text(meta.get("method")),
        arguments=[_as_text(a) for a in arguments] if isinstance(arguments, list) else [],
        argument_ids=[a for a in argument_ids if _is_id(a)]
        if isinstance(argument_ids, list)
        else [],
        user_stack=_user_stack(event),
        stack=list(event.stacks.get("stack", [])),
        line=event.line,
        kind=event.type,
        value_range=_text(meta.get("vr")) if symbol else None,
    )


def expr_tree(root: int, index: dict[int, ExprNode]) -> ExprNode | None:
    """The tree under ``root`` (children via ``argument_ids``); each id is used at most once.

    Built iteratively in tlparse's order (depth first, arguments in order), so deep chains
    cannot hit the recursion limit. Ids missing from ``index`` are left out.
    """
    visited: set[int] = set()

    def make(node_id: int) -> ExprNode | None:
        if node_id in visited:
            return None
        visited.add(node_id)
        known = index.get(node_id)
        if known is None:
            return None
        return replace(known, children=[])

    top = make(root)
    if top is None:
        return None
    pending = [(top, iter(top.argument_ids))]
    while pending:
        node, arguments = pending[-1]
        argument = next(arguments, None)
        if argument is None:
            pending.pop()
            continue
        child = make(argument)
        if child is not None:
            node.children.append(child)
            pending.append((child, iter(child.argument_ids)))
    return top


# -- tolerant field reading --------------------------------------------------------------------
def code(text: str) -> str:
    """``text`` as a Markdown code span, with a fence longer than any backtick run inside."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def text_values(value: Any) -> dict[str, str]:
    """A logged name → value mapping as text; null values are skipped (as tlparse does)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): _as_text(v) for k, v in value.items() if v is not None}


def _as_text(value: Any) -> str:
    """Strings as they are; lists (torch 2.13: ``['u0']``) and the rest as Python shows them."""
    return value if isinstance(value, str) else repr(value)


def _text(value: Any) -> str | None:
    return None if value is None else _as_text(value)


def _user_stack(event: Event) -> list[Frame]:
    """The logged user stack, or the user's innermost frame of ``stack`` when it is empty."""
    user = event.stacks.get("user_stack")
    if user:
        return list(user)
    frame = user_frame(event.stacks)
    return [frame] if frame is not None else []


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_id(value: Any) -> bool:
    return type(value) is int


__all__ = [
    "DATA_DEPENDENT_ERROR",
    "GUARD_EVALUATED",
    "MISMATCHED_FAKE_KERNEL",
    "MISSING_FAKE_KERNEL",
    "ExportFailure",
    "ExportReport",
    "ExprNode",
    "export_failures",
    "export_report",
    "exported_program",
    "expr_tree",
    "logged_failures",
]

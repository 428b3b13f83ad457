"""Compile-id status, as the stack trie colours it (tlparse's five states, and one more)."""

from __future__ import annotations

from ..model import CompileUnit, Trace
from .exports import FAILED, SUCCEEDED, ExportCall, export_calls, loose_unit

OK = "ok"  # success
BREAK = "break"  # success with a restart, e.g. a graph break
EMPTY = "empty"  # empty graph
ERROR = "error"  # compilation failed
MISSING = "missing"  # no compilation_metrics record
INTERRUPTED = "interrupted"  # its phases were still open when the log ended
EXPORT = "export"  # a torch.export call whose outcome the trace does not record
OUTSIDE = "outside"  # [-/-]: records logged outside any compile (no compile of its own)

LABELS = {
    OK: "Success",
    BREAK: "Success with restart (e.g. graph break)",
    EMPTY: "Empty graph",
    ERROR: "Error",
    MISSING: "Metrics were missing",
    INTERRUPTED: "Interrupted: the log ends in it",
    EXPORT: "torch.export call: outcome not logged",
    OUTSIDE: "Records logged outside any compile",
}

#: The same, short enough for a badge in a table column (the full label is its tooltip).
SHORT_LABELS = {
    OK: "Success",
    BREAK: "Restarted",
    EMPTY: "Empty graph",
    ERROR: "Error",
    MISSING: "No metrics",
    INTERRUPTED: "Interrupted",
    EXPORT: "Export",
    OUTSIDE: "No compile",
}


def classify(metrics: list[dict]) -> str:
    """tlparse's rule over all attempts of one compile, with two fixes.

    A record with no ``restart_reasons`` key no longer counts as a restart, and one of no
    frame (an AOTInductor build's: no ``co_name``) is not an empty graph.
    """
    if not metrics:
        return MISSING
    if any(m.get("fail_type") for m in metrics):
        return ERROR
    if any(not m.get("graph_op_count") and m.get("co_name") for m in metrics):
        return EMPTY  # only a frame dynamo traced has a graph: not an AOTInductor build
    if any(m.get("restart_reasons") for m in metrics):
        return BREAK
    return OK


def statuses(trace: Trace, calls: list[ExportCall] | None = None) -> dict[str, str]:
    """Display id → status for every unit (attempts of one compile share their metrics);
    ``calls``: the trace's export calls, when known already."""
    by_key: dict[object, list[dict]] = {}
    running: dict[object, CompileUnit] = {}  # compile → its attempt the log ends in
    for unit in trace.units.values():
        key = _compile_key(unit)
        bucket = by_key.setdefault(key, [])
        bucket.extend(
            _status_fields(m.meta) for m in unit.metrics if m.type == "compilation_metrics"
        )
        if key in trace.open_phases and not _past_break(trace, unit):
            last = running.get(key)
            if last is None or _attempt(unit) >= _attempt(last):
                running[key] = unit
    exported = _export_outcomes(trace, calls)
    result = {}
    loose = loose_unit(trace)
    for unit in trace.units.values():
        key = _compile_key(unit)
        if unit is loose:
            result[unit.display] = OUTSIDE  # what compiled there is said by name, not status
        elif id(unit) in exported and not by_key[key]:
            result[unit.display] = exported[id(unit)]  # an export that logs no metrics
        elif running.get(key) is unit:
            # the log ends inside this compile (tlparse says "missing", or "success" when it
            # was compiling the backward graph, which torch does after the forward's metrics);
            # an old torch that logs no metrics logs no unended phases either
            result[unit.display] = INTERRUPTED
        else:
            result[unit.display] = classify(by_key[key])
    return result


def _export_outcomes(trace: Trace, calls: list[ExportCall] | None) -> dict[int, str]:
    """id(unit) → status of the export calls logged under it (the worst of them)."""
    found: dict[int, str] = {}
    for call in export_calls(trace) if calls is None else calls:
        status = {FAILED: ERROR, SUCCEEDED: OK}.get(call.outcome, EXPORT)
        for unit in call.units:
            if found.get(id(unit)) != ERROR:
                found[id(unit)] = status
    return found


def _status_fields(meta: dict) -> dict:
    """The fields :func:`classify` reads, apart from the rest of the record."""
    keys = ("fail_type", "graph_op_count", "restart_reasons", "co_name")
    return {key: meta.get(key) for key in keys}


def _attempt(unit: CompileUnit) -> int:
    return (unit.id.attempt or 0) if unit.id is not None else 0


def _compile_key(unit: CompileUnit) -> object:
    return unit.id.frame_key() if unit.id is not None else None


def _past_break(trace: Trace, unit: CompileUnit) -> bool:
    """Whether a compile id was first seen past where the input broke off or its damage shows:
    garbage read from damaged data, not a compile the end of the log cut off."""
    line = trace.stats.garbage_from
    return line is not None and unit.first_line >= line

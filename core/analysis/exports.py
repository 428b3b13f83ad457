"""``torch.export`` calls: each call the trace logged, with its outcome.

Each torch release logs an export differently, so a call is found from whatever it left:

- torch <= 2.6 (strict by default): an ordinary dynamo compile (``dynamo_start`` through
  ``torch/export``) with its own compile id and metrics.
- torch 2.10+ strict: dynamo's records all say ``[0/0]`` for every call, and each call ends
  in a ``compilation_metrics`` record of no compile id (``fullgraph_capture``'s): that record
  closes the call.
- torch 2.15 non-strict: each call gets its own compile id, and no metrics; a call that
  raised in ``make_fx`` leaves its partial graph (``make_fx_fail_partial``).
- torch 2.10 non-strict: no compile id at all; each call makes its own fake-tensor
  describer, so a new ``describer_id`` starts a call.
- ``TORCH_DTRACE`` adds an ``export`` record ("start!") at the start of each call, an
  ``exported_program`` when it succeeds and ``guard_on_data_dependent_error`` when a guard
  on an unbacked symbol raised.

A call whose outcome the trace does not record says so; the one inferred outcome (a dynamic
dim with a declared range specialized to a constant, which export refuses) says it is
inferred.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..frames import Frame, is_user_frame, user_frame
from .compile_time import AOTI_BUILD, FORWARD, FORWARD_ROOT, _seconds, _timed
from .views import (
    MAKE_FX_FAILED,
    PARTIAL_GRAPH,
    Failure,
    exception_name,
    failure_summary,
    failures,
)

if TYPE_CHECKING:  # the model's Trace.failures reads these rows
    from ..model import Artifact, CompileUnit, Event, Trace

SUCCEEDED = "succeeded"
FAILED = "failed"
UNKNOWN = "not logged"

#: The record TORCH_DTRACE writes as each export call starts (its payload is "start!").
EXPORT_START = "export"
EXPORTED_PROGRAM = "exported_program"
DATA_DEPENDENT_GUARD = "guard_on_data_dependent_error"
#: What torch raises on a guard on an unbacked symbol.
DATA_DEPENDENT_ERROR = "GuardOnDataDependentSymNode"
CONSTRAINT_VIOLATION = "Constraint violation (inferred)"

_EXPORT_FILE = re.compile(r"(?:^|[/\\])torch[/\\]_?export[/\\]")
#: Artifacts that say how a call ended (in export mode the exported program is one).
_OUTCOME_ARTIFACTS = (PARTIAL_GRAPH, EXPORTED_PROGRAM)
_UNBOUNDED = ("int_oo", "oo")
_LAST_SYM = re.compile(r'Sym\((?P<expr>[^)"]*)\)"')


@dataclass
class ExportCall:
    """One ``torch.export`` call, in log order."""

    number: int
    first_line: int
    units: list[CompileUnit] = field(default_factory=list)  # compile ids its records carry
    strict: bool | None = None  # None: the trace does not say
    call_site: Frame | None = None  # the user's line that called torch.export
    call_stack: list[Frame] = field(default_factory=list)  # the user's frames down to it
    outcome: str = UNKNOWN
    error: str = ""  # the exception (or what stands for it)
    reason: str = ""  # one line: what went wrong
    description: str = ""  # everything the trace says about it
    failed_at: Frame | None = None  # the user's line it failed on
    evidence: str = ""  # which record says so
    seconds: float | None = None
    inferred: bool = False
    outcome_line: int = 0  # the record that says it (a failure row's line)
    start_record: Event | None = None  # the ``export`` record, under TORCH_DTRACE
    start_text: str = ""  # what it holds ("start!")
    program: Event | Artifact | None = None  # the exported program, when logged
    metrics: list[Event] = field(default_factory=list)  # its compilation_metrics records
    end_line: int | None = None  # where the next call starts
    closed: bool = field(default=False, repr=False)
    describer: Any = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"export #{self.number}"

    @property
    def site_text(self) -> str:
        frame = self.call_site
        return f"{frame.short_filename.rsplit('/', 1)[-1]}:{frame.line}" if frame else ""

    @property
    def failed(self) -> bool:
        return self.outcome == FAILED


# -- finding the calls --------------------------------------------------------------------
def export_calls(trace: Trace) -> list[ExportCall]:
    """Every export call of the trace, in log order (none in a torch.compile trace)."""
    units = [u for u in trace.units.values() if _is_export_unit(u)]
    if not units:
        return []
    loose = loose_unit(trace)
    items: list[tuple[int, int, CompileUnit, Any]] = []
    for unit in units:
        if unit.id is not None and unit.id.frame_id is not None:
            items.append((unit.first_line, 0, unit, None))  # a compile id begins a call
        items += [(e.line, 1, unit, e) for e in unit.events]
        items += [(a.line, 1, unit, a) for a in unit.artifacts if a.name in _OUTCOME_ARTIFACTS]
        items += [(m.line, 1, unit, m) for m in unit.compilation_metrics]
        if unit is loose and not any(_framed(u) for u in units):
            items += [(e.line, 1, unit, e) for e in trace.describe_records(unit)]
    items.sort(key=lambda item: (item[0], item[1]))
    calls: list[ExportCall] = []
    current: ExportCall | None = None
    for line, _, unit, item in items:
        if _starts_call(current, unit, item):
            current = ExportCall(number=len(calls) + 1, first_line=line)
            calls.append(current)
        assert current is not None
        _add(current, unit, item)
    for call, following in itertools.pairwise(calls):
        call.end_line = following.first_line
    for call in calls:
        _settle(trace, call)
    return calls


def _is_export_unit(unit: CompileUnit) -> bool:
    if unit.stacks:  # a dynamo compile: an export when torch.export started it
        return any(_EXPORT_FILE.search(f.filename) for f in unit.stack)
    if not _framed(unit):
        if unit.id is not None and unit.id.compiled_autograd_id is not None:
            return False
        if any(_is_capture_metrics(m) for m in unit.compilation_metrics):
            return True
    if any(a.name in _OUTCOME_ARTIFACTS for a in unit.artifacts):
        return True
    if _framed(unit) and _describes_only(unit):
        # torch 2.15 gives each torch.export call a compile id with no dynamo_start: a
        # non-strict export of static shapes logs only its fake tensors' descriptions (a
        # restarted attempt logs no dynamo_start either: a log cut inside it has no metrics)
        return True
    return any(
        e.type in (EXPORT_START, EXPORTED_PROGRAM)
        or any(_EXPORT_FILE.search(f.filename) for f in e.stacks.get("stack", ()))
        for e in unit.events
    )


def _describes_only(unit: CompileUnit) -> bool:
    """A first attempt whose only records describe fake tensors (a dynamo compile logs its
    start, graphs or metrics; a restarted attempt belongs to one)."""
    return (
        bool(len(unit.describes))
        and not (unit.compilation_metrics or unit.artifacts or unit.events)
        and unit.id is not None
        and not unit.id.attempt
    )


def _is_capture_metrics(event: Event) -> bool:
    """A strict export's metrics (torch 2.10+): no compile id, no frame, but dynamo's IR count
    (an AOTInductor build's metrics have neither)."""
    meta = event.meta
    return (
        meta.get("compile_id") is None
        and not meta.get("co_name")
        and meta.get("ir_count") is not None
    )


def _starts_call(current: ExportCall | None, unit: CompileUnit, item: Any) -> bool:
    if current is None or current.closed:
        return True
    if _is_event(item) and item.type == EXPORT_START:
        return current.start_record is not None or item.line > current.first_line
    if item is None:  # a new compile id (a restarted attempt is the same compile)
        compiles = {u.id.frame_key() for u in current.units if u.id is not None}
        return bool(compiles) and unit.id is not None and unit.id.frame_key() not in compiles
    if _is_event(item) and item.type.startswith("describe_"):
        describer = item.meta.get("describer_id")
        return current.describer is not None and describer != current.describer
    site = _call_site(item)
    return site is not None and current.call_site is not None and site != current.call_site


def _is_event(item: object) -> bool:
    """A call's items are records (an ``Event`` has a ``type``) or artifacts (an ``Artifact``
    has a ``kind``): told apart so, the model's classes are needed for types only."""
    return hasattr(item, "type") and not hasattr(item, "kind")


def _is_artifact(item: object) -> bool:
    return hasattr(item, "kind")


def _framed(unit: CompileUnit) -> bool:
    """Whether the unit is a compile id of a frame (not ``[-/-]``, records of no compile)."""
    return unit.id is not None and unit.id.frame_id is not None


def loose_unit(trace: Trace) -> CompileUnit | None:
    """The ``[-/-]`` unit: records logged with no compile id."""
    for unit in trace.units.values():
        if unit.id is None or unit.id.is_empty:
            return unit
    return None


def _add(call: ExportCall, unit: CompileUnit, item: Any) -> None:
    if _framed(unit) and unit not in call.units:
        call.units.append(unit)
    if unit.stacks and call.call_site is None:
        call.strict = True
        _set_call_stack(call, unit.stack)
    if item is None:
        return
    if _is_event(item) and item.type.startswith("describe_"):
        if call.describer is None:
            call.describer = item.meta.get("describer_id")
        return
    if _is_event(item):
        _set_call_stack(call, item.stacks.get("stack") or [])
    if _is_artifact(item):
        if item.name == PARTIAL_GRAPH:
            _partial_graph(call, item)
        else:
            _program(call, item)
    elif item.type == "compilation_metrics":
        _metrics(call, item)
        if not _framed(unit):
            call.closed = True  # a strict export's metrics end it (torch 2.10+)
    elif item.type == EXPORT_START:
        call.start_record = item
    elif item.type == EXPORTED_PROGRAM:
        _program(call, item)
    elif item.type == DATA_DEPENDENT_GUARD:
        expr = str(item.meta.get("expr") or "?")
        _say(
            call,
            FAILED,
            item,
            error=DATA_DEPENDENT_ERROR,
            reason=f"Could not guard on data-dependent expression `{expr}`",
            evidence=DATA_DEPENDENT_GUARD,
        )


def _program(call: ExportCall, item: Event | Artifact) -> None:
    call.program = item
    record = item.type if _is_event(item) else item.name  # type: ignore[union-attr]
    _say(call, SUCCEEDED, item, evidence=record)  # "(from `exported_program`)"


def _say(call: ExportCall, outcome: str, item: Event | Artifact, **fields: Any) -> None:
    """Set the call's outcome; a later, weaker record never replaces a failure."""
    if call.outcome == FAILED and outcome != FAILED:
        return
    if call.outcome == FAILED and call.error and not call.inferred:
        return  # the first failure is the one that raised
    call.outcome = outcome
    call.outcome_line = item.line
    call.inferred = False
    for name, value in fields.items():
        setattr(call, name, value)


def _metrics(call: ExportCall, event: Event) -> None:
    call.metrics.append(event)
    meta = event.meta
    timed = _timed(meta)
    seconds = _seconds(timed, FORWARD_ROOT)
    if seconds is None:
        seconds = _seconds(timed, FORWARD)
    if seconds is None:
        seconds = meta.get("dynamo_time_before_restart_s")
    if isinstance(seconds, (int, float)):
        call.seconds = (call.seconds or 0.0) + seconds
    fail_type = exception_name(meta.get("fail_type"))
    if call.strict is None:
        call.strict = True  # only dynamo (strict) export logs metrics
    if not fail_type:
        _say(call, SUCCEEDED, event, evidence="compilation_metrics")
        return
    description = str(meta.get("fail_reason") or "(no reason logged)")
    _say(
        call,
        FAILED,
        event,
        error=fail_type,
        reason=failure_summary(description),
        description=description,
        evidence="compilation_metrics",
    )


def _partial_graph(call: ExportCall, artifact: Artifact) -> None:
    call.strict = False if call.strict is None else call.strict
    _say(
        call,
        FAILED,
        artifact,
        error=MAKE_FX_FAILED,
        reason="the traced code raised; the trace logs the graph traced so far, not the error",
        evidence=PARTIAL_GRAPH,
    )


def _settle(trace: Trace, call: ExportCall) -> None:
    """What the records of a call say together: where it failed, and what failed."""
    if call.start_record is not None and call.start_record.payload is not None:
        call.start_text = trace.read_payload(call.start_record.payload).strip()[:200]
    events = [e for u in call.units for e in u.events if _in_call(call, e.line)]
    if not call.units:  # torch 2.10 non-strict: the call's records have no compile id
        loose = loose_unit(trace)
        events = [e for e in (loose.events if loose else []) if _in_call(call, e.line)]
    if call.strict is None and events:
        call.strict = False
    unbacked = {str(e.meta.get("symbol")): e for e in events if e.type == "create_unbacked_symbol"}
    if call.outcome == FAILED and call.error == MAKE_FX_FAILED:
        partial = _partial_artifact(trace, call)
        expr = _last_symbolic(trace, partial) if partial is not None else None
        symbol = next((s for s in unbacked if expr and re.search(rf"\b{s}\b", expr)), None)
        if symbol is not None:
            call.error = f"{DATA_DEPENDENT_ERROR} (inferred)"
            call.reason = (
                f"the graph traced so far ends at `{expr}`, a guard on the unbacked `{symbol}` "
                "(a value the data decides, e.g. `.item()`)"
            )
            call.inferred = True
            call.failed_at = user_frame(unbacked[symbol].stacks)
    if call.outcome == UNKNOWN:
        _constraint_violation(call, events)
    if call.failed_at is None and call.outcome == FAILED:
        for event in reversed(events):
            frame = user_frame(event.stacks)
            if frame is not None and event.line <= call.outcome_line and frame != call.call_site:
                call.failed_at = frame
                break


def _constraint_violation(call: ExportCall, events: list[Event]) -> None:
    """A dim declared dynamic with a range (``Dim("b", min=2, max=16)``) specialized to a
    constant: export raises a constraint violation (torch 2.10+ non-strict logs no error)."""
    ranges = {
        str(e.meta.get("symbol")): str(e.meta.get("vr") or "")
        for e in events
        if e.type == "create_symbol"
    }
    for event in events:
        meta = event.meta
        if event.type != "symbolic_shape_specialization":
            continue
        symbol = str(meta.get("symbol"))
        bounds = ranges.get(symbol, "")
        if not bounds or any(b in bounds.split(",")[-1] for b in _UNBOUNDED):
            continue  # no declared range (Dim.AUTO may specialize silently)
        sources = meta.get("sources")
        source = sources[0] if isinstance(sources, list) and sources else symbol
        value = meta.get("value")
        call.outcome, call.inferred, call.outcome_line = FAILED, True, event.line
        call.error = CONSTRAINT_VIOLATION
        call.reason = (
            f"`{source}` was declared dynamic in {bounds}, but the code specialized it to "
            f"`{value}` ({meta.get('reason') or 'specialized'}): export refuses that"
        )
        call.evidence = "symbolic_shape_specialization"
        call.failed_at = user_frame(event.stacks)
        if call.failed_at == call.call_site:
            call.failed_at = None
        return


def _in_call(call: ExportCall, line: int) -> bool:
    return line >= call.first_line and (call.end_line is None or line < call.end_line)


def _partial_artifact(trace: Trace, call: ExportCall) -> Artifact | None:
    loose = loose_unit(trace)
    units = [*call.units, *([loose] if loose is not None else [])]
    for unit in units:
        for artifact in unit.artifacts:
            if artifact.name == PARTIAL_GRAPH and artifact.line == call.outcome_line:
                return artifact
    return None


def _last_symbolic(trace: Trace, artifact: Artifact) -> str | None:
    if artifact.payload is None:
        return None
    found = _LAST_SYM.findall(trace.read_payload(artifact.payload))
    return found[-1] if found else None


def _call_site(item: Any) -> Frame | None:
    if not _is_event(item):
        return None
    frames = _call_stack(item.stacks.get("stack") or [])
    return frames[-1] if frames else None


def _call_stack(stack: list[Frame]) -> list[Frame]:
    """The user's frames down to the one that called ``torch.export``: the user's code the
    stack starts with (outermost first), when torch's first frame is export's. A stack that
    starts inside torch (torch logs only its innermost frames) names no call."""
    for index, frame in enumerate(stack):
        if not is_user_frame(frame):
            return stack[:index] if _EXPORT_FILE.search(frame.filename) else []
    return []


def _set_call_stack(call: ExportCall, stack: list[Frame]) -> None:
    frames = _call_stack(stack)
    if frames and call.call_site is None:
        call.call_stack, call.call_site = frames, frames[-1]


# -- failures -----------------------------------------------------------------------------
def failures_with_exports(trace: Trace, calls: list[ExportCall] | None = None) -> list[Failure]:
    """The failures table: every failed compile, each export's labelled with its call, and
    export failures the trace logs no exception for (an inferred constraint violation)."""
    calls = export_calls(trace) if calls is None else calls
    rows = failures(trace)
    said: set[int] = set()
    for row in rows:
        call = _call_at(calls, row.line) if not row.is_restart else None
        if call is None or not call.failed:
            continue
        if _framed(row.unit) and row.unit not in call.units:
            continue
        row.export_call = call
        said.add(call.number)
        if not _framed(row.unit) and call.units:
            row.unit = call.units[0]  # a strict export's metrics (2.10+): its call's compile id
        if row.kind == MAKE_FX_FAILED or call.inferred:
            row.kind, row.description = call.error, _plain(call.reason)
        if not row.source and call.failed_at is not None:
            row.source, row.function_source = _frame_text(call.failed_at), ""
    for call in calls:
        if call.failed and call.number not in said:
            unit = call.units[0] if call.units else loose_unit(trace)
            if unit is None:
                continue
            rows.append(
                Failure(
                    unit,
                    call.error,
                    _plain(call.reason),
                    _frame_text(call.failed_at),
                    False,
                    line=call.outcome_line,
                    export_call=call,
                )
            )
    return rows


def _plain(reason: str) -> str:
    """A reason written as Markdown, as the plain text a failure's message is."""
    return reason.replace("`", "")


def _call_at(calls: list[ExportCall], line: int) -> ExportCall | None:
    for call in calls:
        if _in_call(call, line):
            return call
    return None


def _frame_text(frame: Frame | None) -> str:
    return f"{frame.short_filename}:{frame.line}" if frame else ""


# -- compiles of no compile id --------------------------------------------------------------
#: Where AOTInductor's generated code is logged (``graph_dump``): ``inductor_aot_code`` (torch
#: 2.6), ``inductor_aot_wrapper_code`` and ``inductor_aot_kernel_code`` (2.10+).
AOTI_CODE = "inductor_aot_"


def outside_compiles(trace: Trace, calls: list[ExportCall]) -> dict[int, Compiled]:
    """id(metrics record) → what compiled, for each metrics record of no compile id: a strict
    export call's (torch 2.10+ logs one per call, with no compile id), shown on the page of
    the compile id its records carry, or an AOTInductor build's (its metrics, code and graphs
    all have no compile id), shown on the ``[-/-]`` page."""
    loose = loose_unit(trace)
    if loose is None or not loose.metrics:
        return {}
    found: dict[int, Compiled] = {}
    for call in calls:
        unit = call.units[0] if call.units else loose
        for event in call.metrics:
            if event.compile_id is None or event.compile_id.is_empty:
                found[id(event)] = Compiled(call.label, "torch.export", unit, call)
    rest = [m for m in loose.metrics if id(m) not in found]
    aoti = [a for a in loose.artifacts if a.name.startswith(AOTI_CODE)]
    builds = [m for m in rest if m.type == "compilation_metrics" and _after_code(m, aoti)]
    for number, event in enumerate(builds, 1):
        label = AOTI_BUILD if len(builds) == 1 else f"{AOTI_BUILD} {number}"
        found[id(event)] = Compiled(label, "", loose)
    for event in rest:
        found.setdefault(id(event), Compiled(OUTSIDE_ANY, "", loose))
    return found


#: What a compile of no compile id that is neither an export call nor an AOTInductor build
#: is called (a row must not read "[-/-]", the records logged outside any compile).
OUTSIDE_ANY = "compile of no compile id"


@dataclass(frozen=True)
class Compiled:
    """What a metrics record of no compile id timed, and the page that shows it."""

    label: str
    function: str
    unit: CompileUnit
    call: ExportCall | None = None


def _after_code(event: Event, code: list[Artifact]) -> bool:
    """Whether AOTInductor logged its code before the metrics record that ends its build."""
    return any(a.line < event.line for a in code)


def export_of(calls: list[ExportCall]) -> dict[int, ExportCall]:
    """id(unit) → the export call a compile id belongs to (units of one call only)."""
    found: dict[int, ExportCall] = {}
    for call in calls:
        for unit in call.units:
            found.setdefault(id(unit), call)
    return found


__all__ = [
    "AOTI_BUILD",
    "FAILED",
    "SUCCEEDED",
    "UNKNOWN",
    "ExportCall",
    "export_calls",
    "export_of",
    "failures_with_exports",
    "outside_compiles",
]

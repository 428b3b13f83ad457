"""Where compile time went: the timers of ``compilation_metrics`` as a tree with self times.

torch's ``dynamo_timed`` timers nest (the whole frame contains the backend compile, which
contains Inductor, which contains code generation), so comparing their totals always names the
outermost one. A backward compile is timed in its own ``bwd_compilation_metrics`` record (its
timers are not inside the forward record's), so forward and backward are separate trees. A
timer's self time is its total minus the timers nested directly inside it; the self times of a
tree add up to its root.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..records import is_finite_number, is_whole_number

if TYPE_CHECKING:  # the model imports these views (see Trace.graph_breaks)
    from ..model import CompileUnit, Event, Trace

_US = 1e-6


@dataclass(frozen=True, eq=False)
class Timer:
    """One timer: its label, the metrics keys that carry it (first present wins; legacy
    ``*_s`` keys of older torch after the ``*_us`` ones) and the timers nested inside it.

    Each timer is one constant of this module, equal only to itself: hashed by its fields, a
    dict keyed by timers hashed a timer's whole subtree at every lookup."""

    label: str
    keys: tuple[tuple[str, float], ...]
    children: tuple[Timer, ...] = ()
    alone: str = ""  # what its self time is, when that differs from the label


def _timer(label: str, *keys: str, children: tuple[Timer, ...] = (), alone: str = "") -> Timer:
    scaled = tuple((k, _US if k.endswith("_us") else 1.0) for k in keys)
    return Timer(label, scaled, children, alone or label)


# Nesting as torch times it (torch/_dynamo/convert_frame.py, output_graph.py,
# _inductor/compile_fx.py, graph.py, async_compile.py): pre-grad passes run in the backend
# before AOTAutograd's tracing, joint-graph passes in AOTAutograd's partitioning, post-grad
# passes and code generation inside Inductor, kernel compilation while the generated module
# loads; the gc after a compile runs inside the frame timer.
_CODE_GEN = _timer(
    "Inductor code generation",
    "inductor_code_gen_cumulative_compile_time_us",
    "code_gen_time_s",
    alone="Inductor code generation alone",
    children=(_timer("Kernel compilation (async_compile)", "triton_compile_time_us"),),
)
_INDUCTOR = _timer(
    "Inductor",
    "inductor_cumulative_compile_time_us",
    "inductor_compile_time_s",
    alone="Inductor alone (lowering, cache lookups)",
    children=(_timer("Post-grad passes", "post_grad_pass_time_us"), _CODE_GEN),
)
FORWARD = _timer(
    "Dynamo (whole frame)",
    "dynamo_cumulative_compile_time_us",
    "entire_frame_compile_time_s",
    alone="Dynamo alone (tracing, guards)",
    children=(
        _timer(
            "Backend compile (AOTAutograd)",
            "aot_autograd_cumulative_compile_time_us",
            "backend_compile_time_s",
            alone="Backend compile alone (AOTAutograd)",
            children=(
                _timer("Pre-grad passes", "pre_grad_pass_time_us"),
                _timer("Joint-graph passes", "joint_graph_pass_time_us"),
                _INDUCTOR,
            ),
        ),
        _timer("Garbage collection after the compile", "gc_time_us"),
    ),
)
#: The whole compile of one record when it is more than the frame timer (timers outside it).
FORWARD_ROOT = _timer(
    "Forward compile",
    "duration_us",
    children=(FORWARD,),
    alone="Forward compile outside the timers below",
)
#: A failed compile of torch <= 2.5 logs no frame timer: the time until it raised is in
#: ``dynamo_time_before_restart_s`` ("if compilation failed, the entire time is wasted").
FAILED = _timer("Compile until it failed", "dynamo_time_before_restart_s")
BACKWARD = _timer(
    "Backward compile",
    "backward_cumulative_compile_time_us",
    "duration_us",
    children=(_INDUCTOR,),
    alone="AOTAutograd backward alone",
)

#: Timers the metrics carry whose place in the tree is not fixed (autotuning happens while
#: lowering, fusing or in a background pool; cache and profile-guided timers wrap several
#: phases), shown beside the tree, never subtracted.
ALSO_MEASURED = (
    _timer("Autotuning at compile time", "compile_time_autotune_time_us"),
    _timer(
        "Attempts discarded by restarts",
        "dynamo_compile_time_before_restart_us",
        "dynamo_time_before_restart_s",
    ),
    _timer("Remote FX graph cache reads", "remote_fx_graph_cache_get_time_us"),
    _timer("Remote FX graph cache writes", "remote_fx_graph_cache_put_time_us"),
    _timer("Remote code-state reads (PGO)", "pgo_get_remote_code_state_time_us"),
    _timer("Remote code-state writes (PGO)", "pgo_put_remote_code_state_time_us"),
)

# Float sums of legacy seconds may drift by this much.
_SLACK = 1e-6


@dataclass
class PhaseTime:
    """One timer of one compile direction: its total, self time and nested timers."""

    label: str
    alone: str  # names the self time
    seconds: float
    children: list[PhaseTime] = field(default_factory=list)

    @property
    def nested_seconds(self) -> float:
        return sum(c.seconds for c in self.children)

    @property
    def consistent(self) -> bool:
        """False when the timers inside add up to more than this one (then no self time)."""
        return self.nested_seconds <= self.seconds + _SLACK * (1 + len(self.children))

    @property
    def self_seconds(self) -> float | None:
        if not self.consistent:
            return None
        return max(0.0, self.seconds - self.nested_seconds)

    def walk(self, depth: int = 0) -> Iterable[tuple[int, PhaseTime]]:
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)


class Named(Protocol):
    """What compiled, for metrics of no compile id (see ``exports.outside_compiles``)."""

    label: str
    function: str
    unit: CompileUnit


@dataclass
class CompileTime:
    unit: CompileUnit  # the compile id whose page shows it
    forward: list[PhaseTime]  # the forward (whole-frame) tree; empty without such a record
    backward: list[PhaseTime]  # the backward compile's tree
    also: list[tuple[str, float]]  # timers overlapping the tree (see ALSO_MEASURED)
    #: what compiled, when it was no compile id's ("export #2", "AOTInductor build")
    label: str = ""
    function: str | None = None  # its function, when the unit's is not it

    @property
    def name(self) -> str:
        """What a row names: the compile id, or what compiled outside any."""
        return self.label or self.unit.display

    @property
    def seconds(self) -> float:
        """The forward (whole-frame) compile time."""
        return sum(p.seconds for p in self.forward)

    @property
    def backward_seconds(self) -> float:
        return sum(p.seconds for p in self.backward)

    @property
    def total(self) -> float:
        return self.seconds + self.backward_seconds

    @property
    def compiled_autograd(self) -> bool:
        """A compile of compiled autograd's graph (``[!0/1/0]``): its one record has the
        forward (whole-frame) form, but the graph it compiles runs in the backward pass."""
        return self.unit.id is not None and self.unit.id.compiled_autograd_id is not None

    @property
    def consistent(self) -> bool:
        return all(p.consistent for root in self.forward + self.backward for _, p in root.walk())

    def rows(self, direction: str) -> list[tuple[int, PhaseTime]]:
        """The ``forward`` or ``backward`` tree in reading order, with depths."""
        return [row for root in getattr(self, direction) for row in root.walk()]

    def self_times(self) -> Iterable[tuple[str, str, float]]:
        """``(direction, what, seconds)`` for every timer's self time (inconsistent timers,
        which have none, left out)."""
        for direction in ("forward", "backward"):
            for _, phase in self.rows(direction):
                if phase.self_seconds is not None:
                    yield direction, phase.alone, phase.self_seconds

    @property
    def slowest_phase(self) -> tuple[str, float] | None:
        """The timer with the largest self time, named with its direction."""
        best = max(self.self_times(), key=lambda item: item[2], default=None)
        if best is None:
            return None
        direction = "compiled autograd" if self.compiled_autograd else best[0]
        return (f"{best[1]} ({direction})", best[2])


def _seconds(meta: dict[str, Any], timer: Timer) -> float | None:
    """The timer's value in ``meta``; a negative or non-finite one counts as not logged."""
    for key, scale in timer.keys:
        value = meta.get(key)
        if is_finite_number(value) and value >= 0:  # type: ignore[operator]
            return value * scale
    return None


def _totals(metas: list[dict[str, Any]], timer: Timer, into: dict[Timer, float]) -> None:
    for child in timer.children:
        _totals(metas, child, into)
    values = [v for v in (_seconds(m, timer) for m in metas) if v is not None]
    if values:
        into[timer] = into.get(timer, 0.0) + sum(values)


def _tree(timer: Timer, totals: dict[Timer, float]) -> list[PhaseTime]:
    """``timer`` with the timers found inside it; a timer missing from the record hands its
    children to its parent."""
    children = [p for child in timer.children for p in _tree(child, totals)]
    if timer not in totals:
        return children
    return [PhaseTime(timer.label, timer.alone, totals[timer], children)]


def phase_tree(metas: list[dict[str, Any]], root: Timer) -> list[PhaseTime]:
    """The timers of ``metas`` (records of one direction, summed) nested under ``root``."""
    totals: dict[Timer, float] = {}
    _totals(metas, root, totals)
    tree = _tree(root, totals)
    # the outer "whole compile" timer only adds a row when something ran outside the frame
    if root is FORWARD_ROOT and len(tree) == 1 and len(tree[0].children) == 1:
        outer, frame = tree[0], tree[0].children[0]
        if abs(outer.seconds - frame.seconds) <= _SLACK:
            return [frame]
    return tree


def self_time_by_phase(
    times: Iterable[CompileTime],
) -> list[tuple[str, float | None, float | None]]:
    """``(what, forward seconds, backward seconds)``: self time per phase over all ``times``,
    largest first; None where no compile timed that phase in that direction."""
    sums: dict[str, list[float | None]] = {}
    for time in times:
        for direction, what, seconds in time.self_times():
            pair = sums.setdefault(what, [None, None])
            side = int(direction == "backward")
            pair[side] = (pair[side] or 0.0) + seconds
    rows = [(what, fwd, bwd) for what, (fwd, bwd) in sums.items()]
    return sorted(rows, key=lambda row: -((row[1] or 0.0) + (row[2] or 0.0)))


def _timed(meta: dict[str, Any]) -> dict[str, Any]:
    """A record with no compile timer (AOTInductor's, an export's) timed by its start and end."""
    if _seconds(meta, FORWARD_ROOT) is not None or _seconds(meta, FORWARD) is not None:
        return meta
    start, end = meta.get("start_time_us"), meta.get("end_time_us")
    numbers = all(is_whole_number(v) for v in (start, end))
    if numbers and end >= start:
        return {**meta, "duration_us": end - start}
    return meta


def compile_times(trace: Trace, names: Mapping[int, Named] | None = None) -> list[CompileTime]:
    """Compile units with metrics, slowest first. ``names`` (id of a metrics record → what
    compiled) splits the metrics of no compile id into the compiles they time (export calls,
    AOTInductor builds), each its own row."""
    rows = []
    for unit in trace.units.values():
        groups: dict[tuple[str, str | None, int], tuple[CompileUnit, list[Event]]] = {}
        for event in unit.metrics:
            named = names.get(id(event)) if names else None
            key = (named.label, named.function, id(named.unit)) if named else ("", None, 0)
            groups.setdefault(key, (named.unit if named else unit, []))[1].append(event)
        for (label, function, _), (shown_on, metrics) in groups.items():
            time = _compile_time(shown_on, metrics)
            if time is not None:
                time.label, time.function = label, function
                rows.append(time)
        rows += _aoti_span_times(unit)
    return sorted(rows, key=lambda r: (-r.total, r.unit.order))


#: What a compile-time row calls an AOTInductor build (as ``exports.AOTI_BUILD``).
AOTI_BUILD = "AOTInductor build"


def _aoti_span_times(unit: CompileUnit) -> list[CompileTime]:
    """AOTInductor builds no metrics record times (torch 2.6 logs one under the export's
    compile id, after that compile's metrics), timed by their ``inductor_compile`` span."""
    last = max((m.line for m in unit.metrics), default=0)
    spans = [seconds for line, seconds in unit.aoti_spans if line > last]
    return [
        CompileTime(
            unit,
            [PhaseTime("Inductor (inductor_compile)", "Inductor (inductor_compile)", seconds)],
            [],
            [],
            label=AOTI_BUILD if len(spans) == 1 else f"{AOTI_BUILD} {number}",
            function="",
        )
        for number, seconds in enumerate(spans, 1)
    ]


def _compile_time(unit: CompileUnit, metrics: list[Event]) -> CompileTime | None:
    forward = [_timed(m.meta) for m in metrics if m.type == "compilation_metrics"]
    backward = [m.meta for m in metrics if m.type == "bwd_compilation_metrics"]
    if not forward and not backward:
        return None
    tree = phase_tree(forward, FORWARD_ROOT)
    failed = not tree and any(m.get("fail_type") for m in forward)
    if failed:
        tree = phase_tree(forward, FAILED)
    also: list[tuple[str, float]] = []
    for timer in ALSO_MEASURED:
        if failed and FAILED.keys[0] in timer.keys:
            continue  # the failed compile's own time, shown as its tree
        values = [v for v in (_seconds(m, timer) for m in forward + backward) if v]
        if values:
            also.append((timer.label, sum(values)))
    return CompileTime(unit, tree, phase_tree(backward, BACKWARD), also)

"""Compiles cut off by the end of the log: the process died (killed, out of memory, a crash)
while compiling, or the input broke off there (a cut download, damaged compressed data).

Torch logs each phase of a compile as a chromium begin/end pair (in a ``finally``: a compile
that fails ends its phases too). A compile whose phases were still open when the log ended was
running when the log stopped; its innermost open phase says where. That can be after its
``compilation_metrics``: the backward graph is compiled on the first backward call. The builder
records the open phases while reading (:attr:`Trace.open_phases`); :mod:`.status` calls such a
compile interrupted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import CompileUnit, Phase, Trace
from .status import INTERRUPTED

#: The stage a phase belongs to, by the names torch's ``dynamo_timed`` gives its phases; the
#: innermost open phase with a known name names the stage.
STAGES = {
    "compile_file": "Inductor: compiling generated code",
    "compile_fx.<locals>.bw_compiler": "Inductor",
    "Scheduler.codegen": "Inductor code generation",
    "Scheduler.__init__": "Inductor scheduling",
    "GraphLowering.codegen": "Inductor code generation",
    "code_gen": "Inductor code generation",
    "GraphLowering.compile_to_fn": "Inductor code generation",
    "GraphLowering.compile_to_module": "Inductor code generation",
    "PyCodeCache.load_by_key_path": "Inductor: loading the generated code",
    "async_compile.wait": "Inductor: compiling kernels",
    "GraphLowering.run": "Inductor lowering",
    "_recursive_post_grad_passes": "Inductor post-grad passes",
    "inductor_compile": "Inductor",
    "fx_codegen_and_compile": "Inductor",
    "compile_fx_inner": "Inductor",
    "_recursive_joint_graph_passes": "AOTAutograd joint graph passes",
    "create_aot_dispatcher_function": "AOTAutograd",
    "_recursive_pre_grad_passes": "Inductor pre-grad passes",
    "backend_compile": "the backend compiler",
    "build_guards": "Dynamo guard building",
    "bytecode_tracing": "Dynamo tracing",
    "entire_backward_compile": "the backward compile",
    "entire_frame_compile": "Dynamo",
    "dynamo": "Dynamo",
}
BACKWARD = "entire_backward_compile"
_DAY = 24 * 3600


@dataclass(frozen=True)
class Interrupted:
    """One compile the log's end cut off."""

    unit: CompileUnit  # the attempt that was running
    phases: list[Phase]  # open at the end of the log, outermost first
    last_line: int  # the log's last line
    last_time: str | None  # the glog time of the log's last record (None: not to be trusted)
    input_break: str = ""  # where the input broke off, when it did: the process need not have died

    @property
    def phase(self) -> Phase:
        """The innermost open phase: what it was doing."""
        return self.phases[-1]

    @property
    def stage(self) -> str:
        """What it was doing, in words (``Inductor code generation``)."""
        names = [phase.name for phase in self.phases]
        label = next((STAGES[n] for n in reversed(names) if n in STAGES), self.phase.name)
        if BACKWARD in names and label != STAGES[BACKWARD]:
            label += " of the backward graph"
        return label

    @property
    def metrics_logged(self) -> bool:
        """Whether dynamo had finished (and logged metrics) before the log ended."""
        return bool(self.unit.compilation_metrics)

    def seconds_before_end(self, phase: Phase) -> float | None:
        """How long before the log's last record ``phase`` began (the log's clock)."""
        start, end = _seconds(phase.time), _seconds(self.last_time)
        if start is None or end is None:
            return None
        return (end - start) % _DAY  # the log's times have no date: past midnight wraps


def interrupted(trace: Trace, statuses: dict[str, str]) -> list[Interrupted]:
    """The compiles ``statuses`` calls interrupted, each with where the log left it, the
    last one to begin first."""
    found = []
    input_break = trace.stats.break_text()
    # past damaged data the last record may be garbage: its time says nothing
    last_time = None if input_break else trace.last_time
    for unit in trace.units.values():
        if unit.id is not None and statuses.get(unit.display) == INTERRUPTED:
            phases = trace.open_phases[unit.id.frame_key()]
            found.append(Interrupted(unit, phases, trace.stats.total_lines, last_time, input_break))
    return sorted(found, key=lambda cut: cut.phase.line, reverse=True)


def _seconds(time: str | None) -> float | None:
    """Seconds since midnight of a glog time ``HH:MM:SS.uuuuuu``."""
    try:
        hours, minutes, seconds = (time or "").split(":")
        return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    except ValueError:
        return None

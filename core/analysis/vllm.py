"""What a vLLM run logged about its compilation, read back from the artifacts in log order.

vLLM logs, per model it compiles (a "compile call"): a ``vllm_compile_event`` (fresh compile or
AOT cache hit, before the config), its ``vllm_compilation_config``, the graph split at the
attention ops (``vllm_piecewise_split_graph``), then for each piecewise subgraph and each compile
range or size a ``vllm_piecewise_compile_start`` followed by that subgraph's graphs
(``vllm_submod_*`` / ``vllm_subgraph_*``, Inductor's artifacts) and, with vLLM's pass logging,
the graph after each custom pass (``vllm_post_grad.<i>.<Pass>``). Everything after a compile
start belongs to that subgraph until the next one, as tlparse 0.4.8 reads it. The piecewise
records carry a stack instead of a compile id, so they sit in the ``unknown`` unit: the order of
the log, not the compile id, is what ties them together.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..model import Artifact, CompileUnit, Trace
from ..records import is_whole_number

CONFIG = "vllm_compilation_config"
COMPILE_EVENT = "vllm_compile_event"
COMPILE_START = "vllm_piecewise_compile_start"
SPLIT_GRAPH = "vllm_piecewise_split_graph"
BEFORE_PASSES = "before_post_grad_graph"
_PASS = re.compile(r"^vllm_post_grad\.(\d+)\.(.+)$")
_PATTERNS = "vllm_patterns."
#: Lines of one pass diff shown on the page; the graphs themselves stay linked in full.
MAX_DIFF_LINES = 2000


@dataclass
class Placed:
    """An artifact and the compile unit whose page shows it."""

    artifact: Artifact
    unit: CompileUnit


@dataclass
class PassDiff:
    """A custom pass's graph against the graph before it (``before_post_grad_graph`` or the
    previous pass), as a unified diff."""

    index: int
    name: str
    graph: Placed
    before: Placed | None
    diff: str  # "" when the graph did not change
    truncated: bool = False


@dataclass
class Subgraph:
    """One piecewise compile: a subgraph compiled for one range or size."""

    index: int
    submod: str
    range_start: int | None
    range_end: int | None
    single_size: bool
    cudagraph_size: bool
    planned: int | None = None  # vLLM's total_piecewise_compiles for the call
    artifacts: list[Placed] = field(default_factory=list)
    passes: list[PassDiff] = field(default_factory=list)

    @property
    def size_or_range(self) -> str:
        """tlparse's group key: ``size 8`` or ``range [1, 16384]``."""
        if self.single_size:
            return f"size {self.range_start}"
        return f"range [{self.range_start}, {self.range_end}]"


@dataclass
class CompileCall:
    """One model vLLM compiled: its config and its piecewise subgraphs."""

    index: int
    config: dict[str, Any] | None = None
    config_artifact: Placed | None = None
    event_type: str | None = None
    split_graph: Placed | None = None
    before: list[Placed] = field(default_factory=list)  # before the first subgraph
    subgraphs: list[Subgraph] = field(default_factory=list)
    passes: list[PassDiff] = field(default_factory=list)  # passes before any subgraph

    @property
    def total_planned(self) -> int | None:
        """How many piecewise compiles vLLM said the call would make."""
        return next((s.planned for s in self.subgraphs if s.planned is not None), None)

    def groups(self) -> list[tuple[str, list[Subgraph]]]:
        """The subgraphs grouped by compile range or size, in first-seen order."""
        grouped: dict[str, list[Subgraph]] = {}
        for subgraph in self.subgraphs:
            grouped.setdefault(subgraph.size_or_range, []).append(subgraph)
        return list(grouped.items())


def is_vllm_artifact(name: str) -> bool:
    return name.startswith("vllm_")


def compile_calls(trace: Trace) -> list[CompileCall]:
    """The vLLM compile calls of ``trace`` (empty when it is not a vLLM run)."""
    units = trace.units.values()
    if not any(is_vllm_artifact(a.name) for u in units for a in u.artifacts):
        return []
    placed = sorted(
        (Placed(a, u) for u in units for a in u.artifacts if a.path),
        key=lambda p: (p.artifact.line, p.artifact.number),
    )
    calls: list[CompileCall] = []
    pending_event: str | None = None
    baseline: Placed | None = None

    def current() -> CompileCall:
        if not calls:
            calls.append(CompileCall(0))
        return calls[-1]

    for item in placed:
        name = item.artifact.name
        if name == COMPILE_EVENT:
            event = _json(trace, item.artifact)
            if isinstance(event.get("type"), str):
                pending_event = event["type"]
            continue
        if name == CONFIG:
            call = current()
            if call.config is not None or call.subgraphs:
                call = CompileCall(len(calls))
                calls.append(call)
                baseline = None
            call.config, call.config_artifact = _json(trace, item.artifact), item
            call.event_type, pending_event = call.event_type or pending_event, None
            continue
        call = current()
        if name == COMPILE_START:
            info = _json(trace, item.artifact)
            call.subgraphs.append(_subgraph(info, len(call.subgraphs)))
            continue
        if name == SPLIT_GRAPH:
            call.split_graph = item
        if name == BEFORE_PASSES:
            baseline = item
        match = _PASS.match(name)
        if match:
            diff = _pass_diff(trace, int(match.group(1)), match.group(2), item, baseline)
            (call.subgraphs[-1].passes if call.subgraphs else call.passes).append(diff)
            baseline = item
            continue
        if call.subgraphs:
            call.subgraphs[-1].artifacts.append(item)
        else:
            call.before.append(item)
    return calls


def is_pattern_dump(name: str) -> bool:
    return name.startswith(_PATTERNS)


def _subgraph(info: dict[str, Any], position: int) -> Subgraph:
    index = info.get("piecewise_index")
    index = index if is_whole_number(index) else position
    submod = info.get("submod_name")
    return Subgraph(
        index=index,
        submod=submod if isinstance(submod, str) and submod else f"subgraph_{index}",
        range_start=_int(info.get("compile_range_start")),
        range_end=_int(info.get("compile_range_end")),
        single_size=info.get("is_single_size") is True,
        cudagraph_size=info.get("is_cudagraph_capture_size") is True,
        planned=_int(info.get("total_piecewise_compiles")),
    )


def _pass_diff(
    trace: Trace, index: int, name: str, graph: Placed, before: Placed | None
) -> PassDiff:
    after_text = _text(trace, graph.artifact)
    before_text = _text(trace, before.artifact) if before is not None else ""
    lines = list(
        difflib.unified_diff(
            before_text.splitlines(),
            after_text.splitlines(),
            fromfile=before.artifact.name if before is not None else "(no graph before)",
            tofile=graph.artifact.name,
            lineterm="",
            n=3,
        )
    )
    truncated = len(lines) > MAX_DIFF_LINES
    return PassDiff(index, name, graph, before, "\n".join(lines[:MAX_DIFF_LINES]), truncated)


def _text(trace: Trace, artifact: Artifact) -> str:
    return trace.read_payload(artifact.payload) if artifact.payload is not None else ""


def _json(trace: Trace, artifact: Artifact) -> dict[str, Any]:
    try:
        value = json.loads(_text(trace, artifact))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if is_whole_number(value) else None

"""The vLLM summary page (``vllm.md``), added to the ordinary report of a vLLM run.

tlparse 0.4.8 replaces its index with this summary; tlsite keeps every other page as it is and
adds this one after the overview, which links to it. What the page shows is read by
:mod:`tlsite.core.analysis.vllm`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from ..analysis import vllm
from .page import Page
from .templating import render_markdown

if TYPE_CHECKING:
    from .pages import ReportRenderer

VLLM_PAGE = "vllm.md"
#: A pass diff of at most this many lines is shown open.
OPEN_DIFF_LINES = 60

_CALLS: WeakKeyDictionary[ReportRenderer, list[vllm.CompileCall]] = WeakKeyDictionary()


def calls(renderer: ReportRenderer) -> list[vllm.CompileCall]:
    """The run's vLLM compile calls, read once per renderer (the overview asks too)."""
    found = _CALLS.get(renderer)
    if found is None:
        found = _CALLS[renderer] = vllm.compile_calls(renderer.trace)
    return found


def vllm_lead(renderer: ReportRenderer) -> dict[str, Any] | None:
    """What the overview says of a vLLM run (None for any other trace)."""
    found = calls(renderer)
    if not found:
        return None
    return {
        "calls": len(found),
        "subgraphs": sum(len(c.subgraphs) for c in found),
        "passes": sum(len(c.passes) + sum(len(s.passes) for s in c.subgraphs) for c in found),
        "href": VLLM_PAGE,
    }


def vllm_pages(renderer: ReportRenderer) -> tuple[list[Page], list[Any]]:
    """The vLLM page and its navigation entry, or nothing when the trace is not a vLLM run."""
    found = calls(renderer)
    if not found:
        return [], []
    md = render_markdown(
        "vllm.md",
        source=renderer.trace.source,
        calls=[_call_view(c) for c in found],
        max_diff_lines=vllm.MAX_DIFF_LINES,
    )
    return [Page(VLLM_PAGE, md, "vLLM compilation")], [
        {"vLLM compilation": renderer.prefix + VLLM_PAGE}
    ]


def _call_view(call: vllm.CompileCall) -> dict[str, Any]:
    config = call.config or {}
    model = config.get("model")
    return {
        "index": call.index,
        "model": model if isinstance(model, str) else "",
        "event_type": call.event_type,
        "config": [(key, _value(value)) for key, value in config.items()],
        "config_name": call.config_artifact.artifact.name if call.config_artifact else "",
        "config_href": _href(call.config_artifact) if call.config_artifact else None,
        "config_raw": call.config_artifact.artifact.path if call.config_artifact else None,
        "before": [_artifact(p) for p in call.before],
        "passes": [_pass(d) for d in call.passes],
        "groups": [(key, [_subgraph(s) for s in subgraphs]) for key, subgraphs in call.groups()],
        "n_subgraphs": len(call.subgraphs),
        "n_distinct": len({s.submod for s in call.subgraphs}),
        "total": call.total_planned,
    }


def _subgraph(subgraph: vllm.Subgraph) -> dict[str, Any]:
    return {
        "submod": subgraph.submod,
        "index": subgraph.index,
        "cudagraph_size": subgraph.cudagraph_size,
        "artifacts": [_artifact(p) for p in subgraph.artifacts],
        "passes": [_pass(d) for d in subgraph.passes],
    }


def _artifact(placed: vllm.Placed) -> dict[str, Any]:
    artifact = placed.artifact
    note = ""
    if artifact.name == vllm.SPLIT_GRAPH:
        note = "the graph split at the attention ops"
    elif vllm.is_pattern_dump(artifact.name):
        note = "the patterns this pass matches"
    return {
        "name": artifact.name,
        "number": artifact.number,
        "href": _href(placed),
        "raw": artifact.path,
        "note": note,
    }


def _pass(diff: vllm.PassDiff) -> dict[str, Any]:
    lines = diff.diff.splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return {
        "index": diff.index,
        "name": diff.name,
        "graph_name": diff.graph.artifact.name,
        "graph_href": _href(diff.graph),
        "graph_raw": diff.graph.artifact.path,
        "before_name": diff.before.artifact.name if diff.before else "",
        "before_href": _href(diff.before) if diff.before else None,
        "diff": diff.diff,
        "added": added,
        "removed": removed,
        "open": len(lines) <= OPEN_DIFF_LINES,
        "truncated": diff.truncated,
    }


def _href(placed: vllm.Placed) -> str:
    return f"{placed.unit.dirname}/index.md#artifact-{placed.artifact.number}"


def _value(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)

"""Readable facts from JSON artifacts whose raw dump says little at a glance.

- ``min_cut_information`` (torch/_functorch/_activation_checkpointing/ac_logging_utils.py):
  the activation-checkpointing decision of the min-cut partitioner under an activation
  memory budget: which activations the knapsack saves and which the backward recomputes.
- ``triton_kernel_info`` (torch/_inductor/async_compile.py): per Triton kernel, its compile
  time and autotuning-cache state.
- ``memoizer_artifacts``: Inductor's memoizer cache (the parameters and results of the calls it
  recorded), grouped in collections as torch's memoizer dumps them
  (torch/_inductor/runtime/caching/interfaces.py, ``CacheDump``).

Each reader takes the decoded JSON and returns None when it is not the shape torch writes, so
the page falls back to the raw JSON alone.

Text artifacts a user reads as they are get a line saying what they are (:func:`text_view`):
``aot_autograd_runtime_wrappers`` (torch 2.15: six wrapper artifacts merged into one, each a
``# name`` section), ``aot_forward_graph_fw_metadata`` (AOTAutograd's ``ViewAndMutationMeta``)
and ``dynamo_side_effects`` (what Dynamo replays after the graph runs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..records import is_finite_number, is_whole_number

#: Rows a table of candidates, kernels or cache entries shows at most.
MAX_ROWS = 200
MAX_CELL_CHARS = 160


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _number(value: Any) -> float | None:
    return float(value) if is_finite_number(value) else None


@dataclass
class Candidate:
    """A node the memory budget let the partitioner trade: save it, or recompute it."""

    name: str
    target: str
    shape: str
    memory: float | None  # bytes
    runtime: float | None  # the partitioner's estimate (its own unit)
    saved: bool | None  # None: the trace does not say
    source: str  # the innermost user frame of the node's stack trace, "file:line in fn"


@dataclass
class MinCut:
    budget: float | None
    graph_nodes: int | None
    graph_edges: int | None
    min_size_gb: float | None
    max_size_gb: float | None
    saved_size_gb: float | None
    expected_runtime: float | None
    more_aggressive_ratio: float | None
    aggressive_ratio: float | None
    candidates: list[Candidate] = field(default_factory=list)
    saved_values: list[str] = field(default_factory=list)
    more_candidates: int = 0

    @property
    def saved(self) -> int:
        return sum(1 for c in self.candidates if c.saved)

    @property
    def recomputed(self) -> int:
        return sum(1 for c in self.candidates if c.saved is False)


def _last_frame(stack_trace: Any) -> str:
    """``file:line in fn`` of the last ``File "...", line N, in fn`` of a node's stack trace."""
    if not isinstance(stack_trace, str):
        return ""
    last = ""
    for line in stack_trace.splitlines():
        line = line.strip()
        if line.startswith('File "') and '", line ' in line:
            path, _, rest = line[6:].partition('", line ')
            number, _, func = rest.partition(", in ")
            last = f"{path.rsplit('/', 1)[-1]}:{number} in {func}" if func else ""
    return last


def _op(target: Any) -> str:
    """``aten.addmm.default`` as ``aten.addmm`` (the overload says little here)."""
    text = _short(target)
    return text.removesuffix(".default")


def _shape(shape: Any) -> str:
    """``torch.Size([32, 64])`` as ``[32, 64]``."""
    text = _short(shape)
    if text.startswith("torch.Size(") and text.endswith(")"):
        return text[len("torch.Size(") : -1]
    return text


def min_cut(data: Any) -> MinCut | None:
    """The knapsack's decision, from a ``min_cut_information`` payload."""
    if not isinstance(data, dict) or "Memory Budget" not in data:
        return None
    nodes = data.get("Joint Graph Node Information")
    nodes = nodes if isinstance(nodes, dict) else {}
    edges = data.get("Joint Graph Edges")
    order = data.get("Recomputable Banned Nodes Order")
    order = [n for n in order if isinstance(n, str)] if isinstance(order, list) else []
    saved_idx = data.get("Knapsack Saved Nodes")
    saved_idx = (
        {i for i in saved_idx if is_whole_number(i)} if isinstance(saved_idx, list) else set()
    )
    memories = data.get("Absolute Memories")
    runtimes = data.get("Knapsack Input Runtimes")
    candidates = []
    for index, name in enumerate(order[:MAX_ROWS]):
        node = nodes.get(name)
        node = node if isinstance(node, dict) else {}
        info = node.get("recomputable_candidate_info")
        info = info if isinstance(info, dict) else {}
        saved = info.get("is_saved")
        if not isinstance(saved, bool):
            saved = (
                index in saved_idx if saved_idx or data.get("Knapsack Recomputed Nodes") else None
            )
        memory = info.get(
            "memory",
            memories[index] if isinstance(memories, list) and index < len(memories) else None,
        )
        runtime = info.get(
            "runtime",
            runtimes[index] if isinstance(runtimes, list) and index < len(runtimes) else None,
        )
        candidates.append(
            Candidate(
                name=name,
                target=_op(node.get("target", "")),
                shape=_shape(node.get("shape", "")),
                memory=_number(memory),
                runtime=_number(runtime),
                saved=saved,
                source=_last_frame(node.get("stack_trace")),
            )
        )
    saved_values = data.get("Min Cut Solution Saved Values")
    return MinCut(
        budget=_number(data.get("Memory Budget")),
        graph_nodes=data.get("Joint Graph Size")
        if isinstance(data.get("Joint Graph Size"), int)
        else None,
        graph_edges=edges.get("Total")
        if isinstance(edges, dict) and isinstance(edges.get("Total"), int)
        else None,
        min_size_gb=_number(data.get("Min Activation Size (GB)")),
        max_size_gb=_number(data.get("Max Activation Size (GB)")),
        saved_size_gb=_number(data.get("Saved Values Activation Size (GB)")),
        expected_runtime=_number(data.get("Expected Runtime")),
        more_aggressive_ratio=_number(data.get("More Aggressive Saved Values Mem Ratio")),
        aggressive_ratio=_number(data.get("Aggressive Recomputation Saved Values Mem Ratio")),
        candidates=candidates,
        saved_values=[_short(v) for v in saved_values[:MAX_ROWS]]
        if isinstance(saved_values, list)
        else [],
        more_candidates=max(len(order) - MAX_ROWS, 0),
    )


@dataclass
class KernelInfo:
    name: str
    compile_ms: float | None
    cache: str  # the autotune cache state: "hit", "miss", "only 1 config", ...
    configs: str  # how many configs were autotuned, or the one config used


def _config_text(config: Any) -> str:
    """``[["XBLOCK", 128], ["num_warps", 4]]`` as ``XBLOCK=128, num_warps=4``."""
    if isinstance(config, list) and all(isinstance(p, list) and len(p) == 2 for p in config):
        return ", ".join(f"{k}={v}" for k, v in config)
    return _short(config)


def triton_kernels(data: Any) -> list[KernelInfo] | None:
    """Kernels of a ``triton_kernel_info`` payload, slowest to compile first."""
    if not isinstance(data, dict) or not data:
        return None
    rows = []
    for name, info in data.items():
        if not isinstance(info, dict):
            return None
        us = _number(info.get("compile_time_us"))
        if "only_config" in info:
            configs = _config_text(info["only_config"])
        elif info.get("num_configs") is not None:
            configs = f"{_short(info['num_configs'])} autotuned"
        else:
            configs = ""
        rows.append(
            KernelInfo(
                name=_short(name),
                compile_ms=None if us is None else us / 1000,
                cache=_short(info.get("autotune_cache_state", "")),
                configs=configs,
            )
        )
    rows.sort(key=lambda r: -(r.compile_ms or 0.0))
    return rows[:MAX_ROWS]


def kernel_compile_times(value: Any) -> list[tuple[str, float]]:
    """The ``triton_kernel_compile_times_us`` metric (a JSON list of ``[kernel, µs]``, the
    slowest few) as ``(kernel, milliseconds)``."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if not isinstance(value, list):
        return []
    rows = []
    for item in value:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
            us = _number(item[1])
            if us is not None:
                rows.append((item[0], us / 1000))
    return sorted(rows, key=lambda r: -r[1])


@dataclass
class MemoizerEntry:
    collection: str
    key: str
    params: str
    result: str


@dataclass
class Memoizer:
    size: int | None  # the ``cache_size`` it logged
    collections: list[tuple[str, int]]  # (name, entries)
    entries: list[MemoizerEntry]
    more_entries: int = 0


@dataclass
class TextView:
    """What a text artifact is, with what its text says at a glance."""

    sections: list[str] = field(default_factory=list)  # ``# name`` sections, in order
    inputs: int | None = None  # fw_metadata: inputs, those it mutates, outputs aliasing one
    mutated: int | None = None
    outputs: int | None = None
    aliased: int | None = None
    effects: list[str] = field(default_factory=list)  # side effects, one line each


_SECTION = re.compile(r"^# (\w+)$", re.M)
_OUTPUT_ALIAS = re.compile(r"OutputAliasInfo\(output_type=<?(?:OutputType\.)?(\w+)")
#: Searched for as the literal it is, at memchr speed: a pattern that starts with ``\b`` is
#: tried at every character (a big trace's metadata is megabytes); the word start is checked
#: at each match (:func:`_at_word_starts`).
_MUTATES = re.compile(r"mutates_data=True")
#: Dynamo joins its side-effect messages with this line (torch/_dynamo/side_effects.py); each
#: message's first line says what it replays ("Mutating object of type …").
_EFFECTS_SEPARATOR = re.compile(r"\n\n=+\n\n")


def _at_word_starts(pattern: re.Pattern[str], text: str) -> int:
    r"""How many matches of ``pattern`` (which starts with a word character) start a word:
    those ``\b`` + ``pattern`` finds (``\w`` is what ``str.isalnum`` or ``_`` is)."""
    count = 0
    for match in pattern.finditer(text):
        start = match.start()
        before = text[start - 1] if start else " "
        count += not (before.isalnum() or before == "_")
    return count


def text_view(name: str, text: str) -> TextView | None:
    """The view of a text artifact of one of the kinds above; None for any other."""
    if name == "aot_autograd_runtime_wrappers":
        return TextView(sections=_SECTION.findall(text)[:MAX_ROWS])
    if name == "aot_forward_graph_fw_metadata":
        inputs = text.count("InputAliasInfo(")
        outputs = _OUTPUT_ALIAS.findall(text)
        return TextView(
            inputs=inputs,
            mutated=_at_word_starts(_MUTATES, text),
            outputs=len(outputs),
            aliased=sum(1 for kind in outputs if kind != "non_alias"),
        )
    if name == "dynamo_side_effects":
        messages = [m.strip() for m in _EFFECTS_SEPARATOR.split(text) if m.strip()]
        return TextView(effects=[_short(m.splitlines()[0]) for m in messages[:MAX_ROWS]])
    return None


def memoizer(data: Any) -> Memoizer | None:
    """A ``memoizer_artifacts`` payload: ``{"collections": {name: {key: {"params", "result"}}},
    "cache_size": N}`` (a collection's name is the memoizer's sub key; ``"null"`` for none)."""
    if not isinstance(data, dict) or not isinstance(data.get("collections"), dict):
        return None
    collections = []
    entries = []
    total = 0
    for name, items in data["collections"].items():
        if not isinstance(items, dict):
            continue
        label = "(no sub key)" if name == "null" else str(name)
        collections.append((label, len(items)))
        for key, entry in items.items():
            total += 1
            if len(entries) >= MAX_ROWS:
                continue
            entry = entry if isinstance(entry, dict) else {"result": entry}
            entries.append(
                MemoizerEntry(
                    label, _short(key), _short(entry.get("params")), _short(entry.get("result"))
                )
            )
    size = data.get("cache_size")
    return Memoizer(
        size=size if isinstance(size, int) else None,
        collections=collections,
        entries=entries,
        more_entries=total - len(entries),
    )

"""The readable views of JSON artifacts (min-cut, Triton kernels, memoizer, text views) take
whatever a trace holds: a payload of the wrong shape is shown raw, never a traceback."""

from __future__ import annotations

import random
from typing import Any

from tlsite.core.analysis import artifact_details as details

_KEYS = [
    "Memory Budget",
    "Joint Graph Node Information",
    "Joint Graph Edges",
    "Recomputable Banned Nodes Order",
    "Knapsack Saved Nodes",
    "Absolute Memories",
    "Knapsack Input Runtimes",
    "Knapsack Recomputed Nodes",
    "recomputable_candidate_info",
    "is_saved",
    "memory",
    "name",
    "config",
    "compile_time",
    "kernel",
    "collection",
    "entries",
    "key",
    "params",
    "result",
]
_LEAVES = [None, True, 1, -3, 2.5, float("nan"), "x", "", [], {}, [[0], 1], {"a": [1]}]


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice(_LEAVES)
    if roll < 0.6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(_KEYS): _value(rng, depth + 1) for _ in range(rng.randint(0, 6))}


def test_min_cut_with_nested_lists_for_saved_nodes_is_read() -> None:
    """Was ``TypeError: unhashable type: 'list'`` (the whole build died)."""
    view = details.min_cut(
        {
            "Memory Budget": 0.3,
            "Recomputable Banned Nodes Order": ["mul", "relu"],
            "Knapsack Saved Nodes": [[0], 1],
        }
    )
    assert view is not None


def test_the_json_views_take_any_shape() -> None:
    rng = random.Random(20)
    for _ in range(3000):
        data = _value(rng)
        if isinstance(data, dict):
            data.setdefault("Memory Budget", _value(rng))
        details.min_cut(data)
        details.triton_kernels(data)
        details.kernel_compile_times(data)
        details.memoizer(data)

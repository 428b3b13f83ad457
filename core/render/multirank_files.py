"""The machine-readable files of a multi-rank report, in tlparse's formats and at its paths.

``chromium_events.json`` (every rank's events, ``pid`` = rank), ``chromium_trace_with_runtime.json``
(runtime estimates laid out per rank and graph for Perfetto), ``runtime_estimations.json``,
``collective_schedules.json`` and ``rank_<N>/collectives_parity.json``. Scripts written for
tlparse's ``--all-ranks-html`` output keep working.

The big ones are streamed from the spill files the rank workers wrote, one rank at a time, so
writing them does not hold every rank's events in memory.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..multirank import RankSummary

CHROMIUM_EVENTS = "chromium_events.json"
RUNTIME_TRACE = "chromium_trace_with_runtime.json"
RUNTIME_ESTIMATIONS = "runtime_estimations.json"
COLLECTIVE_SCHEDULES = "collective_schedules.json"
COLLECTIVES_PARITY = "collectives_parity.json"
PARITY_DESCRIPTION = (
    "Difference of # of collectives in scheduler and inductor output code and missing wait "
    "collectives"
)


class _JsonArray:
    """Writes a JSON array one element per line, so files of any size stream out."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.count = 0

    def __enter__(self) -> _JsonArray:
        self.stream.write("[")
        return self

    def add(self, value: Any) -> None:
        self.add_json(json.dumps(value, ensure_ascii=False))

    def add_json(self, text: str) -> None:
        """Add an element given as its JSON text (on one line)."""
        self.stream.write("\n  " if self.count == 0 else ",\n  ")
        self.stream.write(text)
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        self.stream.write("\n]\n" if self.count else "]\n")


def _lines(path: str | None) -> Iterator[str]:
    if path is None:
        return
    with open(path, encoding="utf-8") as spill:
        for line in spill:
            if line.strip():
                yield line


def _runtime_graphs(summary: RankSummary) -> Iterator[dict[str, Any]]:
    for line in _lines(summary.runtime_path):
        yield json.loads(line)


# -- chromium_events.json -----------------------------------------------------------------------
def write_chromium_events(ranks: Sequence[RankSummary], out: Path) -> int:
    """Join every rank's chromium events, whose ``pid`` is the rank's (each rank's process
    set it); returns how many.

    Like tlparse, the file is written only when there is at least one event.
    """
    if not any(r.chromium_path for r in ranks):
        return 0
    target = out / CHROMIUM_EVENTS
    with open(target, "w", encoding="utf-8") as dest, _JsonArray(dest) as array:
        for summary in sorted(ranks, key=lambda r: r.rank):
            for line in _lines(summary.chromium_path):
                array.add_json(line.rstrip("\n"))
    if array.count == 0:
        target.unlink()
    return array.count


# -- runtime_estimations.json ---------------------------------------------------------------------
def write_runtime_estimations(ranks: Sequence[RankSummary], out: Path) -> Path | None:
    """``[{rank, graph, ops: [{name, estimated_runtime_ns}]}]``, graphs in compile-id order."""
    if not any(r.runtime_path for r in ranks):
        return None
    target = out / RUNTIME_ESTIMATIONS
    with open(target, "w", encoding="utf-8") as dest, _JsonArray(dest) as array:
        for summary in sorted(ranks, key=lambda r: r.rank):
            for graph in _runtime_graphs(summary):
                array.add({"rank": summary.rank, "graph": graph["graph"], "ops": graph["ops"]})
    return target


# -- chromium_trace_with_runtime.json -------------------------------------------------------------
def runtime_tid(rank: int, graph: str) -> int:
    """A stable 32-bit thread id for one (rank, graph) (tlparse hashed the pair too)."""
    return zlib.crc32(f"{rank}\0{graph}".encode())


def write_runtime_trace(ranks: Sequence[RankSummary], out: Path) -> Path | None:
    """Each rank a process, each graph a thread, its ops laid end to end by estimated runtime.

    ``dur`` is at least 1 µs so zero-cost ops stay visible; metadata events name the ranks
    ("Rank N") and graphs ("graph <folder>") and keep both in order.
    """
    if not any(r.runtime_path for r in ranks):
        return None
    target = out / RUNTIME_TRACE
    threads: list[tuple[int, str, int]] = []
    ranks_seen: list[int] = []
    with open(target, "w", encoding="utf-8") as dest, _JsonArray(dest) as array:
        for summary in sorted(ranks, key=lambda r: r.rank):
            index = 0
            for graph in _runtime_graphs(summary):
                name = graph["graph"]
                tid = runtime_tid(summary.rank, name)
                threads.append((summary.rank, name, index))
                index += 1
                ts = 0
                for op in graph["ops"]:
                    ns = op["estimated_runtime_ns"]
                    dur = max(1, math.ceil(ns / 1000))
                    array.add(
                        {
                            "name": op["name"],
                            "cat": "runtime",
                            "ph": "X",
                            "ts": ts,
                            "dur": dur,
                            "pid": summary.rank,
                            "tid": tid,
                            "args": {"graph": name, "rank": summary.rank, "runtime_ns": int(ns)},
                        }
                    )
                    ts += dur
            if index:
                ranks_seen.append(summary.rank)
        for rank in ranks_seen:
            array.add(
                {"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"Rank {rank}"}}
            )
            array.add(
                {"name": "process_sort_index", "ph": "M", "pid": rank, "args": {"sort_index": rank}}
            )
        for rank, name, index in threads:
            tid = runtime_tid(rank, name)
            array.add(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "pid": rank,
                    "tid": tid,
                    "args": {"name": f"graph {name}"},
                }
            )
            array.add(
                {
                    "name": "thread_sort_index",
                    "ph": "M",
                    "pid": rank,
                    "tid": tid,
                    "args": {"sort_index": index},
                }
            )
    return target


# -- collective_schedules.json ---------------------------------------------------------------------
def write_collective_schedules(ranks: Sequence[RankSummary], out: Path) -> Path | None:
    """``[{rank, graph, ops}]`` for every compile id with a non-empty collective schedule."""
    entries = [
        {"rank": r.rank, "graph": u.schedule_folder or u.dirname, "ops": list(u.schedule)}
        for r in sorted(ranks, key=lambda r: r.rank)
        for u in r.units
        if u.schedule
    ]
    if not entries:
        return None
    target = out / COLLECTIVE_SCHEDULES
    target.write_text(json.dumps(entries, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


# -- rank_<N>/collectives_parity.json -------------------------------------------------------------
def collectives_parity(summary: RankSummary) -> dict[str, Any]:
    """tlparse's parity report for one rank (written even when it finds nothing)."""
    return {
        "description": PARITY_DESCRIPTION,
        "graphs": [
            {
                "graph": f.graph,
                "compile_id": f.compile_id,
                "offset": f.offset,
                "missing_waits": f.missing_waits,
            }
            for f in summary.parity
        ],
    }


def write_collectives_parity(summary: RankSummary, rank_dir: Path) -> Path:
    rank_dir.mkdir(parents=True, exist_ok=True)
    target = rank_dir / COLLECTIVES_PARITY
    text = json.dumps(collectives_parity(summary), indent=2, ensure_ascii=False)
    target.write_text(text + "\n", encoding="utf-8")
    return target


# -- all of them --------------------------------------------------------------------------------
@dataclass
class MultiRankFiles:
    """What ``write_multirank_files`` wrote (paths are None when there was nothing to write)."""

    chromium_events: int = 0
    runtime_estimations: Path | None = None
    runtime_trace: Path | None = None
    collective_schedules: Path | None = None
    parity: dict[int, Path] = field(default_factory=dict)

    @property
    def chromium_path(self) -> str | None:
        return CHROMIUM_EVENTS if self.chromium_events else None


def write_multirank_files(ranks: Sequence[RankSummary], out: Path) -> MultiRankFiles:
    """Write every top-level multi-rank file into ``out`` and each rank's parity file into
    ``out/rank_<N>/`` (the rank's own report is written there by the site build)."""
    out.mkdir(parents=True, exist_ok=True)
    files = MultiRankFiles(
        chromium_events=write_chromium_events(ranks, out),
        runtime_estimations=write_runtime_estimations(ranks, out),
        runtime_trace=write_runtime_trace(ranks, out),
        collective_schedules=write_collective_schedules(ranks, out),
    )
    for summary in ranks:
        if summary.ok:
            files.parity[summary.rank] = write_collectives_parity(
                summary, out / f"rank_{summary.rank}"
            )
    return files

"""Multi-rank core: rank summaries, cross-rank analyses, the landing page and tlparse's files.

tlparse's integration tests 19–41 (spec §5) are ported to our API: analyses are pure functions
of the rank summaries, files are written into ``tmp_path``, and the landing page is checked
both as Markdown and as HTML rendered by Python-Markdown with the extensions the site uses.
Assertions that need the multi-rank build path of ``tlsite build`` (stdout, ``rank_N/index.html``
on disk) are written too and skipped until cli.py builds multi-rank sites.

Corpus inputs are copied into ``tmp_path`` before anything changes them (tlparse's tests 24/25
truncated the committed logs in place).
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
import tracemalloc
import zipfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import markdown
import py7zr
import pytest
from corpus import CORPUS, TLPARSE_INPUTS, trace_lines

from tlsite.core import InputError, load, resolve_input
from tlsite.core.analysis import divergence as dv
from tlsite.core.analysis.collectives import code_counts, normalize_op, parity
from tlsite.core.multirank import (
    CacheEvent,
    RankSet,
    RankSummary,
    UnitSummary,
    load_ranks,
    summarize_trace,
)
from tlsite.core.render import multirank_files as mf
from tlsite.core.render.landing import MAX_DIFFERENCES, MAX_VARIANTS, render_landing
from tlsite.core.source import LogSource, ResolvedInput

MULTI_RANK_LOGS = TLPARSE_INPUTS / "multi_rank_logs"
MESSY = TLPARSE_INPUTS / "multi_rank_messy_input"
RUNTIME = TLPARSE_INPUTS / "multi_rank_runtime"
SCHEDULE = TLPARSE_INPUTS / "multi_rank_schedule"
PARITY = TLPARSE_INPUTS / "collectives_parity"
EXEC_ORDER = CORPUS / "tlparse" / "graph_exec_order_tests"
TORCH_213 = CORPUS / "torch-2.13" / "multi_rank"

pytestmark = pytest.mark.skipif(
    not MULTI_RANK_LOGS.is_dir(), reason="shared trace corpus not available"
)

MD_EXTENSIONS = ["admonition", "attr_list", "tables", "md_in_html", "toc"]


# -- helpers ---------------------------------------------------------------------------------------
def summaries(path: Path, *, jobs: int = 2) -> RankSet:
    with resolve_input(path) as resolved:
        return load_ranks(resolved, jobs=jobs)


def landing(path: Path) -> str:
    with summaries(path) as ranks:
        return render_landing(ranks.ranks)


def to_html(md: str) -> str:
    """The landing Markdown as HTML (front matter dropped), as the site's Markdown renders it."""
    body = md.split("---", 2)[2] if md.startswith("---") else md
    return markdown.markdown(body, extensions=MD_EXTENSIONS)


def rank_dir(tmp_path: Path, logs: dict[int, Path], name: str = "ranks") -> Path:
    """A folder of rank logs ``dedicated_log_torch_trace_rank_<N>.log`` copied from ``logs``."""
    folder = tmp_path / name
    folder.mkdir()
    for rank, log in logs.items():
        shutil.copyfile(log, folder / f"dedicated_log_torch_trace_rank_{rank}.log")
    return folder


def copy_dir(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for path in dst.iterdir():
        path.chmod(0o644)  # the corpus is read-only; the copies are ours to change
    return dst


def log_of(folder: Path, rank: int) -> Path:
    return next(folder.glob(f"dedicated_log_torch_trace_rank_{rank}*.log"))


def read_json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def art(name: str, payload: object, fcid: int | None = 0) -> str:
    """An ``artifact`` record (JSON payload) of compile id ``[0/fcid]``, or ``[-/-]`` for None."""
    envelope: dict[str, object] = {"artifact": {"name": name, "encoding": "json"}}
    if fcid is not None:
        envelope.update(frame_id=0, frame_compile_id=fcid, attempt=0)
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return trace_lines(envelope, text)


# -- 19, 20: rank discovery and links --------------------------------------------------------------
def test_all_ranks_basic_links_every_rank_and_not_the_parity_file() -> None:  # 19
    md = landing(MULTI_RANK_LOGS)
    html = to_html(md)
    for rank in range(4):
        assert f"[Rank {rank}](rank_{rank}/index.md)" in md
        assert f'<a href="rank_{rank}/index.md">Rank {rank}</a>' in html  # .html after MkDocs
    assert "collectives_parity.json" not in md


def test_all_ranks_messy_input(tmp_path: Path) -> None:  # 20
    with summaries(MESSY) as ranks:
        assert [r.rank for r in ranks] == [0, 1]
        assert all(r.ok and not r.empty for r in ranks)
        assert ranks.ignored == ["another.log: empty", "some_other_file.txt: not a log"]
        md = render_landing(ranks.ranks)
    assert "[Rank 0](rank_0/index.md)" in md and "[Rank 1](rank_1/index.md)" in md


def test_latest_on_a_rank_directory_is_single_rank() -> None:  # 22 (no --all-ranks-html here)
    with resolve_input(MULTI_RANK_LOGS, latest=True) as resolved:
        assert len(resolved.logs) == 1 and not resolved.is_multi_rank


def test_no_rank_logs(tmp_path: Path) -> None:  # 23
    with pytest.raises(InputError, match="no trace logs found"):
        resolve_input(tmp_path)


# -- 24, 25: combined chromium events --------------------------------------------------------------
def chromium_pids(out: Path) -> Counter[int]:
    return Counter(e["pid"] for e in read_json(out / "chromium_events.json"))  # type: ignore[union-attr]


def test_chromium_events_combined_pristine(tmp_path: Path) -> None:  # 24, committed data
    with summaries(MULTI_RANK_LOGS) as ranks:
        count = mf.write_chromium_events(ranks.ranks, tmp_path)
        per_rank = {r.rank: r.chromium_events for r in ranks}
    pids = chromium_pids(tmp_path)
    assert set(pids) == {0, 1, 2, 3}  # rank 1 has 544 events since tlparse#125
    assert dict(pids) == per_rank and count == sum(per_rank.values())


def test_chromium_events_combined_with_an_empty_rank(tmp_path: Path) -> None:  # 24 as intended
    folder = copy_dir(MULTI_RANK_LOGS, tmp_path / "logs")
    log_of(folder, 1).write_bytes(b"")
    with summaries(folder) as ranks:
        assert [r.rank for r in ranks] == [0, 1, 2, 3]
        assert ranks[1].empty and ranks[1].chromium_events == 0
        assert not any("rank_1" in entry for entry in ranks.ignored)
        mf.write_chromium_events(ranks.ranks, tmp_path)
        per_rank = {r.rank: r.chromium_events for r in ranks if r.chromium_events}
        md = render_landing(ranks.ranks)
    pids = chromium_pids(tmp_path)
    assert set(pids) == {0, 2, 3} and dict(pids) == per_rank
    for rank in range(4):
        assert f"rank_{rank}/index.md" in md
    assert "Empty rank logs" in to_html(md)


def test_chromium_events_sparse(tmp_path: Path) -> None:  # 25, on a copy
    folder = copy_dir(MULTI_RANK_LOGS, tmp_path / "logs")
    for rank in (0, 2):
        shutil.copyfile(TLPARSE_INPUTS / "chromium_events.log", log_of(folder, rank))
    log_of(folder, 1).write_bytes(b"")
    with summaries(folder) as ranks:
        mf.write_chromium_events(ranks.ranks, tmp_path)
        per_rank = {r.rank: r.chromium_events for r in ranks if r.chromium_events}
        md = render_landing(ranks.ranks)
    assert set(chromium_pids(tmp_path)) == {0, 2, 3}
    assert dict(chromium_pids(tmp_path)) == per_rank
    assert "chromium_events.json" in md
    for rank in range(4):
        assert f"rank_{rank}/index.md" in md


def test_no_chromium_events_no_file(tmp_path: Path) -> None:
    log = TLPARSE_INPUTS / "comp_metrics.log"  # logs no chromium events
    with summaries(rank_dir(tmp_path, {0: log, 1: log})) as ranks:
        assert mf.write_chromium_events(ranks.ranks, tmp_path) == 0
        md = render_landing(ranks.ranks)
    assert not (tmp_path / "chromium_events.json").exists()
    assert "chromium_events.json" not in md


# -- 26–30: compile ids and cache patterns ---------------------------------------------------------
def test_diverging_compile_ids_warning() -> None:  # 26
    with summaries(MULTI_RANK_LOGS) as ranks:
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
    assert report.compile_ids.divergent
    assert "Diverging Compilation IDs detected" in md
    assert "Warning:</strong> Diverging Compilation IDs detected" in to_html(md)


def test_no_compile_id_divergence(tmp_path: Path) -> None:  # 27
    simple = TLPARSE_INPUTS / "simple.log"
    md = landing(rank_dir(tmp_path, {0: simple, 1: simple}))
    assert "Diverging Compilation IDs detected" not in md
    assert "Compile ids: consistent across ranks." in md


def test_diverging_cache_events_warning(tmp_path: Path) -> None:  # 28
    folder = rank_dir(
        tmp_path, {0: TLPARSE_INPUTS / "cache_hit_miss.log", 1: TLPARSE_INPUTS / "simple.log"}
    )
    html = to_html(landing(folder))
    assert "Warning:</strong> Diverging Cache hit/miss patterns detected" in html


def test_no_cache_event_divergence(tmp_path: Path) -> None:  # 29
    log = TLPARSE_INPUTS / "cache_hit_miss.log"
    md = landing(rank_dir(tmp_path, {0: log, 1: log}))
    assert "Diverging Cache hit/miss patterns detected" not in md
    assert "Cache hit/miss patterns: consistent across ranks." in md


def test_diverging_cache_events_multiple_groups() -> None:  # 30
    with summaries(MULTI_RANK_LOGS) as ranks:
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
    # sorted: largest group first, then by lowest rank (tlparse printed hash-map order)
    assert report.cache.groups == [(0, 2), (1,), (3,)]
    html = to_html(md)
    assert "Diverging Cache hit/miss patterns detected" in html
    for group in ("Ranks: 0, 2", "Ranks: 1", "Ranks: 3"):
        assert f"<li>{group}" in html


# -- 31–33: collective schedules -------------------------------------------------------------------
def test_collective_schedule_parsing(tmp_path: Path) -> None:  # 31
    with summaries(SCHEDULE) as ranks:
        assert [r.rank for r in ranks] == [0, 1, 2]
        path = mf.write_collective_schedules(ranks.ranks, tmp_path)
    assert path == tmp_path / "collective_schedules.json"
    entries = read_json(path)
    assert isinstance(entries, list) and entries
    ops = {(e["rank"], e["graph"]): e["ops"] for e in entries}
    assert ops[(0, "-_0_0_0")] == ops[(2, "-_0_0_0")] != ops[(1, "-_0_0_0")]
    assert len(ops[(0, "-_0_0_0")]) == 6 and len(ops[(1, "-_0_0_0")]) == 4


def test_collective_schedule_no_divergence(tmp_path: Path) -> None:  # 32
    folder = rank_dir(tmp_path, {0: log_of(SCHEDULE, 0), 2: log_of(SCHEDULE, 2)})
    html = to_html(landing(folder))
    assert "Warning:</strong> Diverging collective operation sequences" not in html
    assert "Collective schedules: consistent across ranks." in html


def test_collective_schedule_with_divergence() -> None:  # 33
    with summaries(SCHEDULE) as ranks:
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
    html = to_html(md)
    assert "Warning:</strong> Diverging collective operation sequences" in html
    assert "Ranks: 0, 2" in html and "Ranks: 1" in html
    assert report.collectives.groups == [(0, 2), (1,)]
    [difference] = report.collectives.differences
    assert difference.key == "[0/0]"
    evidence = difference.variants[1].evidence
    assert difference.variants[1].ranks == (1,) and evidence is not None
    assert evidence.href.startswith("rank_1/-_0_0_0/index.md#artifact-")


# -- 34–37: runtime estimations --------------------------------------------------------------------
def test_runtime_estimation_parsing(tmp_path: Path) -> None:  # 34 (output not in the input dir)
    with summaries(RUNTIME) as ranks:
        path = mf.write_runtime_estimations(ranks.ranks, tmp_path)
    assert path is not None
    entries = read_json(path)
    assert isinstance(entries, list) and entries
    assert {0, 1} <= {e["rank"] for e in entries}
    for entry in entries:
        assert entry["ops"]
        for op in entry["ops"]:
            assert isinstance(op["name"], str)
            assert isinstance(op["estimated_runtime_ns"], float)
            assert "type" not in op


def test_runtime_analysis_working(tmp_path: Path) -> None:  # 35
    folder = rank_dir(tmp_path, {r: log_of(RUNTIME, r) for r in range(4)})
    with summaries(folder) as ranks:
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
    assert "Graph Runtime Analysis" in md and "ms delta" in md
    assert "Runtime analysis not available" not in md
    assert report.runtime.complete
    assert [row.key for row in report.runtime.rows] == ["[0/0]", "[0/1]", "[0/2]", "[0/3]"]
    # the estimates grow with the rank in this data: rank 0 fastest, rank 3 slowest, everywhere
    assert {(row.fastest_rank, row.slowest_rank) for row in report.runtime.rows} == {(0, 3)}


def test_runtime_analysis_mismatched_graphs() -> None:  # 36
    """tlparse gives up on every graph when counts differ; we still compare the compile ids
    that were estimated on two ranks or more, and say which ranks lack which estimates."""
    with summaries(RUNTIME) as ranks:
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
    assert "Graph Runtime Analysis" in md and "Runtime analysis not available" in md
    assert not report.runtime.complete
    assert report.runtime.coverage.groups == [(0, 1, 2, 3), (5, 6), (4,)]
    missing = {
        d.key: [v.ranks for v in d.variants if v.label == "no estimate"]
        for d in report.runtime.coverage.differences
    }
    assert missing == {"[0/0]": [(4,)], "[0/2]": [(5, 6)], "[0/3]": [(5, 6)]}
    rows = {row.key: row for row in report.runtime.rows}
    assert rows["[0/1]"].ranks == 7 and rows["[0/0]"].ranks == 6
    assert rows["[0/1]"].slowest_rank == 4  # matched by compile id, not by position


def test_chromium_trace_with_runtime(tmp_path: Path) -> None:  # 37
    with summaries(RUNTIME) as ranks:
        path = mf.write_runtime_trace(ranks.ranks, tmp_path)
        ranks_in_names = {r.rank for r in ranks}
    assert path is not None and path.stat().st_size > 0
    events = read_json(path)
    assert isinstance(events, list)
    runtime = [e for e in events if e.get("ph") == "X" and e.get("cat") == "runtime"]
    assert runtime
    for event in runtime:
        assert isinstance(event["name"], str)
        assert isinstance(event["dur"], int) and event["dur"] > 0
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert isinstance(event["args"]["runtime_ns"], (int, float))
        assert isinstance(event["args"]["graph"], str)
        assert event["pid"] == event["args"]["rank"]
    assert {e["pid"] for e in runtime} == ranks_in_names == set(range(7))
    names = [e for e in events if e.get("name") == "process_name"]
    assert [e["args"]["name"] for e in names] == [f"Rank {r}" for r in range(7)]


def test_runtime_files_match_tlparse_layout(tmp_path: Path) -> None:
    """Ops are laid end to end: each op starts where the previous one ended."""
    with summaries(RUNTIME) as ranks:
        path = mf.write_runtime_trace(ranks.ranks, tmp_path)
    assert path is not None
    events = [e for e in read_json(path) if e.get("ph") == "X"]  # type: ignore[union-attr]
    by_thread: dict[tuple[int, int], list[dict]] = {}
    for event in events:
        by_thread.setdefault((event["pid"], event["tid"]), []).append(event)
    for thread in by_thread.values():
        assert thread[0]["ts"] == 0
        for before, after in itertools.pairwise(thread):
            assert after["ts"] == before["ts"] + before["dur"]


# -- 38: tensor metadata ---------------------------------------------------------------------------
def test_tensor_meta_divergence_groups() -> None:  # 38
    with summaries(RUNTIME) as ranks:
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
    assert "Tensor Metadata Analysis" in md
    assert "Ranks exhibit divergent inductor tensor meta" in md
    assert "Ranks: 5, 6" in md
    # runtime estimates are not part of the fingerprint: ranks 0–3 differ only in estimates
    # (tlparse put each of them in its own group); rank 4 lacks [0/0]'s metadata
    assert report.tensor_meta.groups == [(0, 1, 2, 3), (5, 6), (4,)]


def test_tensor_meta_ignores_runtime_estimates(tmp_path: Path) -> None:
    meta = {"ops": [{"name": "mm", "estimated_runtime_ns": 10.0, "outputs": [{"shape": [4]}]}]}
    slower = json.loads(json.dumps(meta))
    slower["ops"][0]["estimated_runtime_ns"] = 99.0
    other_shape = json.loads(json.dumps(meta))
    other_shape["ops"][0]["outputs"][0]["shape"] = [8]
    logs = {}
    for rank, payload in enumerate((meta, slower, other_shape)):
        path = tmp_path / f"r{rank}.log"
        path.write_text(art("inductor_runtime_and_tensor_meta", payload), encoding="utf-8")
        logs[rank] = path
    with summaries(rank_dir(tmp_path, logs)) as ranks:
        report = dv.analyse(ranks.ranks)
    assert report.tensor_meta.groups == [(0, 1), (2,)]
    assert [row.key for row in report.runtime.rows] == ["[0/0]"]


# -- 39: execution order, pure function ------------------------------------------------------------
def test_execution_order_multi_rank_divergence() -> None:  # 39
    rows = dv.analyze_execution_order(
        {0: ["0/0", "0/1", "0/2"], 1: ["0/1", "0/0", "0/2"]},
        {
            (0, "0/0"): ["all_reduce"],
            (0, "0/1"): ["all_gather"],
            (1, "0/0"): ["all_reduce"],
            (1, "0/1"): ["broadcast"],
        },
        {(0, "0/0"): "✅", (0, "0/1"): "❌", (1, "0/0"): "✅", (1, "0/1"): "✅"},
    )
    assert len(rows) == 3
    assert dict(rows[0].by_rank) == {0: "0/0", 1: "0/1"}
    assert dv.SCHEDULE_MISMATCH in rows[0].issues
    assert dict(rows[1].by_rank) == {0: "0/1", 1: "0/0"}
    assert dv.CACHE_MISMATCH in rows[1].issues
    assert dict(rows[2].by_rank) == {0: "0/2", 1: "0/2"} and not rows[2].issues


def test_execution_order_uneven_lengths() -> None:
    rows = dv.analyze_execution_order({0: ["a", "b"], 1: ["a"]}, {}, {})
    assert [dict(r.by_rank) for r in rows] == [{0: "a", 1: "a"}, {0: "b"}]
    assert not any(r.order_differs for r in rows)


# -- 40: collectives parity ------------------------------------------------------------------------
def test_collectives_parity_detects_mismatch(tmp_path: Path) -> None:  # 40
    with summaries(PARITY) as ranks:
        assert [r.rank for r in ranks] == [0]
        files = mf.write_multirank_files(ranks.ranks, tmp_path)
    assert set(files.parity) == {0}
    report = read_json(tmp_path / "rank_0" / "collectives_parity.json")
    assert report["description"] == mf.PARITY_DESCRIPTION  # type: ignore[index]
    graphs = {g["graph"]: g for g in report["graphs"]}  # type: ignore[index]
    assert graphs == {
        "-_0_1_0": {"graph": "-_0_1_0", "compile_id": "[0/1]", "offset": 0, "missing_waits": 3},
        "-_0_0_0": {"graph": "-_0_0_0", "compile_id": "[0/0]", "offset": 0, "missing_waits": 1},
    }
    assert not (tmp_path / "rank_1").exists() and not (tmp_path / "rank_2").exists()


def test_collectives_parity_written_for_every_rank(tmp_path: Path) -> None:
    with summaries(SCHEDULE) as ranks:
        mf.write_multirank_files(ranks.ranks, tmp_path)
        md = render_landing(ranks.ranks)
    empty = read_json(tmp_path / "rank_0" / "collectives_parity.json")
    assert empty == {"description": mf.PARITY_DESCRIPTION, "graphs": []}
    found = read_json(tmp_path / "rank_1" / "collectives_parity.json")
    assert found["graphs"] == [  # type: ignore[index]
        {"graph": "-_0_0_0", "compile_id": "[0/0]", "offset": 1, "missing_waits": 0}
    ]
    assert "Output code does not match the collective schedule on rank 1" in md


def test_parity_rules() -> None:
    assert normalize_op("torch.ops._c10d_functional.all_reduce_.default") == "all_reduce"
    assert normalize_op("all_gather_into_tensor") == "all_gather"
    assert normalize_op("reduce_scatter_tensor") == "reduce_scatter"
    assert normalize_op("reduce") == "reduce"
    assert normalize_op("wait_tensor") is None
    code = (
        "torch.ops._c10d_functional.all_reduce_.default(buf, 'sum', '0')  # a '#' comment\n"
        "# torch.ops._c10d_functional.wait_tensor.default(buf)\n"
        "x = a // 2  # torch.ops._c10d_functional.broadcast.default(\n"
        "/* torch.ops.c10d_functional.all_gather.default( */\n"
        "torch . ops . c10d_functional . wait_tensor . default (buf)\n"
    )
    counts, waits = code_counts(code)
    assert dict(counts) == {"all_reduce": 1} and waits == 1
    check = parity(["torch.ops._c10d_functional.all_reduce_.default", "broadcast"], code)
    assert (check.offset, check.missing_waits) == (1, 0)


# -- 41: execution-order diagnostics on real ranks -------------------------------------------------
def test_graph_execution_order_diagnostics() -> None:  # 41
    with summaries(EXEC_ORDER) as ranks:
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
    html = to_html(md)
    assert "Graph Execution-Order Diagnostics" in html
    assert "Graph execution order differs across ranks" in html
    assert "Cache hit/miss sequence: Consistent across ranks" in html
    assert "Warning:</strong> Cache hit/miss mismatch across ranks" not in html
    assert "Warning:</strong> Schedule mismatch across ranks: Rank 0, Rank 1" in html
    assert report.exec_order.steps == 6 and report.exec_order.flagged_total == 4


def test_execution_order_unavailable_and_inductor_graph_execution_skipped() -> None:
    with summaries(RUNTIME) as ranks:
        assert all(r.execution_order is None for r in ranks)
        assert not any(p for r in ranks for p in r.problems)  # inductor_graph_execution: no noise
        md = render_landing(ranks.ranks)
    assert "Execution-order analysis unavailable" in md


def test_execution_order_prefers_a_real_order(tmp_path: Path) -> None:
    """A higher-numbered ``inductor_graph_execution`` does not hide the order (tlparse dropped
    the rank)."""
    order = {"graph_execution_order": [{"compile_id": "0/0"}, "0/1"]}
    text = (
        art("inductor_collective_schedule", ["all_reduce"], 0)
        + art("inductor_collective_schedule", ["all_reduce"], 1)
        + art("graph_execution", order, None)
        + art("inductor_graph_execution", {"graph": "graph_0"}, None)
    )
    path = tmp_path / "r.log"
    path.write_text(text, encoding="utf-8")
    trace = load(path)
    try:
        summary = summarize_trace(trace, 0, tmp_path)
    finally:
        trace.close()
    assert summary.execution_order == ["[0/0]", "[0/1]"]
    assert summary.execution_artifact is not None and summary.execution_artifact[0] == "-_-_-_-"


# -- torch 2.13: a real cache divergence -----------------------------------------------------------
def test_torch_213_two_ranks_cache_divergence() -> None:
    with summaries(TORCH_213) as ranks:
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
    assert not report.compile_ids.divergent
    assert report.cache.groups == [(0,), (1,)]
    [difference] = report.cache.differences
    assert difference.key == "[4/0]"  # the DDP-split compile: its 4th lookup differs
    by_rank = {v.ranks: v for v in difference.variants}
    assert "lookup 4: fx_graph_cache_miss" in by_rank[(0,)].label
    assert "lookup 4: fx_graph_cache_hit" in by_rank[(1,)].label
    assert by_rank[(0,)].evidence.href == "rank_0/-_4_0_0/index.md#artifact-48"  # type: ignore[union-attr]
    assert by_rank[(1,)].evidence.href == "rank_1/-_4_0_0/index.md#artifact-49"  # type: ignore[union-attr]
    html = to_html(md)
    assert "Warning:</strong> Diverging Cache hit/miss patterns detected" in html
    assert 'href="rank_0/-_4_0_0/index.md#artifact-48"' in html
    assert "Compile ids: consistent across ranks." in html


# -- robustness ------------------------------------------------------------------------------------
def test_malformed_artifacts_are_reported_not_fatal(tmp_path: Path) -> None:
    good = tmp_path / "good.log"
    good.write_text(
        art("inductor_collective_schedule", ["all_reduce"])
        + art(
            "inductor_runtime_and_tensor_meta", {"ops": [{"name": "a", "estimated_runtime_ns": 5}]}
        ),
        encoding="utf-8",
    )
    bad = tmp_path / "bad.log"
    bad.write_text(
        art("inductor_collective_schedule", {"not": "a list"})
        + art("inductor_runtime_and_tensor_meta", "{broken json")
        + art("graph_execution", {"graph_execution_order": "nope"}, None),
        encoding="utf-8",
    )
    with summaries(rank_dir(tmp_path, {0: good, 1: bad})) as ranks:
        assert ranks[0].problems == []
        problems = ranks[1].problems
        md = render_landing(ranks.ranks)
        mf.write_multirank_files(ranks.ranks, tmp_path / "out")
    assert len(problems) == 3
    assert any("inductor_collective_schedule" in p and "not a list" in p for p in problems)
    assert any("not valid JSON" in p for p in problems)
    assert any("graph_execution" in p for p in problems)
    assert "Damaged input" in md
    assert read_json(tmp_path / "out" / "runtime_estimations.json") == [
        {"rank": 0, "graph": "-_0_0_0", "ops": [{"name": "a", "estimated_runtime_ns": 5.0}]}
    ]


def _failing_opener() -> object:
    raise InputError("broken.log: unreadable or corrupt data (test)")


def test_an_unreadable_rank_does_not_stop_the_others(tmp_path: Path) -> None:
    simple = TLPARSE_INPUTS / "simple.log"
    with resolve_input(rank_dir(tmp_path, {0: simple, 1: simple})) as resolved:
        logs = [*resolved.logs, LogSource("broken.log", _failing_opener, 2)]
        broken = ResolvedInput(logs=logs, is_multi_rank=True)
        with load_ranks(broken, jobs=1) as ranks:
            report = dv.analyse(ranks.ranks)
            md = render_landing(report)
    assert [r.ok for r in ranks] == [True, True, False]
    assert "corrupt data" in (ranks[2].error or "")
    assert report.compile_ids.ranks == (0, 1) and not report.compile_ids.divergent
    assert "could not be read" in md and "[Rank 2]" not in md


# -- loading: parallel, deterministic, compact -----------------------------------------------------
def _source_of(trace: object, summary: RankSummary, source: object) -> str:
    """A per-rank hook (module level, so it pickles): runs in the worker with the model open."""
    return f"{summary.rank}:{len(trace.units)}"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_parallel_load_equals_serial_and_runs_the_hook() -> None:
    with (
        resolve_input(RUNTIME) as resolved,
        load_ranks(resolved, jobs=1) as serial,
        load_ranks(resolved, jobs=3, per_rank=_source_of) as parallel,
    ):
        assert render_landing(serial.ranks) == render_landing(parallel.ranks)
        assert [r.extra for r in parallel] == [f"{r}:{5 if r < 5 else 3}" for r in range(7)]
        workdir = parallel.workdir
        assert any(workdir.iterdir())
    assert not workdir.exists()  # the temporary spill folder is removed on close


@pytest.mark.parametrize("kind", ["zip", "7z"])
def test_rank_logs_in_an_archive(tmp_path: Path, kind: str) -> None:
    """Workers reopen zip members themselves; 7z members stay extracted while the parent
    holds the resolved input."""
    logs = sorted(SCHEDULE.glob("*.log"))
    archive = tmp_path / f"ranks.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            for log in logs:
                zf.write(log, f"job/{log.name}")
    else:
        with py7zr.SevenZipFile(archive, "w") as sz:
            for log in logs:
                sz.write(log, f"job/{log.name}")
    with summaries(archive) as ranks:
        assert [r.rank for r in ranks] == [0, 1, 2] and all(r.ok for r in ranks)
        assert dv.analyse(ranks.ranks).collectives.groups == [(0, 2), (1,)]


def test_summaries_are_compact() -> None:
    """What crosses back from a worker is a few KB per rank, not the model."""
    with summaries(RUNTIME) as ranks:
        sizes = [len(pickle.dumps(r)) for r in ranks]
    log_sizes = [p.stat().st_size for p in sorted(RUNTIME.glob("*.log"))]
    assert max(sizes) < 16_000
    assert max(s / n for s, n in zip(sizes, log_sizes, strict=True)) < 0.01


def test_group_ranks_is_deterministic() -> None:
    groups = dv.group_ranks({5: "b", 0: "a", 3: "b", 1: "c", 2: "a", 4: "c"})
    assert [g for g, _ in groups] == [(0, 2), (1, 4), (3, 5)]
    assert dv.format_ranks([6, 0, 1, 2, 3, 4, 9, 10]) == "0–4, 6, 9, 10"
    assert dv.format_ranks([5, 6]) == "5, 6"


def test_runtime_spread_by_compile_id_and_ties() -> None:
    rows = dv.runtime_spread(
        {
            2: {"[0/1]": 5.0e6, "[0/0]": 1.0e6},
            0: {"[0/0]": 3.0e6, "[0/1]": 5.0e6},
            1: {"[0/1]": 7.0e6},  # no [0/0] on rank 1: [0/1] is still compared by id
        }
    )
    assert [r.key for r in rows] == ["[0/0]", "[0/1]"]
    first, second = rows
    assert (first.fastest_rank, first.slowest_rank, first.delta_ms) == (2, 0, 2.0)
    assert (second.fastest_rank, second.slowest_rank, second.ranks) == (0, 1, 3)  # tie: rank 0
    same = dv.runtime_spread({0: {"[0/0]": 1.0}, 1: {"[0/0]": 1.0}})[0]
    assert same.all_equal and same.fastest_rank == same.slowest_rank == 0


# -- scale: 64 ranks from the corpus, and linear growth --------------------------------------------
def make_ranks(tmp_path: Path, count: int) -> Path:
    """``count`` rank logs copied from the three multi_rank_schedule ranks, round robin."""
    sources = [log_of(SCHEDULE, r) for r in range(3)]
    folder = tmp_path / f"ranks_{count}"
    folder.mkdir()
    for rank in range(count):
        shutil.copyfile(sources[rank % 3], folder / f"dedicated_log_torch_trace_rank_{rank}_x.log")
    return folder


@pytest.mark.slow
def test_64_ranks_from_the_corpus(tmp_path: Path) -> None:
    folder = make_ranks(tmp_path, 64)
    started = time.perf_counter()
    with summaries(folder, jobs=os.cpu_count() or 1) as ranks:
        load_s = time.perf_counter() - started
        assert [r.rank for r in ranks] == list(range(64))
        started = time.perf_counter()
        report = dv.analyse(ranks.ranks)
        md = render_landing(report)
        files = mf.write_multirank_files(ranks.ranks, tmp_path / "out")
        rest_s = time.perf_counter() - started
        held = sum(len(pickle.dumps(r)) for r in ranks)
    odd = tuple(r for r in range(64) if r % 3 == 1)
    assert report.collectives.groups == [tuple(r for r in range(64) if r % 3 != 1), odd]
    assert report.parity.ranks_with_findings == odd
    assert len(files.parity) == 64 and files.chromium_events == sum(
        r.chromium_events for r in ranks
    )
    assert held < 64 * 8_000  # the parent holds summaries, a few KB a rank
    print(
        f"\n64 ranks: load {load_s:.1f} s, analyse+landing+files {rest_s:.2f} s, "
        f"summaries {held / 1e3:.0f} KB, landing {len(md) / 1e3:.0f} KB"
    )


def synthetic_ranks(count: int, compile_ids: int = 300) -> list[RankSummary]:
    """Ranks that disagree on many compile ids in many ways (a worst case for page size)."""
    ranks = []
    all_reduce = "torch.ops._c10d_functional.all_reduce_.default"
    for rank in range(count):
        units = []
        for i in range(compile_ids):
            status = "miss" if (rank + i) % 5 == 0 else "hit"
            units.append(
                UnitSummary(
                    key=f"[0/{i}]",
                    dirname=f"-_0_{i}_0",
                    order=i,
                    is_compile=(i + rank) % 97 != 0,
                    cache=(CacheEvent(status, f"fx_graph_cache_{status}", 10 * i),),
                    schedule=(all_reduce,) * (1 + (rank % 4 if i % 3 == 0 else 0)),
                    schedule_artifact=10 * i + 1,
                    runtime_ns=1e6 + 997 * rank * (i % 13),
                    runtime_ops=3,
                    runtime_artifact=10 * i + 2,
                    tensor_meta=f"fp{rank % 3 if i % 7 == 0 else 0}",
                    tensor_meta_artifact=10 * i + 2,
                    compile_seconds=0.1 + 0.001 * rank * (i % 5),
                )
            )
        order = [f"[0/{(i + rank % 2) % compile_ids}]" for i in range(compile_ids)]
        ranks.append(
            RankSummary(
                rank=rank,
                source=f"dedicated_log_torch_trace_rank_{rank}.log",
                units=units,
                execution_order=order,
                execution_artifact=("-_-_-_-", 9999),
                compile_seconds=sum(u.compile_seconds or 0 for u in units),
            )
        )
    return ranks


def measure(ranks: list[RankSummary]) -> tuple[int, int]:
    """Peak traced bytes and landing size for analyse + render (time is the benchmarks' to
    measure: bench/multirank_bench.py)."""
    tracemalloc.start()
    md = render_landing(dv.analyse(ranks))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, len(md)


@pytest.mark.slow
def test_analysis_and_landing_grow_linearly_with_ranks() -> None:
    figures = {n: measure(synthetic_ranks(n)) for n in (8, 16, 32, 64)}
    m8, s8 = figures[8]
    m64, s64 = figures[64]
    assert m64 < 8 * m8 * 1.5  # 8× the ranks: about 8× the memory at most
    # the page lists ranks and groups, never ranks × compile ids: ≤ 1 KB more per extra rank
    assert s64 - s8 < 56 * 1_000
    assert s64 < 120_000


@pytest.mark.slow
def test_landing_never_lists_ranks_times_compile_ids() -> None:
    ranks = synthetic_ranks(64)
    report = dv.analyse(ranks)
    md = render_landing(report)
    assert len(report.cache.differences) == 300 and len(report.compile_ids.differences) > 100
    lines = md.splitlines()
    tables = []
    for index, line in enumerate(lines):
        if line == "| Compile id | Ranks | What they have |":
            rows = itertools.takewhile(lambda ln: ln.startswith("|"), lines[index + 2 :])
            tables.append(len(list(rows)))
    assert len(tables) >= 4  # compile ids, cache, collectives, tensor metadata (+ coverage)
    # each table: at most MAX_DIFFERENCES compile ids × (MAX_VARIANTS + a "more" row)
    assert max(tables) <= MAX_DIFFERENCES * (MAX_VARIANTS + 1)
    assert len(md) < 120_000


# -- CLI level (tlparse asserted these on the binary's output) -------------------------------------
def run_build(path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tlsite",
            "build",
            str(path),
            "-o",
            str(out),
            "--overwrite",
            "--no-zip",
            "--no-browser",
            "--all-ranks-html",  # as tlparse's multi-rank tests do
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def rank_pages(out: Path, ranks: Iterable[int]) -> None:
    for rank in ranks:
        assert (out / f"rank_{rank}" / "index.html").is_file()
        assert (out / f"rank_{rank}" / "collectives_parity.json").is_file()
    assert (out / "index.html").is_file()


@pytest.mark.slow
def test_cli_all_ranks_basic(tmp_path: Path) -> None:  # 19, 21
    out = tmp_path / "out"
    done = run_build(MULTI_RANK_LOGS, out)
    assert done.returncode == 0, done.stderr
    rank_pages(out, range(4))
    page = (out / "index.html").read_text(encoding="utf-8")
    assert '<a href="rank_0/index.html">' in page and '<a href="rank_1/index.html">' in page
    assert "collectives_parity.json" not in page
    assert str(out) in done.stdout


@pytest.mark.slow
def test_cli_messy_input(tmp_path: Path) -> None:  # 20
    out = tmp_path / "out"
    assert run_build(MESSY, out).returncode == 0
    rank_pages(out, (0, 1))


@pytest.mark.slow
def test_cli_chromium_events_sparse(tmp_path: Path) -> None:  # 24, 25
    folder = copy_dir(MULTI_RANK_LOGS, tmp_path / "logs")
    log_of(folder, 1).write_bytes(b"")
    out = tmp_path / "out"
    assert run_build(folder, out).returncode == 0
    rank_pages(out, range(4))
    assert set(chromium_pids(out)) == {0, 2, 3}
    assert read_json(out / "rank_1" / "chromium_events.json") == []


@pytest.mark.slow
def test_cli_landing_phrases(tmp_path: Path) -> None:  # 26, 33, 35–38, 41 on the built page
    cases = {
        MULTI_RANK_LOGS: ["Diverging Compilation IDs detected", "Diverging Cache hit/miss"],
        SCHEDULE: ["Warning:</strong> Diverging collective operation sequences", "Ranks: 0, 2"],
        RUNTIME: ["Graph Runtime Analysis", "Runtime analysis not available", "Ranks: 5, 6"],
        EXEC_ORDER: [
            "Graph execution order differs across ranks",
            "Cache hit/miss sequence: Consistent across ranks",
        ],
    }
    for index, (folder, phrases) in enumerate(cases.items()):
        out = tmp_path / f"out{index}"
        assert run_build(folder, out).returncode == 0
        page = (out / "index.html").read_text(encoding="utf-8")
        for phrase in phrases:
            assert phrase in page
        assert (out / "chromium_events.json").is_file()
    assert (tmp_path / "out2" / "chromium_trace_with_runtime.json").is_file()
    assert (tmp_path / "out2" / "runtime_estimations.json").is_file()
    assert (tmp_path / "out1" / "collective_schedules.json").is_file()


@pytest.mark.slow
def test_cli_collectives_parity(tmp_path: Path) -> None:  # 40
    out = tmp_path / "out"
    assert run_build(PARITY, out).returncode == 0
    report = read_json(out / "rank_0" / "collectives_parity.json")
    assert len(report["graphs"]) == 2  # type: ignore[index]


@pytest.mark.slow
def test_cli_builds_a_sixteen_rank_job_with_one_page_per_rank(tmp_path: Path) -> None:
    """A 16-rank job (copies of a real rank log) builds; the landing page links each rank
    once and stays small (it groups ranks; it never lists ranks x compile ids)."""
    job = tmp_path / "job"
    job.mkdir()
    base = sorted(MULTI_RANK_LOGS.glob("*rank_0*.log"))[0]
    for rank in range(16):
        shutil.copyfile(base, job / f"dedicated_log_torch_trace_rank_{rank}.log")
    out = tmp_path / "out"
    done = run_build(job, out)
    assert done.returncode == 0, done.stderr
    rank_pages(out, range(16))
    landing = (out / "index.html").read_text(encoding="utf-8")
    for rank in range(16):
        assert landing.count(f'href="rank_{rank}/index.html"') == 1
    assert len(landing) < 200_000

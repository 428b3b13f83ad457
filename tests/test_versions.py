"""Traces of every torch release a user may have (2.4 → 2.15) read right.

Real traces from ``tests/fixtures/traces/torch-<version>/`` (made by the scripts in
``tests/fixtures/scripts/versions/``; see the fixtures README). Expected lines come from the
scripts, expected times and versions from the raw log lines, never from tlsite's output.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES
from test_site import BuiltSite, article_text, glance, site_cache, tables

from tlsite.core import Trace, load
from tlsite.core.analysis.compile_time import compile_times
from tlsite.core.analysis.status import ERROR, statuses
from tlsite.core.analysis.views import failures, graph_breaks, recompiles
from tlsite.core.source import resolve_input

SCRIPTS = Path(__file__).parent / "fixtures" / "scripts" / "versions"
VERSIONS = ("2.4", "2.6", "2.10", "2.15")
#: ``torch.__version__`` of the torch that wrote each folder (the fixtures README).
TORCH_VERSION = {"2.4": "2.4.1+cu121", "2.6": "2.6.0+cu124", "2.10": "2.10.0+cu128"}
TORCH_VERSION["2.15"] = "2.15.0+cu132"
#: Traces written before the scripts gained their `import torch._inductor.config` line
#: (line 5 of graph_breaks.py): their lines are one less than the script's.
EARLIER_SCRIPT = {("2.6", "graph_breaks"), ("2.15", "graph_breaks")}


def fixture(version: str, scenario: str) -> Path:
    return FIXTURE_TRACES / f"torch-{version}" / f"{scenario}.log"


def version_traces() -> list[Path]:
    """Every single-log fixture of the other torch versions."""
    return sorted(p for v in VERSIONS for p in (FIXTURE_TRACES / f"torch-{v}").glob("*.log"))


@functools.cache
def trace(version: str, scenario: str) -> Trace:
    return load(fixture(version, scenario))


def script_line(version: str, scenario: str, text: str) -> str:
    """``scenario.py:N`` for the script line holding ``text``, as that version's run saw it."""
    lines = (SCRIPTS / f"{scenario}.py").read_text(encoding="utf-8").splitlines()
    numbers = [n for n, line in enumerate(lines, 1) if text in line]
    assert len(numbers) == 1, f"{text!r} is on lines {numbers} of {scenario}.py"
    return f"{scenario}.py:{numbers[0] - ((version, scenario) in EARLIER_SCRIPT)}"


def metrics_lines(path: Path, kind: str = "compilation_metrics") -> list[dict]:
    """The raw ``compilation_metrics`` records of a log, read without tlsite."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if f'{{"{kind}":' in line:
            found.append(json.loads(line[line.index("{") :])[kind])
    return found


# -- graph breaks ------------------------------------------------------------------------------
BREAKS = {  # script text → what torch said, per version
    "break A: print": {
        "2.4": "builtin: print",
        "2.6": "builtin: print",
        "2.10": "Failed to trace builtin operator",
        "2.15": "Failed to trace builtin operator",
    },
    "break B: .item()": {
        "2.4": "Tensor.item",
        "2.6": "Tensor.item",
        "2.10": "Unsupported Tensor.item() call",
        "2.15": "Unsupported Tensor.item() call",
    },
    "break C: unsupported C builtin": {
        "2.4": "Graph break due to unsupported builtin zlib.crc32",
        "2.6": "Graph break due to unsupported builtin zlib.crc32",
        "2.10": "Attempted to call function marked as skipped",
        "2.15": "Attempted to call function marked as skipped",
    },
}


@pytest.mark.parametrize("version", VERSIONS)
def test_graph_break_reasons_are_torchs_reason_at_the_break_line(version: str) -> None:
    """2.6 wrote "Reason: Unsupported: …" (tlsite showed "Graph break in user code at …");
    2.15 writes a one-line "Graph Break Reason:"; 2.4 only has restart reasons."""
    found = graph_breaks(trace(version, "graph_breaks"))
    for where, said in BREAKS.items():
        line = script_line(version, "graph_breaks", where)
        rows = [gb for gb in found if gb.short_location == line]
        assert len(rows) == 1, f"{version}: breaks at {line}: {[gb.title for gb in found]}"
        assert rows[0].title.startswith(said[version]), rows[0].title
        assert len(rows[0].title) < 150, "a paragraph is not a title"
    for gb in found:
        assert not gb.title.startswith(("Graph break in user code", "Explanation", "Unsupported:"))


def test_data_dependent_branch_reason_2_6_and_2_15() -> None:
    at = "break D: data-dependent branch"
    for version, said in (("2.6", "Data-dependent jump"), ("2.15", "Data-dependent branching")):
        line = script_line(version, "graph_breaks", at)
        titles = [gb.title for gb in graph_breaks(trace(version, "graph_breaks"))]
        rows = [
            gb.title
            for gb in graph_breaks(trace(version, "graph_breaks"))
            if gb.short_location == line
        ]
        assert rows == [said], titles


def test_2_4_one_break_hit_by_six_compiles_is_one_row_with_the_compiles_that_hit_it() -> None:
    """torch 2.4 logs the print break on each restarted attempt ([1/0_1] ...); the compiles
    that hit it are the first attempts, and the inlined hits are the same break."""
    found = graph_breaks(trace("2.4", "graph_breaks"))
    assert len(found) == 4, [(gb.title, gb.location) for gb in found]  # with the jump
    prints = found[0]
    assert prints.title.startswith("builtin: print")
    assert sorted(prints.compile_ids) == ["[0/0]", "[1/0]", "[1/1]", "[1/2]", "[3/0]", "[5/0]"]
    restarted = {  # 2.4 writes the frame's id in the record, the attempt in the envelope
        f"[{m['compile_id']}]"
        for m in metrics_lines(fixture("2.4", "graph_breaks"))
        if any("print" in r for r in m["restart_reasons"] or [])
    }
    assert restarted == set(prints.compile_ids)
    assert prints.short_location == script_line("2.4", "graph_breaks", "break A: print")


# -- recompiles --------------------------------------------------------------------------------
def test_2_4_recompiles_say_which_guard_changed() -> None:
    """torch 2.4 logs no recompile reason: the guard of the previous compile that changed."""
    found = {r.unit.display: r for r in recompiles(trace("2.4", "recompiles"))}
    assert list(found) == ["[0/1]", "[0/2]", "[0/3]", "[0/4]"]
    assert found["[0/1]"].reason == "0/0: L['mode'] == 'relu'"
    assert "torch.float32" in found["[0/3]"].reason  # [0/3] is the float64 call
    assert all(r.reason and r.guard_diff for r in found.values())


def test_2_4_restarted_frames_recompile_with_a_guard_diff() -> None:
    """Block.forward recompiles for each Block instance; its guards are on the _1 attempts."""
    found = {r.unit.display: r for r in recompiles(trace("2.4", "graph_breaks"))}
    assert set(found) == {"[1/1]", "[1/2]"}
    for r in found.values():
        assert "L['self']" in r.reason and r.guard_diff


# -- failures ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "scenario", "expected"),
    [
        ("2.4", "compile_error", {"BackendCompilerFailed", "TorchRuntimeError", "Unsupported"}),
        ("2.4", "export", {"UserError", "ConstraintViolationError"}),
        ("2.6", "export", {"UserError", "ConstraintViolationError"}),
        ("2.6", "compile_error", {"BackendCompilerFailed", "TorchRuntimeError", "Unsupported"}),
    ],
)
def test_failure_types_are_exception_names(version: str, scenario: str, expected: set) -> None:
    kinds = {f.kind for f in failures(trace(version, scenario)) if not f.is_restart}
    assert kinds == expected


def test_2_6_recompile_limit_is_not_a_backward_failure() -> None:
    """torch 2.6 logs the recompile limit as ``bwd_compilation_metrics``; it is the frame's."""
    raw = metrics_lines(fixture("2.6", "recompiles"), "bwd_compilation_metrics")
    assert [m["fail_type"] for m in raw] == ["RecompileLimitExceeded"]
    rows = [f for f in failures(trace("2.6", "recompiles")) if not f.is_restart]
    assert [(f.unit.display, f.kind, f.backward) for f in rows] == [
        ("[0/5]", "RecompileLimitExceeded", False)
    ]


# -- compile times -----------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["compile_error", "export"])
def test_2_4_failed_compiles_show_the_time_until_they_raised(scenario: str) -> None:
    raw = {
        f"[{m['compile_id']}]": m["dynamo_time_before_restart_s"]
        for m in metrics_lines(fixture("2.4", scenario))
        if m["fail_type"] and m["entire_frame_compile_time_s"] is None
    }
    assert raw
    times = {t.unit.display: t.total for t in compile_times(trace("2.4", scenario))}
    for compile_id, seconds in raw.items():
        assert times[compile_id] == pytest.approx(seconds), compile_id
        assert seconds > 0


@pytest.mark.parametrize("version", ["2.10", "2.15"])
def test_aotinductor_compile_time_from_its_start_and_end(version: str) -> None:
    (raw,) = metrics_lines(fixture(version, "aoti"))
    assert raw.get("duration_us") is None and raw["compile_id"] is None
    seconds = (raw["end_time_us"] - raw["start_time_us"]) / 1e6
    assert seconds > 10  # an AOTInductor build of a small model, on a loaded 2-core machine
    times = compile_times(trace(version, "aoti"))
    assert sum(t.total for t in times) == pytest.approx(seconds)
    (timed,) = times
    # [-/-], the records outside any compile: no failure-like status (nor "Empty graph")
    assert statuses(trace(version, "aoti"))[timed.unit.display] == "outside"


# -- version -----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", version_traces(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_pytorch_version_is_read_where_the_trace_has_it(path: Path) -> None:
    """2.15 logs a torch_version artifact, 2.10 only ``pytorch_version`` in the metrics,
    2.6 and 2.4 neither (nor do 2.10's non-strict export and draft export, with no metrics)."""
    text = path.read_text(encoding="utf-8")
    version = path.parent.name.removeprefix("torch-")
    got = load(path).torch_version
    if '"pytorch_version"' in text:
        assert got == TORCH_VERSION[version]
    else:
        assert got is None


# -- input folders -----------------------------------------------------------------------------
def test_a_folder_with_a_notes_file_beside_the_log_builds_the_log(tmp_path: Path) -> None:
    """The 2.15 draft-export folder held ``check.txt`` beside the log: "2 logs found"."""
    shutil.copy(fixture("2.15", "export_draft"), tmp_path / "dedicated_log_torch_trace_x.log")
    (tmp_path / "check.txt").write_text("tlsite output of this run\n", encoding="utf-8")
    resolved = resolve_input(tmp_path)
    assert [log.display_name for log in resolved.logs] == ["dedicated_log_torch_trace_x.log"]
    assert resolved.ignored == ["check.txt: not a log"]


# -- what a user reads in the built report -----------------------------------------------------
@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory):
    return site_cache(tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("path", version_traces(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_report_of_every_version_reads_right(sites, path: Path) -> None:
    """No line skipped, no event type without a view, no class repr or "Explanation:" shown
    as a reason, the version shown where the trace has it, no 0.00 s for a compile that took
    time."""
    site: BuiltSite = sites.get(path)
    trace_ = load(path)
    assert trace_.stats.skipped_lines == 0, trace_.stats.summary()
    assert not trace_.stats.unknown_events, trace_.stats.unknown_events
    health = article_text(site.page("health.html"))
    assert "no special view" not in health
    facts = glance(site)
    version = path.parent.name.removeprefix("torch-")
    if trace_.torch_version:
        assert facts["PyTorch"].startswith(TORCH_VERSION[version])
    overview = article_text(site.page("index.html"))
    assert not re.search(r"Graph break ×\d+: (Explanation|Graph break in user code)", overview)
    for rows in tables(site.page("failures.html"))[:1]:  # 2.4's fail_type is a class repr
        types = [row[1].text for row in rows[1:]]
        assert not [t for t in types if t.startswith("<class")], types
    timed = [t for t in compile_times(trace_) if t.total > 0.005]
    if timed:
        assert "Total compile time 0.00 s" not in article_text(site.page("index.html"))


# -- exports -----------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["2.10", "2.15"])
def test_a_non_strict_export_that_raised_is_a_failure(version: str) -> None:
    """Non-strict export logs no metrics; the data-dependent export's failed make_fx trace
    leaves its partial graph, and that compile failed (the script: DataDep raises)."""
    raw = fixture(version, "export").read_text(encoding="utf-8")
    assert raw.count('"make_fx_fail_partial"') == 1
    assert '"compilation_metrics"' not in raw
    found = trace(version, "export")
    rows = [f for f in failures(found) if not f.is_restart]
    assert len(rows) == 1
    (unit,) = [
        u
        for u in found.units.values()
        if any(a.name == "make_fx_fail_partial" for a in u.artifacts)
    ]
    assert rows[0].unit is unit
    # 2.10 logs the calls with no compile id: [-/-] keeps its neutral status, the row says it
    assert statuses(found)[unit.display] == (ERROR if version == "2.15" else "outside")


@pytest.mark.parametrize("version", ["2.4", "2.6"])
def test_multi_rank_folders_read_every_line_of_both_ranks(version: str) -> None:
    folder = FIXTURE_TRACES / f"torch-{version}" / "multi_rank"
    resolved = resolve_input(folder)
    assert resolved.is_multi_rank
    assert [log.rank for log in resolved.logs] == [0, 1]
    for path in sorted(folder.glob("*.log")):
        ranked = load(path)
        assert ranked.stats.skipped_lines == 0, ranked.stats.summary()
        assert ranked.units, path.name


def test_2_6_draft_export_lists_its_data_dependent_error() -> None:
    """torch 2.6 names the event ``propagate_real_tensors`` (later ``…_provenance``); the
    script's `if k > 2` on an `.item()` value is the data-dependent error torch printed."""
    from tlsite.core.analysis.export_report import DATA_DEPENDENT_ERROR, export_failures

    found = load(fixture("2.6", "export_draft"), export_mode=True)
    dependent = [f for f in export_failures(found) if f.type == DATA_DEPENDENT_ERROR]
    assert dependent, [f.type for f in export_failures(found)]
    assert dependent[0].expr == "u0 > 2" and dependent[0].result == "True"
    line = script_line("2.6", "export_draft", "if k > 2:")  # 2.6 logs no user_stack here
    frames = {f"{f.filename.rsplit('/', 1)[-1]}:{f.line}" for f in dependent[0].stack}
    assert line in frames


def test_2_4_data_dependent_jump_is_a_break_with_no_reason() -> None:
    """2.4 logs nothing for `if y.sum() > 0` but the resume function after it
    (``torch_dynamo_resume_in_post_at_42``): a break at that line, charged to `post`."""
    line = script_line("2.4", "graph_breaks", "break D: data-dependent branch")
    rows = [gb for gb in graph_breaks(trace("2.4", "graph_breaks")) if gb.short_location == line]
    assert [(gb.title, gb.compile_ids) for gb in rows] == [
        ("Graph break (this torch logs no reason for it)", ["[7/0]"])
    ]
    post = [m for m in metrics_lines(fixture("2.4", "graph_breaks")) if m["co_name"] == "post"]
    assert [m["compile_id"] for m in post] == ["7/0"] and not post[0]["restart_reasons"]


def test_2_4_a_break_with_no_reason_shows_no_empty_detail_block() -> None:
    """Its section on Graph breaks says where and which compile; no empty code block under it."""
    from tlsite.core.render.pages import ReportRenderer

    page = ReportRenderer(trace("2.4", "graph_breaks")).graph_breaks_page().standalone_markdown()
    sections = re.split(r"^## ", page, flags=re.M)[1:]
    (unlogged,) = [s for s in sections if "this torch logs no reason" in s.split("\n", 1)[0]]
    assert "Compile ids: [\\[7/0\\]]" in unlogged and "```" not in unlogged
    assert all("```" in s for s in sections if s is not unlogged)

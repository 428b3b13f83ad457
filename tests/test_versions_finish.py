"""Issue #17, what was left: export calls timed one by one, records outside any compile and the
AOTInductor build, draft export told from a plain export under TORCH_DTRACE, torchrun under
TORCH_DTRACE (two logs per rank), and readable views of the remaining text artifacts.

Real traces: ``tests/fixtures/traces/torch-<version>/`` (fixtures README, "Other torch
versions"), ``torch-2.15/export_dtrace.log``, ``dtrace_two_logs/`` and ``dtrace_torchrun/``
(``scripts/dtrace_torchrun.py`` under ``torchrun --nproc-per-node 2`` with TORCH_DTRACE).
Expected values come from the raw log lines and the scripts, never from tlsite's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES
from test_site import article_text, artifact_sections, h1_text, tables

from tlsite.cli import build
from tlsite.core import load
from tlsite.core.analysis.export_report import export_failures
from tlsite.core.source import resolve_input

EXPORT_DTRACE = FIXTURE_TRACES / "torch-2.15" / "export_dtrace.log"
TORCHRUN = FIXTURE_TRACES / "dtrace_torchrun"


def fixture(version: str, scenario: str) -> Path:
    return FIXTURE_TRACES / f"torch-{version}" / f"{scenario}.log"


def raw_records(path: Path, event_type: str) -> list[dict]:
    """The envelopes of ``event_type`` records, read straight from the log."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if f'{{"{event_type}":' in line and not line.startswith("\t"):
            found.append(json.loads(line[line.index("{") :]))
    return found


# -- 3. a plain torch.export under TORCH_DTRACE is not a draft export ---------------------------
def test_plain_export_under_dtrace_is_not_read_as_a_draft_export(tmp_path: Path) -> None:
    """export_dtrace.py calls torch.export.export three times under TORCH_DTRACE: each call
    logs `export` ("start!") and the good one its `exported_program`, but no draft export ran
    (no fake-kernel or real-tensor-propagation record): the report is a torch.compile report."""
    assert len(raw_records(EXPORT_DTRACE, "export")) == 3
    assert len(raw_records(EXPORT_DTRACE, "exported_program")) == 1
    for marker in ("missing_fake_kernel", "mismatched_fake_kernel"):
        assert not raw_records(EXPORT_DTRACE, marker)
    assert not raw_records(EXPORT_DTRACE, "propagate_real_tensors_provenance")
    assert load(EXPORT_DTRACE).export_mode is False
    out = tmp_path / "site"
    build(str(EXPORT_DTRACE), out, make_zip=False)
    assert h1_text((out / "index.html").read_text(encoding="utf-8")).startswith(
        "torch.compile report"
    )
    assert not (out / "export_report.html").exists()


@pytest.mark.parametrize(
    "path",
    [
        fixture("2.15", "export_draft"),
        fixture("2.10", "export_draft"),
        fixture("2.6", "export_draft"),
        FIXTURE_TRACES / "dtrace_two_logs",
        FIXTURE_TRACES / "dtrace_two_logs" / "torch-2.10",
    ],
    ids=["2.15", "2.10", "2.6", "two_logs", "two_logs_2.10"],
)
def test_a_real_draft_export_still_reads_as_one(path: Path) -> None:
    trace = load(path)
    assert trace.export_mode is True
    assert export_failures(trace)


# -- 4. torchrun under TORCH_DTRACE: each rank's two logs are one process's ---------------------
def rank_logs(rank: int) -> tuple[Path, Path]:
    """(main log, draft-export log) of ``rank``, told apart by their records."""
    logs = sorted(TORCHRUN.glob(f"dedicated_log_torch_trace_rank_{rank}_*.log"))
    draft = [p for p in logs if '{"exported_program"' in p.read_text(encoding="utf-8")]
    assert len(logs) == 2 and len(draft) == 1
    return next(p for p in logs if p not in draft), draft[0]


def pids(path: Path) -> set[str]:
    return {
        line.split()[2] for line in path.read_text(encoding="utf-8").splitlines() if line[:1] == "V"
    }


def test_torchrun_dtrace_folder_joins_each_ranks_logs() -> None:
    """Each rank's process wrote its main log and draft export's (one pid per rank): the
    folder reads as two ranks, each the two logs of its process, main log first."""
    with resolve_input(TORCHRUN) as resolved:
        assert resolved.is_multi_rank
        assert [log.rank for log in resolved.logs] == [0, 1]
        for rank, log in enumerate(resolved.logs):
            main, draft = rank_logs(rank)
            assert len(pids(main) | pids(draft)) == 1
            assert [p.display_name for p in log.logs_read()] == [main.name, draft.name]
            lines = len(main.read_bytes().splitlines()) + len(draft.read_bytes().splitlines())
            assert [(p.first_line, p.last_line) for p in log.parts][-1][1] == lines


@pytest.mark.slow
def test_torchrun_dtrace_rank_report_names_the_users_line(tmp_path: Path) -> None:
    """A rank's draft-export issue names the script's line: its stack uses the file name
    interned in the rank's main log."""
    script = FIXTURE_TRACES.parent / "scripts" / "dtrace_torchrun.py"
    lines = script.read_text(encoding="utf-8").splitlines()
    branch = next(n for n, text in enumerate(lines, 1) if "if k > 2:" in text)
    for rank in (0, 1):
        trace = load(TORCHRUN, rank=rank)
        assert trace.export_mode
        issues = export_failures(trace)
        assert [i.type for i in issues] == ["Data Dependent Error", "Missing Fake Kernel"]
        frames = [frame.describe() for frame in issues[0].user_stack]
        assert any(f"dtrace_torchrun.py:{branch}" in frame for frame in frames), frames
    out = tmp_path / "site"
    build(str(TORCHRUN), out, make_zip=False)
    for rank in (0, 1):
        health = article_text((out / f"rank_{rank}" / "health.html").read_text(encoding="utf-8"))
        main, draft = rank_logs(rank)
        assert main.name in health and draft.name in health


# -- 1. strict export (torch 2.10+): each call's compile time, never "[-/-]" --------------------
def call_seconds(metrics: dict) -> float:
    """A strict export call's time as its metrics record says it (``duration_us``, or its
    start and end when it has none)."""
    if metrics.get("duration_us") is not None:
        return metrics["duration_us"] / 1e6
    return (metrics["end_time_us"] - metrics["start_time_us"]) / 1e6


def time_rows(page_html: str) -> dict[str, tuple[str, float]]:
    """The compile-time page's table: first cell → (its link, total seconds)."""
    for rows in tables(page_html):
        if rows and rows[0][0].text in ("Compile", "Compile id") and rows[0][2].text == "Total (s)":
            return {r[0].text: (r[0].hrefs[0], float(r[2].text)) for r in rows[1:]}
    raise AssertionError("no compile-time table")


@pytest.mark.slow
@pytest.mark.parametrize("version", ["2.15", "2.10"])
def test_strict_export_calls_are_timed_one_by_one(tmp_path: Path, version: str) -> None:
    """torch 2.10+ strict export logs each call's metrics with no compile id: the compile-time
    page has a row per call with that call's time, linking to the calls' compile id, and the
    overview names the slowest call, not [-/-]."""
    path = fixture(version, "export_strict")
    raw = [r["compilation_metrics"] for r in raw_records(path, "compilation_metrics")]
    assert len(raw) == 3 and all(m["compile_id"] is None for m in raw)
    expected = {f"export #{n} ([0/0])": call_seconds(m) for n, m in enumerate(raw, 1)}
    out = tmp_path / "site"
    build(str(path), out, make_zip=False)
    rows = time_rows((out / "compile_time.html").read_text(encoding="utf-8"))
    assert set(rows) == set(expected)
    for name, seconds in expected.items():
        assert rows[name][1] == pytest.approx(seconds, abs=0.0006), name
        assert rows[name][0] == "-_0_0_0/index.html"
    slowest = max(expected, key=expected.__getitem__)
    fact = glance_of(out)["Slowest compile"]
    assert "[-/-]" not in fact
    assert fact == f"{slowest} torch.export: {expected[slowest]:.2f} s"


def glance_of(site: Path) -> dict[str, str]:
    for rows in tables((site / "index.html").read_text(encoding="utf-8")):
        facts = {row[0].text: row[1].text for row in rows if len(row) == 2 and row[0].text}
        if "Log" in facts:
            return facts
    raise AssertionError("no 'At a glance' table")


# -- 2. [-/-]: records outside any compile; the AOTInductor build --------------------------------
@pytest.mark.slow
def test_records_of_no_compile_id_are_not_a_compile_missing_its_metrics(tmp_path: Path) -> None:
    """2.15 logs its torch_version artifact with no compile id; the [-/-] page says what it
    holds, with no status that reads like a failure ("Metrics were missing")."""
    path = fixture("2.15", "graph_breaks")
    (record,) = raw_records(path, "artifact")[:1]
    assert record["artifact"]["name"] == "torch_version" and "frame_id" not in record
    out = tmp_path / "site"
    build(str(path), out, make_zip=False)
    page = (out / "-_-_-_-" / "index.html").read_text(encoding="utf-8")
    assert h1_text(page).rstrip("¶") == "[-/-] records outside any compile"
    text = article_text(page)
    for failure_like in ("Metrics were missing", "No metrics", "Error", "Success"):
        assert failure_like not in text, failure_like
    assert "torch_version" in text


@pytest.mark.slow
@pytest.mark.parametrize("version", ["2.15", "2.10"])
def test_aotinductor_build_is_one_thing_with_its_time_and_code(
    tmp_path: Path, version: str
) -> None:
    """An AOTInductor build logs its metrics (start and end, no compile id) and its wrapper and
    kernel code (graph_dump) with no compile id: the report names it "AOTInductor build",
    times it from start to end, and links its code from the [-/-] page."""
    path = fixture(version, "aoti")
    (metrics,) = [r["compilation_metrics"] for r in raw_records(path, "compilation_metrics")]
    seconds = (metrics["end_time_us"] - metrics["start_time_us"]) / 1e6
    dumps = [r["graph_dump"]["name"] for r in raw_records(path, "graph_dump")]
    assert dumps == ["inductor_aot_wrapper_code", "inductor_aot_kernel_code"]
    out = tmp_path / "site"
    build(str(path), out, make_zip=False)
    rows = time_rows((out / "compile_time.html").read_text(encoding="utf-8"))
    assert list(rows) == ["AOTInductor build"]
    assert rows["AOTInductor build"] == ("-_-_-_-/index.html", pytest.approx(seconds, abs=0.0006))
    assert glance_of(out)["Slowest compile"] == f"AOTInductor build: {seconds:.2f} s"
    page = (out / "-_-_-_-" / "index.html").read_text(encoding="utf-8")
    text = article_text(page)
    assert f"AOTInductor build: {seconds:.3f} s of compile time" in text
    sections = artifact_sections(page)
    for name in dumps:
        (number,) = [n for n, html in sections.items() if f">{name}" in html.split("</h3>")[0]]
        assert f'href="#artifact-{number}"' in page, name
        assert "<code" in sections[number]  # the code itself is on the page


# -- 5. text artifacts with a line saying what they are ------------------------------------------
def payloads(path: Path, name: str) -> list[str]:
    """The payload text of each ``name`` artifact, read straight from the log."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found = []
    for index, line in enumerate(lines):
        if f'"name": "{name}"' in line and not line.startswith("\t"):
            body = []
            for follow in lines[index + 1 :]:
                if not follow.startswith("\t"):
                    break
                body.append(follow[1:])
            found.append("\n".join(body))
    return found


@pytest.mark.slow
def test_2_15_runtime_wrappers_and_fw_metadata_say_what_they_are(tmp_path: Path) -> None:
    """torch 2.15 merges six wrapper artifacts into aot_autograd_runtime_wrappers (a `# name`
    line starts each); the page names its sections and shows the code as Python. The forward
    metadata says how many inputs and outputs it describes."""
    path = fixture("2.15", "recompiles")
    (wrappers, *_) = payloads(path, "aot_autograd_runtime_wrappers")
    sections = [line[2:] for line in wrappers.splitlines() if line.startswith("# ")]
    assert sections == ["runtime_wrapper_orchestration"]
    (metadata, *_) = payloads(path, "aot_forward_graph_fw_metadata")
    inputs = metadata.count("InputAliasInfo(")
    out = tmp_path / "site"
    build(str(path), out, make_zip=False)
    page = (out / "-_0_0_0" / "index.html").read_text(encoding="utf-8")
    text = article_text(page)
    assert (
        "AOTAutograd's runtime wrappers: the Python code that runs around the compiled graph"
        in text
    )
    assert "each section starts with its # name line: runtime_wrapper_orchestration." in text
    sections_html = artifact_sections(page)
    (number,) = [
        n for n, html in sections_html.items() if "aot_autograd_runtime_wrappers" in html[:300]
    ]
    assert 'class="k">def</span>' in sections_html[number]  # highlighted as Python
    noun = "input" if inputs == 1 else "inputs"
    assert f"(ViewAndMutationMeta): {inputs} {noun}, 0 of them mutated in place" in text


@pytest.mark.slow
def test_side_effects_list_what_dynamo_replays(tmp_path: Path) -> None:
    """dynamo_side_effects (torch 2.15, compiled autograd's [!0/1/0]): one line per side
    effect, the first line of each message torch joins with a line of `=`."""
    path = fixture("2.15", "compiled_autograd")
    (payload,) = payloads(path, "dynamo_side_effects")
    messages = [m for m in payload.split("\n\n" + "=" * 40 + "\n\n")]
    firsts = [m.splitlines()[0] for m in messages]
    assert len(firsts) == 4 and all(
        f.startswith("Mutating object of type Parameter") for f in firsts
    )
    out = tmp_path / "site"
    build(str(path), out, make_zip=False)
    text = article_text((out / "0_1_0_0" / "index.html").read_text(encoding="utf-8"))
    lead = "Side effects Dynamo replays after the compiled graph runs"
    assert lead in text
    listed = text.split(lead, 1)[1]
    assert " ".join(firsts) in listed


def chromium_events(path: Path, name: str) -> list[dict]:
    """The chromium events called ``name``, decoded from their payloads in the log."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found = []
    for index, line in enumerate(lines):
        if '{"chromium_event":' in line:
            body = []
            for follow in lines[index + 1 :]:
                if not follow.startswith("\t"):
                    break
                body.append(follow[1:])
            event = json.loads("\n".join(body))
            if event["name"] == name:
                found.append(event)
    return found


@pytest.mark.slow
def test_2_6_aotinductor_build_is_timed_by_its_inductor_compile(tmp_path: Path) -> None:
    """torch 2.6 logs the AOTInductor build under the export's compile id [0/0], after that
    compile's metrics (dynamo's 0.03 s), with no metrics of its own; its inductor_compile span
    (chromium B to E) is its time, shown as the AOTInductor build beside [0/0]'s own."""
    path = fixture("2.6", "aoti")
    (metrics,) = [r["compilation_metrics"] for r in raw_records(path, "compilation_metrics")]
    spans = chromium_events(path, "inductor_compile")
    assert [e["ph"] for e in spans] == ["B", "E"]
    seconds = (spans[1]["ts"] - spans[0]["ts"]) / 1e6
    assert seconds > 1 > metrics["duration_us"] / 1e6
    assert [r["graph_dump"]["name"] for r in raw_records(path, "graph_dump")] == [
        "inductor_aot_code"
    ]
    out = tmp_path / "site"
    build(str(path), out, make_zip=False)
    rows = time_rows((out / "compile_time.html").read_text(encoding="utf-8"))
    assert rows["AOTInductor build"] == ("-_0_0_0/index.html", pytest.approx(seconds, abs=0.0006))
    assert rows["[0/0]"][1] == pytest.approx(metrics["duration_us"] / 1e6, abs=0.0006)
    assert glance_of(out)["Slowest compile"] == f"AOTInductor build: {seconds:.2f} s"
    page = (out / "-_0_0_0" / "index.html").read_text(encoding="utf-8")
    assert f"AOTInductor build under this compile id: {seconds:.3f} s" in article_text(page)

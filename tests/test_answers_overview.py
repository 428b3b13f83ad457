"""The overview answers first: every compile id in the stack trie is on screen when the page
opens, a compile the process died in is named at the top, and "Worst problems first" says
when it cut a list and what many problems have in common.

Expected values come from the logs themselves (line numbers, compile ids, recompile reasons)
or from ``tests/fixtures/README.md``, never from tlsite's own output.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import (
    FIXTURE_TRACES,
    PROJECT_ROOT,
    TORCH_213,
    all_corpus_traces,
    tlparse_input,
    trace_id,
)
from test_answers_trie2 import framed_compile_ids
from test_site import GRAPH_BREAKS, RECOMPILES, SiteCache, site_cache

from tlsite.core import load
from tlsite.core.analysis import status
from tlsite.core.render.pages import ReportRenderer

if TYPE_CHECKING:
    from browser import SiteOpener

KILLED = FIXTURE_TRACES / "killed" / "killed.log"
TRAINING = next(iter(sorted((TORCH_213 / "training").glob("*.log"))), TORCH_213 / "training")
EXAMPLE = PROJECT_ROOT / "core" / "examples" / "example.log"
#: tlparse's multi-rank input whose rank 1 recompiles one function 14 times on one input
RECOMPILE_STORM = tlparse_input("multi_rank_logs/dedicated_log_torch_trace_rank_1.log")
TRIE_TRACES = [TRAINING, GRAPH_BREAKS]


# -- helpers ----------------------------------------------------------------------------------
def plain(markdown: str) -> str:
    """What a reader sees of tlsite's escaped Markdown: no tags, links, emphasis, escapes or
    entities."""
    text = re.sub(r"<[^>]+>", "", markdown)
    text = re.sub(r"\[((?:\\.|[^\]\\])*)\]\([^)]*\)", r"\1", text).replace("**", "")
    text = re.sub(r"\\(.)", r"\1", text)
    return html.unescape(text)


def problems(trace_path: Path) -> list[str]:
    """The bullets of the overview's "Worst problems first", as plain text."""
    markdown = ReportRenderer(load(trace_path)).overview().markdown
    section = markdown.split("## Worst problems first", 1)[1].split("\n## ", 1)[0]
    return [plain(line[2:]) for line in section.splitlines() if line.startswith("- ")]


def log_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def record_line_of_event(
    lines: list[str], name: str, phase: str, compile_id: str, *, first: bool = False
) -> int:
    """The 1-based line of the chromium record whose payload is event ``name``/``phase`` of
    ``compile_id`` (the last such record in the log, or the first); 0 if there is none."""
    found: list[int] = []
    record = 0
    payload: list[str] = []
    for number, line in enumerate([*lines, ""], 1):
        if not line.startswith("\t"):
            if payload and _is_event(payload, name, phase, compile_id):
                found.append(record)
            record, payload = number, []
        elif '"chromium_event"' in lines[record - 1]:
            payload.append(line.strip())
    return (found[0] if first else found[-1]) if found else 0


def _is_event(payload: list[str], name: str, phase: str, compile_id: str) -> bool:
    return (
        f'"name": "{name}",' in payload
        and f'"ph": "{phase}",' in payload
        and f'"compile_id": "{compile_id}"' in payload
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SiteCache:
    return site_cache(tmp_path_factory)


# == 1. the stack trie shows every compile id =================================================
@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("trace", TRIE_TRACES, ids=[trace_id(p) for p in TRIE_TRACES])
def test_every_compile_id_in_the_trie_is_visible_without_a_click(
    trace: Path, built: SiteCache, open_site: SiteOpener
) -> None:
    site = built.get(trace)
    page, report = open_site(site.site / "index.html")
    page.wait_for_load_state("networkidle")
    links = page.locator(".stack-trie a.cid")
    # every compile id of the log is there once (one without a dynamo_start stack too)
    expected = framed_compile_ids(trace)
    assert sorted(links.nth(i).inner_text() for i in range(links.count())) == sorted(expected)
    assert len(expected) > sum(1 for line in log_lines(trace) if '{"dynamo_start":' in line)
    hidden = [
        links.nth(i).inner_text() for i in range(links.count()) if not links.nth(i).is_visible()
    ]
    assert hidden == [], f"compile ids hidden on first load: {hidden}"
    assert report.console_errors == []


@pytest.mark.browser
@pytest.mark.slow
def test_a_collapsed_trie_node_says_how_many_compile_ids_it_holds(
    built: SiteCache, open_site: SiteOpener
) -> None:
    site = built.get(TRAINING)
    page, report = open_site(site.site / "index.html")
    page.wait_for_load_state("networkidle")
    nodes = page.locator(".stack-trie > ul > li.trie-node").element_handles()
    node = max(nodes, key=lambda n: len(n.query_selector_all(":scope > ul a.cid")))
    toggle = node.query_selector(":scope > .trie-toggle")
    count = node.query_selector(":scope > .trie-count")
    inside = node.query_selector_all(":scope > ul a.cid")
    assert toggle is not None and count is not None and len(inside) > 1
    assert not count.is_visible()  # open: its compile ids speak for themselves
    toggle.click()
    assert node.get_attribute("class") and "trie-collapsed" in node.get_attribute("class")
    assert not any(link.is_visible() for link in inside)
    assert count.is_visible()
    assert count.inner_text() == f"{len(inside)} compile ids inside"
    toggle.click()
    assert all(link.is_visible() for link in inside)
    assert not count.is_visible()
    assert report.console_errors == []


# == 8. a compile cut off by the process dying is named =======================================
def test_the_compile_the_process_died_in_is_the_first_problem() -> None:
    lines = log_lines(KILLED)
    first = problems(KILLED)[0]
    # README: killed while inductor generated the code of [1/0], the resume function after
    # the print at killed.py:48; the log's last line is the end of its last record
    assert first.startswith("Interrupted: the log ends inside [1/0]")
    assert "torch_dynamo_resume_in_step_at_48" in first
    assert "Inductor code generation" in first
    codegen = record_line_of_event(lines, "GraphLowering.codegen", "B", "1/0")
    assert codegen > 0
    began = lines[codegen - 1][6:18]  # the glog time, to the millisecond
    assert f"phase GraphLowering.codegen began at {began} (line {codegen})" in first
    last_line = len(lines) - 1 if lines[-1] == "" else len(lines)
    assert f"The log ends at line {last_line} with this compile unfinished" in first
    start = record_line_of_event(lines, "dynamo", "B", "1/0")
    assert (
        f"its first open phase, dynamo, began at {lines[start - 1][6:18]} (line {start})" in first
    )
    assert "no metrics were logged" in first


def test_the_interrupted_compile_page_says_so_and_lists_its_open_phases() -> None:
    trace = load(KILLED)
    renderer = ReportRenderer(trace)
    page = plain(renderer.unit_page(trace.unit("[1/0]")).markdown)
    assert "Interrupted: the log ends in this compile" in page
    assert "Metrics were missing" not in page
    lines = log_lines(KILLED)
    for name in ("dynamo", "inductor_compile", "code_gen", "GraphLowering.codegen"):
        line = record_line_of_event(lines, name, "B", "1/0")
        assert f"| {name} | {lines[line - 1][6:18]} | {line} |" in page
    # a phase that began and ended is not listed as open
    assert "| Scheduler.__init__ |" not in page
    # the compiles that finished keep their own status
    assert renderer.status(trace.unit("[0/0_1]")) != status.INTERRUPTED


def test_a_log_cut_inside_inductor_codegen_names_the_attempt_that_was_running(
    tmp_path: Path,
) -> None:
    # example.log (README §5) truncated at a line boundary right after the chromium record
    # where inductor's code generation of [0/0_1] (the restart after the print) begins
    lines = log_lines(EXAMPLE)
    codegen = record_line_of_event(lines, "GraphLowering.codegen", "B", "0/0", first=True)
    assert codegen > 0
    end = codegen
    while end < len(lines) and lines[end].startswith("\t"):
        end += 1
    cut = tmp_path / "example_cut.log"
    cut.write_text("\n".join(lines[:end]) + "\n", encoding="utf-8")
    first, *others = problems(cut)
    assert first.startswith("Interrupted: the log ends inside [0/0_1]")
    assert "phase GraphLowering.codegen" in first
    assert f"The log ends at line {end} " in first
    assert "Interrupted" not in " ".join(others)
    # only the attempt that was running: [0/0] had broken the graph and restarted (README §5)
    statuses = status.statuses(load(cut))
    assert [u for u, s in statuses.items() if s == status.INTERRUPTED] == ["[0/0_1]"]


def test_a_log_cut_while_compiling_the_backward_graph_names_that_compile(
    tmp_path: Path,
) -> None:
    # example.log (README §5): the training step compiles the backward graph of [0/0_1] on
    # the first backward call, after the forward's compilation_metrics; cut the log right
    # after the record where inductor's code generation of that backward graph begins
    lines = log_lines(EXAMPLE)
    metrics = next(i for i, ln in enumerate(lines, 1) if '{"compilation_metrics":' in ln)
    codegen = record_line_of_event(lines, "GraphLowering.codegen", "B", "0/0")
    backward = record_line_of_event(lines, "entire_backward_compile", "B", "0/0")
    assert metrics < backward < codegen
    end = codegen
    while end < len(lines) and lines[end].startswith("\t"):
        end += 1
    cut = tmp_path / "example_cut_backward.log"
    cut.write_text("\n".join(lines[:end]) + "\n", encoding="utf-8")
    first = problems(cut)[0]
    assert first.startswith("Interrupted: the log ends inside [0/0_1] forward")
    assert "Inductor code generation of the backward graph" in first
    assert (
        f"entire_backward_compile, began at {lines[backward - 1][6:18]} (line {backward})" in first
    )
    assert "dynamo had logged its metrics, but these later phases never ended" in first


@pytest.mark.slow
@pytest.mark.parametrize(
    "trace",
    [p for p in all_corpus_traces() if p != KILLED.resolve() and p != KILLED],
    ids=trace_id,
)
def test_a_finished_log_has_no_interrupted_compile(trace: Path) -> None:
    """Compiles that lack metrics in older torch versions stay tlparse's "missing"."""
    loaded = load(trace)
    assert status.INTERRUPTED not in status.statuses(loaded).values()
    assert not any(p.startswith("Interrupted") for p in problems(trace))


# == 16. "and N more" and patterns ===========================================================
def test_recompiles_on_one_guard_are_said_once() -> None:
    reasons = [line for line in log_lines(RECOMPILE_STORM) if '"name": "recompile_reasons"' in line]
    recompile = next(p for p in problems(RECOMPILE_STORM) if p.startswith("Recompiled"))
    assert recompile.startswith(f"Recompiled {len(reasons)}×: kernel")
    assert (
        f"all {len(reasons)} on the same guard: "
        "tensor 'x' size mismatch at index 0. expected …, actual …"
    ) in recompile


def test_recompiles_on_different_guards_say_how_many() -> None:
    # README §2: mode == 'relu', size mismatch, dtype ×2, mode == 'gelu': three guards
    (recompile,) = [p for p in problems(RECOMPILES) if p.startswith("Recompiled")]
    assert recompile.startswith("Recompiled 5×: f")
    assert "3 different guards: " in recompile
    # the guard, without the values and the source line torch writes after it
    dtype = "tensor 'x' dtype mismatch. expected …, actual …"
    assert "mode == … 2×" in recompile and f"{dtype} 2×" in recompile


@pytest.mark.slow
def test_a_cut_list_says_how_many_more(tmp_path: Path) -> None:
    # the recompiles fixture repeated: every copy is a new frame recompiled again
    out = tmp_path / "recompiles_x7.log"
    subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "bench" / "make_trace.py"),
            "--size",
            "2600KB",
            "--base",
            str(RECOMPILES),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    recompile = re.compile(r'"frame_id": (\d+), "frame_compile_id": [1-9]')
    frames = {match.group(1) for match in recompile.finditer(out.read_text())}
    assert len(frames) > 5
    shown = problems(out)
    assert sum(p.startswith("Recompiled") for p in shown) == 5
    assert shown[-1] == (f"… and {len(frames) - 5} more recompiled functions: see Recompiles")

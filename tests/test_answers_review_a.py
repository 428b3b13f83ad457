"""Issue #16, review findings 1, 2, 5, 6, 15 and 19: what a reviewer saw wrong in the built
reports and the terminal, checked on real traces (the fixtures and tlparse's own inputs)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, tlparse_input
from test_cli import run_tlsite

from tlsite.core import load
from tlsite.core.render.page import insert_parts
from tlsite.core.render.pages import render_tree

CORRUPTED = tlparse_input("simple_corrupted_json.log")
KILLED = FIXTURE_TRACES / "killed" / "killed.log"
EXPORT_DRAFT = FIXTURE_TRACES / "export_draft" / "export_draft.log"
MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>~])")


def pages_of(log: Path) -> dict[str, str]:
    """The report's Markdown pages by path, with the parts of their text that are HTML put in
    (a compile page's summary, timers, stack) and Markdown's backslash escapes removed."""
    return {
        page.path: MD_ESCAPE.sub(r"\1", insert_parts(page.markdown, page.blocks))
        for page in render_tree(load(log)).pages
    }


def words(markdown: str) -> str:
    """Markdown as read: links, emphasis and tags dropped, whitespace collapsed."""
    text = re.sub(r"\[((?:\[[^\]]*\]|[^\][])*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"<[^>]+>", " ", text).replace("**", "")
    return " ".join(text.split())


# -- 1. a table runs into the next heading --------------------------------------------------------
@pytest.mark.parametrize(
    "log",
    [CORRUPTED, *sorted(FIXTURE_TRACES.glob("*/*.log"))],
    ids=lambda p: p.stem,
)
def test_no_table_runs_into_the_line_after_it(log: Path) -> None:
    """A pipe table ends at a blank line; a heading right after the last row becomes a row
    ("## Where" in the Findings table of simple_corrupted_json's health page)."""
    for path, markdown in pages_of(log).items():
        lines = markdown.splitlines()
        for row, after in itertools.pairwise(lines):
            if row.startswith("|") and row.rstrip().endswith("|") and after.strip():
                assert after.startswith("|"), f"{path}: table row followed by {after!r}"


# -- 2. --strict and damaged payloads -------------------------------------------------------------
def test_strict_says_why_it_exits_3_on_a_damaged_payload(tmp_path: Path) -> None:
    """simple_corrupted_json.log has one payload whose MD5 does not match (line 13)."""
    done = run_tlsite(
        "build", str(CORRUPTED), "-o", "site", "--bundle", "none", "--strict", cwd=tmp_path
    )
    assert done.returncode == 3, done.stderr
    assert re.search(r"\b1 payload MD5 mismatch\b(?!es)", done.stdout), done.stdout
    assert "--strict: 1 payload was damaged (MD5 mismatch); exit 3" in done.stderr


def test_overview_and_health_page_say_a_payload_was_damaged() -> None:
    pages = pages_of(CORRUPTED)
    log_row = next(line for line in pages["index.md"].splitlines() if ">Log<" in line)
    assert "1 damaged payload (MD5 mismatch)" in words(log_row)
    assert "](health.md)" in log_row
    health = words(pages["health.md"])
    assert "1 payload did not match its MD5" in health


# -- 19. --overwrite keeps the user's files; the not-a-trace message quotes whole escapes ---------
@pytest.mark.slow
def test_overwrite_refuses_a_report_holding_a_file_the_user_added(tmp_path: Path) -> None:
    site = tmp_path / "site"
    args = ("build", str(KILLED), "-o", "site", "--bundle", "none", "--overwrite", "--quiet")
    assert run_tlsite(*args, cwd=tmp_path).returncode == 0
    assert run_tlsite(*args, cwd=tmp_path).returncode == 0  # exactly what tlsite wrote
    (site / "payloads" / "my notes.txt").write_text("mine\n", encoding="utf-8")
    done = run_tlsite(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert "payloads/my notes.txt" in done.stderr
    assert (site / "payloads" / "my notes.txt").read_text(encoding="utf-8") == "mine\n"


@pytest.mark.parametrize("lead", range(4))
def test_not_a_trace_message_never_cuts_an_escape(tmp_path: Path, lead: int) -> None:
    """Undecodable bytes are quoted as ``\\xNN``; the quote is cut before one, never inside."""
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"a" * lead + bytes(range(0x80, 0x100)) * 2)
    done = run_tlsite("build", str(junk), "-o", "site", "--bundle", "none", cwd=tmp_path)
    assert done.returncode == 1
    quoted = done.stderr.rsplit("it starts with ", 1)[1].strip()
    assert quoted.endswith('…"'), quoted
    body = quoted[1:-2].lstrip("a")
    assert re.fullmatch(r"(\\x[0-9a-f]{2})+", body), quoted


# -- 5. the end-of-build summary names the main finding -------------------------------------------
@pytest.mark.slow
def test_build_summary_says_the_log_ends_inside_an_unfinished_compile(tmp_path: Path) -> None:
    """killed.log was cut while [1/0] was compiling (tests/fixtures/README.md)."""
    done = run_tlsite("build", str(KILLED), "-o", "site", "--bundle", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = next(line for line in done.stdout.splitlines() if line.startswith("Found: "))
    assert found.startswith("Found: the log ends inside [1/0] (interrupted), 1 graph break")


def test_build_summary_names_the_draft_export_issues(tmp_path: Path) -> None:
    done = run_tlsite("build", str(EXPORT_DRAFT), "-o", "site", "--bundle", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Found: 3 draft-export issues" in done.stdout  # torch's own report says 3


# -- 6. the draft-export overview does not contradict itself --------------------------------------
def test_draft_export_overview_lists_its_issues_and_no_compile_sections() -> None:
    overview = pages_of(EXPORT_DRAFT)["index.md"]
    worst = words(overview.split("## Worst problems first", 1)[1].split("\n## ", 1)[0])
    assert worst.startswith("- Draft export: 3 issues")
    assert "No compilation failures" not in overview and "were logged" not in worst
    assert "## Stack trie" not in overview and "dynamo_start" not in overview
    assert "dynamo_output_graph" not in overview  # the torch.compile pipeline explainer
    assert "](export_report.md)" in overview.split("## How to read this report", 1)[1]


# -- 15. wording: one thing is not "1 things" -----------------------------------------------------
ONE_OF_MANY = re.compile(
    r"(?<![\d.,/\[])\b1 (compile ids|frames|lines|records|times|issues|payloads|graph breaks"
    r"|recompiles|failures|nodes|hits|misses|bypasses|compiles|mismatches|slowest compile ids)\b"
)


@pytest.mark.parametrize(
    "log",
    [CORRUPTED, *sorted(FIXTURE_TRACES.glob("*/*.log"))],
    ids=lambda p: p.stem,
)
def test_one_thing_is_said_in_the_singular(log: Path) -> None:
    """e.g. "(1 frames)" on compile pages, "1 compile ids took", "hit 1 times", "1 misses"."""
    for path, markdown in pages_of(log).items():
        found = [m.group(0) for m in ONE_OF_MANY.finditer(markdown)]
        assert found == [], f"{path}: {found}"


def test_killed_compile_time_page_counts_one_compile_and_names_the_interrupted_one() -> None:
    page = words(pages_of(KILLED)["compile_time.md"])
    assert "1 compile id took 24.24 s in all." in page
    assert "forward and backward" not in page  # nothing in this trace compiled a backward
    assert "[1/0] was still compiling when the log ended" in page
    assert "its time is not counted here" in page

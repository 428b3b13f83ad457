"""Figures every reader of a trace must agree on (review findings after today's merges)."""

from __future__ import annotations

import re
from pathlib import Path

from corpus import FIXTURE_TRACES

from tlsite.cli import main
from tlsite.core import load
from tlsite.core.multirank import summarize_trace


def test_a_rank_summary_counts_the_compile_time_the_report_shows(tmp_path: Path) -> None:
    """torch 2.6 AOTInductor: no metrics record times the build, its inductor_compile span
    does; the multi-rank page's figure must be the report's, not dynamo's 0.03 s."""
    trace = load(FIXTURE_TRACES / "torch-2.6" / "aoti.log")
    try:
        report_total = sum(t.total for t in trace.compile_times)
        summary = summarize_trace(trace, 0, tmp_path)
    finally:
        trace.close()
    assert report_total > 1.0
    assert abs(summary.compile_seconds - report_total) < 1e-6


def _text(page: Path) -> str:
    html = page.read_text(encoding="utf-8")
    body = html[html.find("<article") : html.find("</article>")]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


def test_an_untimed_trace_says_compile_time_not_logged_and_exports_read_well(
    tmp_path: Path,
) -> None:
    """export_dtrace logs no compilation_metrics: the overview said "0.00 s"; a successful
    export call read "(from its exported program was logged)"."""
    out = tmp_path / "site"
    log = FIXTURE_TRACES / "torch-2.15" / "export_dtrace.log"
    assert main(["build", str(log), "-o", str(out), "--bundle", "none", "--no-browser"]) == 0
    overview = _text(out / "index.html")
    assert "Total compile time not logged" in overview
    assert "0.00 s" not in overview
    failures = _text(out / "failures.html")
    assert "was logged)" not in failures
    assert "succeeded (from exported_program )" in failures

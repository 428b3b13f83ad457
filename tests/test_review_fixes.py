"""Fixes of the second review: damaged and cut inputs, and the diff of two runs, on real
traces (``tests/fixtures/traces``)."""

from __future__ import annotations

import gzip
import html
import re
import struct
import zipfile
import zlib
from pathlib import Path

import py7zr
import pytest
from corpus import FIXTURE_TRACES

from tlsite.cli import main
from tlsite.core import load
from tlsite.core.analysis.diff import diff_traces, failed_checks
from tlsite.core.analysis.interrupted import interrupted
from tlsite.core.analysis.status import statuses
from tlsite.core.render.diff_pages import render_summary
from tlsite.core.source import resolve_input

DTRACE = FIXTURE_TRACES / "dtrace_two_logs"
TORCH_26 = FIXTURE_TRACES / "torch-2.6"
TORCH_215 = FIXTURE_TRACES / "torch-2.15"


def _damaged_member_zip(tmp_path: Path, damaged: Path, whole: Path) -> Path:
    """A zip of two logs whose ``damaged`` member's data no longer matches its CRC (the
    data is intact: the damage is found only on the read that reaches the member's end)."""
    archive = tmp_path / "dtrace.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(whole, whole.name)
        zf.write(damaged, damaged.name)
    crc = struct.pack("<I", zipfile.ZipFile(archive).getinfo(damaged.name).CRC)
    data = archive.read_bytes()
    assert data.count(crc) == 2  # the local header's and the central directory's
    archive.write_bytes(data.replace(crc, struct.pack("<I", ~zlib.crc32(crc) & 0xFFFFFFFF)))
    return archive


def test_zip_with_one_damaged_member_of_one_process_still_joins_its_two_logs(
    tmp_path: Path,
) -> None:
    # both members are under 64 KiB: a read of the whole member meets the CRC check
    logs = sorted(DTRACE.glob("*.log"))
    for damaged in logs:
        whole = next(p for p in logs if p != damaged)
        archive = _damaged_member_zip(tmp_path, damaged, whole)
        with resolve_input(archive) as resolved:
            assert len(resolved.logs) == 1
            assert len(resolved.logs[0].parts) == 2
        trace = load(archive)
        assert trace.stats.findings["input_damaged"]


# -- the diff reads compile time and names frames as the report does ---------------------------
def _diff_site(tmp_path: Path, before: Path, after: Path, *more: str) -> tuple[int, Path]:
    out = tmp_path / "diff"
    args = ["diff", str(before), str(after), "-o", str(out), "--no-browser", "--bundle", "none"]
    return main([*args, "--quiet", *more]), out


def test_diff_compile_time_of_an_aoti_build_is_the_reports() -> None:
    # torch 2.6 times the AOTInductor build by its span only: the report's 10.51 s, not 0.03 s
    path = TORCH_26 / "aoti.log"
    trace = load(path)
    report_seconds = sum(t.total for t in trace.compile_times)
    assert report_seconds > 10
    diff = diff_traces(trace, load(path))
    assert diff.before.seconds == pytest.approx(report_seconds)
    assert diff.frames[0].seconds[0] == pytest.approx(report_seconds)
    summary = render_summary(diff)
    assert f"| Compile time | {report_seconds:.2f} s | ".replace(".", "\\.") in summary
    assert "| Cache (hit / miss / bypass) | no cache events | no cache events | same |" in summary


@pytest.mark.parametrize("version", ["torch-2.10", "torch-2.15"])
def test_diff_compile_time_counts_an_aoti_build_of_no_frame(version: str) -> None:
    # torch 2.10+ logs the AOTInductor build's metrics under no compile id: no frame holds it
    trace = load(FIXTURE_TRACES / version / "aoti.log")
    report_seconds = sum(t.total for t in trace.compile_times)
    assert report_seconds > 10
    diff = diff_traces(trace, load(FIXTURE_TRACES / version / "aoti.log"))
    assert diff.before.seconds == pytest.approx(report_seconds)


def test_diff_names_export_calls_torch_export_at_their_call_site() -> None:
    path = TORCH_215 / "export_dtrace.log"
    diff = diff_traces(load(path), load(path))
    labels = [f.label for f in diff.frames]
    assert labels and all(label.startswith("torch.export (export_dtrace.py:") for label in labels)
    assert len(set(labels)) == len(labels)  # each call at its own line
    assert "?" not in "".join(labels)


# -- a side that stops short makes the comparison incomplete, not better -----------------------
GRAPH_BREAKS = FIXTURE_TRACES / "graph_breaks" / "graph_breaks.log"


def _cut(tmp_path: Path, lines: int) -> Path:
    """The graph-breaks log as a killed run leaves it: its first ``lines`` lines."""
    cut = tmp_path / "killed.log"
    with GRAPH_BREAKS.open("rb") as whole:
        cut.write_bytes(b"".join(line for _, line in zip(range(lines), whole, strict=False)))
    return cut


def test_diff_against_a_killed_run_is_incomplete_not_better(tmp_path: Path, capsys) -> None:
    cut = _cut(tmp_path, 1000)  # the log ends inside [1/0]'s restarted attempt
    diff = diff_traces(load(GRAPH_BREAKS), load(cut))
    assert diff.verdict == "incomplete"
    (where,) = diff.incomplete
    assert where.startswith("AFTER breaks off") and "line 1,000 of killed.log" in where
    assert "[1/0]" in where
    assert diff.improvements == []  # no "graph break fixed", "-58%", "no longer compiled"
    summary = render_summary(diff)
    assert "The comparison is incomplete" in summary
    assert "### Only before (2)" in summary and "### Fixed" not in summary
    assert "| [2 only before, 0 new, 1 unchanged](#graph-breaks) |" in summary
    swapped = diff_traces(load(cut), load(GRAPH_BREAKS))
    assert swapped.verdict == "incomplete" and swapped.regressions == []
    assert swapped.incomplete[0].startswith("BEFORE breaks off")
    code, _ = _diff_site(tmp_path, GRAPH_BREAKS, cut, "--fail-on", "graph-breaks,failures")
    err = capsys.readouterr().err
    assert code == 4
    assert (
        "--fail-on graph-breaks,failures: cannot tell, the comparison is incomplete: AFTER" in err
    )


def test_diff_against_a_cut_gzip_is_incomplete_at_its_line(tmp_path: Path) -> None:
    packed = gzip.compress(GRAPH_BREAKS.read_bytes())
    cut = tmp_path / "graph_breaks.log.gz"
    cut.write_bytes(packed[: len(packed) // 2])  # a download cut half way
    after = load(cut)
    (line,) = after.stats.lines_by_reason["input_cut"]
    diff = diff_traces(load(GRAPH_BREAKS), after)
    assert diff.verdict == "incomplete" and diff.improvements == []
    assert diff.incomplete == [
        f"AFTER breaks off (the input breaks off at line {line:,} of graph_breaks.log.gz)"
    ]
    assert failed_checks(diff, {"graph-breaks": 0.0})
    assert not failed_checks(diff_traces(load(GRAPH_BREAKS), load(GRAPH_BREAKS)), {"failures": 0})


# -- a damaged input is said as such, not as a process that died -------------------------------
def _damaged_7z(tmp_path: Path, where: float) -> Path:
    """The graph-breaks log in a .7z with one byte of its compressed data changed ``where``
    through: the decoder stops there, or yields garbage for a while first."""
    archive = tmp_path / "graph_breaks.7z"
    with py7zr.SevenZipFile(archive, "w") as sz:
        sz.write(GRAPH_BREAKS, GRAPH_BREAKS.name)
    data = bytearray(archive.read_bytes())
    data[int(len(data) * where)] ^= 0x10
    archive.write_bytes(bytes(data))
    return archive


def _text(page: Path) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page.read_text())))


@pytest.mark.parametrize("where", [0.5, 0.7])
def test_damaged_7z_is_said_as_a_break_of_the_input_not_a_death(
    tmp_path: Path, where: float
) -> None:
    archive = _damaged_7z(tmp_path, where)
    trace = load(archive)
    stats = trace.stats
    # the decoder may yield garbage lines for a while before it stops (where depends on the bytes)
    assert stats.break_line and stats.garbage_from and stats.garbage_from <= stats.break_line
    cuts = interrupted(trace, statuses(trace))
    assert cuts and all(c.unit.first_line < stats.garbage_from for c in cuts)
    out = tmp_path / "site"
    args = ["build", str(archive), "-o", str(out), "--no-browser", "--bundle", "none", "--quiet"]
    assert main(args) == 0
    overview = _text(out / "index.html")
    said = f"the input breaks off at line {stats.break_line:,} of graph_breaks.7z:graph_breaks.log"
    assert re.search(rf"(lines? skipped ,|nothing skipped,) {re.escape(said)}", overview)
    (line,) = [s for s in overview.split("Interrupted: the log ends inside")[1:2]]
    assert said in line and "this does not show that the process died" in line
    assert "most likely died" not in overview and "before the last record" not in overview

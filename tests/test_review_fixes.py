"""Fixes of the second review: damaged and cut inputs, and the diff of two runs, on real
traces (``tests/fixtures/traces``)."""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES

from tlsite.cli import main
from tlsite.core import load
from tlsite.core.analysis.diff import diff_traces
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


def test_diff_names_export_calls_torch_export_at_their_call_site() -> None:
    path = TORCH_215 / "export_dtrace.log"
    diff = diff_traces(load(path), load(path))
    labels = [f.label for f in diff.frames]
    assert labels and all(label.startswith("torch.export (export_dtrace.py:") for label in labels)
    assert len(set(labels)) == len(labels)  # each call at its own line
    assert "?" not in "".join(labels)

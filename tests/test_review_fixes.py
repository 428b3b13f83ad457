"""Fixes of the second review: damaged and cut inputs, and the diff of two runs, on real
traces (``tests/fixtures/traces``)."""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

from corpus import FIXTURE_TRACES

from tlsite.core import load
from tlsite.core.source import resolve_input

DTRACE = FIXTURE_TRACES / "dtrace_two_logs"


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

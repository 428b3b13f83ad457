"""The record reader's shortcuts read what reading each line plainly reads.

The reader counts a payload's lines from its joined bytes, keeps the glog prefix as text until
a page needs its numbers, and hands out one compile-id object per compile. Each record of real
traces (every fixture torch version, the zip storm, the shared corpus) and of damaged shapes
(CRLF ends, blank and undecodable payload lines, a cut last line) is compared here with a plain
line-by-line reading written for this test, field by field, with the line accounting.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from corpus import FIXTURE_TRACES, torch_213_traces

from tlsite.core import load
from tlsite.core.compile_id import CompileId
from tlsite.core.records import HEADER, Record, RecordReader
from tlsite.core.stats import ParseStats

REAL = sorted(FIXTURE_TRACES.glob("**/*.log")) + torch_213_traces()


def plain_records(data: bytes) -> list[dict[str, Any]]:
    """Each record of a well-formed log, read one physical line at a time."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    found: list[dict[str, Any]] = []
    index = 0
    while index < len(lines):
        raw = lines[index].removesuffix(b"\r")
        index += 1
        if not raw:
            continue
        text = raw.decode("utf-8")
        match = HEADER.search(text)
        assert match is not None, text
        envelope = json.loads(text[match.start("json") :])
        record = {
            "line": index,
            "level": match["level"],
            "month": int(match["month"]),
            "day": int(match["day"]),
            "time": f"{match['hour']}:{match['minute']}:{match['second']}.{match['micro']}",
            "thread": int(match["thread"]),
            "pathname": match["pathname"].strip(),
            "lineno": int(match["lineno"]),
            "compile_id": CompileId.from_envelope(envelope),
        }
        if "has_payload" in envelope:
            parts: list[bytes] = []
            while index < len(lines) and (
                lines[index].startswith(b"\t") or lines[index] in (b"", b"\r")
            ):
                if lines[index].startswith(b"\t"):
                    parts.append(lines[index].removesuffix(b"\r")[1:])
                index += 1
            payload = b"\n".join(parts)
            record["payload"] = payload
            record["payload_lines"] = len(parts)
            record["md5_ok"] = hashlib.md5(payload).hexdigest() == envelope["has_payload"]
        if envelope.get("str") is None:
            found.append(record)
    return found


def read_records(data: bytes, chunk: int = 1 << 20) -> tuple[list[Record], ParseStats]:
    stats = ParseStats(source="t.log")
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    return list(RecordReader(pieces, stats)), stats


def as_plain(record: Record) -> dict[str, Any]:
    header = record.header
    plain: dict[str, Any] = {
        "line": record.line,
        "level": header.level,
        "month": header.month,
        "day": header.day,
        "time": header.time,
        "thread": header.thread,
        "pathname": header.pathname,
        "lineno": header.lineno,
        "compile_id": record.compile_id,
    }
    if record.payload_bytes is not None:
        plain["payload"] = record.payload_bytes
        plain["payload_lines"] = record.payload_lines
        plain["md5_ok"] = record.md5_ok
    return plain


@pytest.mark.parametrize("log", REAL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_record_of_real_traces_reads_as_line_by_line(log: Path) -> None:
    data = log.read_bytes()
    records, stats = read_records(data)
    assert [as_plain(r) for r in records] == plain_records(data)
    assert stats.total_lines == data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    assert stats.accounted_lines == stats.total_lines


def _damaged(log: Path) -> bytes:
    """A real trace with CRLF line ends in one payload, blank lines inside another, and the
    last line cut (no newline)."""
    lines = log.read_bytes().split(b"\n")
    payloads = [i for i, line in enumerate(lines) if line.startswith(b"\t")]
    crlf, blank = payloads[3], payloads[len(payloads) // 2]
    lines[crlf] += b"\r"
    lines[blank] += b"\n\n"
    return b"\n".join(lines).rstrip(b"\n")


def test_payloads_with_crlf_blank_lines_and_a_cut_end_read_as_line_by_line() -> None:
    data = _damaged(FIXTURE_TRACES / "torch-2.15" / "graph_breaks.log")
    for chunk in (7, 4096, 1 << 20):  # records split across the reader's buffer fills
        records, stats = read_records(data, chunk)
        assert [as_plain(r) for r in records] == plain_records(data)
        assert stats.outcomes["blank"] == 2
        assert stats.accounted_lines == stats.total_lines == data.count(b"\n") + 1


def test_a_blank_line_inside_a_payload_keeps_the_numbers_of_undecodable_lines(
    tmp_path: Path,
) -> None:
    """A payload line that is not UTF-8 is skipped and named by its own line number, counted
    past the blank lines and payload lines before it."""
    header = "V1122 05:18:11.989000 1 a.py:1] "
    body = b"\tA\n\t\xff\n\n\n\tB\n\t\xfe\n"  # lines 2-7 (4 and 5 blank)
    digest = hashlib.md5(b"A\nB").hexdigest()
    data = (header + json.dumps({"artifact": {"name": "x"}, "has_payload": digest})).encode()
    data += b"\n" + body + (header + '{"artifact": {"name": "y"}}\n').encode()
    log = tmp_path / "t.log"
    log.write_bytes(data)
    records, stats = read_records(data)
    assert stats.lines_by_reason["not_utf8"] == [3, 7]
    assert records[0].payload_lines == 2
    assert records[0].md5_ok
    assert records[1].line == 8
    assert stats.accounted_lines == stats.total_lines == 8
    assert load(log).stats.lines_by_reason["not_utf8"] == [3, 7]


def test_records_of_one_compile_share_one_compile_id() -> None:
    data = (FIXTURE_TRACES / "torch-2.15" / "recompiles.log").read_bytes()
    records, _ = read_records(data)
    ids: dict[CompileId, CompileId] = {}
    for record in records:
        if record.compile_id is not None:
            assert ids.setdefault(record.compile_id, record.compile_id) is record.compile_id
    assert len(ids) > 3


def test_an_id_written_as_true_or_a_float_is_no_compile_id_even_after_the_number() -> None:
    """``true`` and ``1.0`` equal ``1`` as dictionary keys; the shared ids must not make the
    record's id ``[1/0]``: it is noted as a bad compile id, as when it comes first."""
    header = "V1122 05:18:11.989000 1 a.py:1] "
    lines = [
        {"dynamo_start": {}, "frame_id": 1, "frame_compile_id": 0, "attempt": 0},
        {"dynamo_start": {}, "frame_id": True, "frame_compile_id": 0, "attempt": 0},
        {"dynamo_start": {}, "frame_id": 1.0, "frame_compile_id": 0, "attempt": 0},
        {"dynamo_start": {}, "frame_id": 1, "frame_compile_id": 0, "attempt": 0},
    ]
    data = "".join(header + json.dumps(line) + "\n" for line in lines).encode()
    records, stats = read_records(data)
    assert [r.compile_id is None for r in records] == [False, True, True, False]
    assert records[0].compile_id is records[3].compile_id
    assert stats.lines_by_reason["bad_compile_id"] == [2, 3]

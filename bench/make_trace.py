"""Make big, deterministic TORCH_TRACE logs from real ones, for benchmarks.

Two shapes:

* ``--size 128MB``: the records of a base trace (default: the torch 2.13 training trace of the
  shared corpus) repeated until the output reaches the size. Copy ``k`` shifts every
  ``frame_id`` by ``k * (largest frame_id + 1)`` so compile ids stay unique, and gives each
  payload a copy marker (a trailing ``# synthetic copy k`` line for text, an extra
  ``"synthetic_copy"`` key for JSON objects) with its ``has_payload`` MD5 recomputed, so
  payloads are distinct like in a real long run rather than deduplicated copies.
* ``--storm N``: a recompile storm. One compile of the base (a recompile with a
  ``compilation_metrics`` record; default base: the ``recompiles`` test fixture, ~65 KB per
  compile) is replayed ``N`` times as ``frame_id`` 0, ``frame_compile_id`` 0..N-1, with the
  id-less records logged during it.

Every event type of the base is kept. ``str`` (string-table) records are written once, in the
first copy, with their ids unchanged, so every id is defined before any stack uses it.
Output is streamed record by record; neither the base nor the result is held in memory.

    python bench/make_trace.py --size 128MB -o /tmp/big.log
    python bench/make_trace.py --storm 5000 -o /tmp/storm.log
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CORPUS = PROJECT_ROOT.parent / "shared" / "corpus"
DEFAULT_BASE_GLOB = "torch-2.13/training/*.log"
#: A small function recompiled several times (torch 2.13): ~65 KB per compile.
DEFAULT_STORM_BASE = (
    PROJECT_ROOT / "tests" / "fixtures" / "traces" / "recompiles" / "recompiles.log"
)

_SIZE = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|k|mb|mib|m|gb|gib|g)?\s*$")
_UNITS = {
    None: 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
}
_ID_KEYS = ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt")
_CONTEXT_KEYS = frozenset({*_ID_KEYS, "rank", "has_payload", "stack", "subgraph_name"})


def parse_size(text: str) -> int:
    """``"128MB"`` → 128,000,000 bytes; ``"1GiB"`` → 2**30; a plain number is bytes."""
    match = _SIZE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 128MB or 1GiB)")
    unit = match[2].lower() if match[2] else None
    return int(float(match[1]) * _UNITS[unit])


@dataclass
class Record:
    """One record of the base: header prefix, envelope, payload text (or a raw junk line)."""

    prefix: bytes  # "V1122 04:22:34.896000 14280 torch/_dynamo/utils.py:2350] "
    envelope: dict[str, Any] | None  # None for lines that are not records (kept verbatim)
    payload: str | None
    raw: bytes  # the header line as read (written unchanged when nothing changes)

    @property
    def event_type(self) -> str:
        if self.envelope is None:
            return ""
        return next((k for k in self.envelope if k not in _CONTEXT_KEYS), "")


def read_records(path: Path) -> Iterator[Record]:
    """Stream the records of a trace (header + TAB payload lines), one at a time."""
    current: Record | None = None
    parts: list[bytes] = []

    def finish() -> Record | None:
        if current is None:
            return None
        if current.envelope is not None and "has_payload" in current.envelope:
            current.payload = b"\n".join(parts).decode("utf-8", "replace")
        return current

    with open(path, "rb") as stream:
        for raw in stream:
            line = raw.rstrip(b"\r\n")
            if line.startswith(b"\t") and current is not None and current.envelope is not None:
                parts.append(line[1:])
                continue
            done = finish()
            if done is not None:
                yield done
            parts = []
            head, sep, body = line.partition(b"] ")
            envelope = None
            if sep and body.startswith(b"{"):
                try:
                    envelope = json.loads(body)
                except ValueError:
                    envelope = None
            prefix = head + sep if envelope is not None else b""
            current = Record(prefix, envelope if isinstance(envelope, dict) else None, None, raw)
    done = finish()
    if done is not None:
        yield done


def mark_payload(payload: str, copy: int) -> str:
    """Make a payload distinct per copy while keeping its kind (JSON stays valid JSON)."""
    stripped = payload.lstrip()
    if stripped.startswith("{"):
        start = payload.index("{") + 1
        marked = payload[:start] + f'"synthetic_copy": {copy},' + payload[start:]
        try:
            json.loads(marked)
            return marked
        except ValueError:
            pass
    if stripped.startswith(("[", "{")):
        try:
            json.loads(payload)
            return payload  # a JSON list (or odd object) is left as it is
        except ValueError:
            pass
    return f"{payload}\n# synthetic copy {copy}"


def encode(record: Record, envelope: dict[str, Any], payload: str | None) -> bytes:
    """The record's lines as PyTorch writes them."""
    if payload is not None:
        envelope["has_payload"] = hashlib.md5(payload.encode("utf-8")).hexdigest()
    out = record.prefix + json.dumps(envelope).encode("utf-8") + b"\n"  # as torch writes it
    if payload is not None:
        out += b"".join(b"\t" + line.encode("utf-8") + b"\n" for line in payload.split("\n"))
    return out


def largest_frame_id(path: Path) -> int:
    largest = -1
    for record in read_records(path):
        if record.envelope is not None:
            frame_id = record.envelope.get("frame_id")
            if type(frame_id) is int:
                largest = max(largest, frame_id)
    return largest


def _raw(record: Record) -> bytes:
    return record.raw if record.raw.endswith(b"\n") else record.raw + b"\n"


def copy_record(record: Record, copy: int, frame_shift: int) -> bytes:
    """Record ``record`` as it appears in copy ``copy`` (b"" for a str record after copy 0)."""
    if record.envelope is None:
        return _raw(record)
    if record.event_type == "str":
        return _raw(record) if copy == 0 else b""
    envelope = dict(record.envelope)
    frame_id = envelope.get("frame_id")
    if type(frame_id) is int:
        envelope["frame_id"] = frame_id + frame_shift
    payload = record.payload
    if payload is not None and copy > 0:
        payload = mark_payload(payload, copy)
    if copy == 0 and payload is None:
        return _raw(record)
    return encode(record, envelope, payload)


def write_size(base: Path, size: int, dest: BinaryIO) -> tuple[int, int, int]:
    """Repeat ``base`` until ``size`` bytes are written; returns (bytes, records, copies)."""
    stride = largest_frame_id(base) + 1
    written = records = copy = 0
    while written < size:
        produced = False
        for record in read_records(base):
            chunk = copy_record(record, copy, copy * stride)
            if not chunk:
                continue
            dest.write(chunk)
            written += len(chunk)
            records += record.envelope is not None
            produced = True
            if written >= size:
                break
        if not produced:
            raise SystemExit(f"{base}: no records to copy")
        copy += 1
    return written, records, copy


GroupKey = tuple[Any, Any, Any]


def _group_key(env: dict[str, Any]) -> GroupKey:
    return env.get("compiled_autograd_id"), env.get("frame_id"), env.get("frame_compile_id")


def storm_span(base: Path) -> tuple[GroupKey, int, int]:
    """The compile to replay, and the index span of its records.

    A recompile (``frame_compile_id`` ≥ 1, so it carries recompile reasons) with a
    compilation_metrics record is preferred; otherwise the first compile with metrics.
    """
    spans: dict[GroupKey, list[int]] = {}
    with_metrics: list[GroupKey] = []
    for index, record in enumerate(read_records(base)):
        env = record.envelope
        if env is None or record.event_type == "str" or all(env.get(k) is None for k in _ID_KEYS):
            continue
        key = _group_key(env)
        spans.setdefault(key, [index, index])[1] = index
        if record.event_type == "compilation_metrics" and key not in with_metrics:
            with_metrics.append(key)
    if not with_metrics:
        raise SystemExit(f"{base}: no compilation_metrics record to build a storm from")
    recompiles = [k for k in with_metrics if isinstance(k[2], int) and k[2] >= 1]
    group = (recompiles or with_metrics)[0]
    first, last = spans[group]
    return group, first, last


def write_storm(base: Path, count: int, dest: BinaryIO) -> tuple[int, int, int]:
    """Replay one compile ``count`` times as frame 0, frame_compile_id 0..count-1.

    The compile's own records are replayed with the id-less records logged between its first
    and last record; records of other compiles in that span are left out.
    """
    group, first, last = storm_span(base)
    written = records = 0
    for compile_index in range(count):
        for index, record in enumerate(read_records(base)):
            env = record.envelope
            if env is None:
                continue
            if record.event_type == "str":
                chunk = copy_record(record, compile_index, 0)
            elif not first <= index <= last:
                continue
            elif _group_key(env) == group:
                envelope = dict(env)
                envelope["frame_id"] = 0
                envelope["frame_compile_id"] = compile_index
                payload = record.payload
                if payload is not None and compile_index > 0:
                    payload = mark_payload(payload, compile_index)
                chunk = encode(record, envelope, payload)
            elif all(env.get(k) is None for k in _ID_KEYS):
                chunk = copy_record(record, compile_index, 0)
            else:
                continue
            if chunk:
                dest.write(chunk)
                written += len(chunk)
                records += 1
    return written, records, count


def default_base() -> Path:
    found = sorted((CORPUS).glob(DEFAULT_BASE_GLOB))
    if not found:
        raise SystemExit(f"no base trace: {CORPUS / DEFAULT_BASE_GLOB} matches nothing")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shape = parser.add_mutually_exclusive_group(required=True)
    shape.add_argument("--size", type=parse_size, help="target size, e.g. 128MB, 1GiB")
    shape.add_argument("--storm", type=int, metavar="N", help="one frame recompiled N times")
    parser.add_argument("-o", "--output", type=Path, required=True, help="trace file to write")
    parser.add_argument(
        "--base",
        type=Path,
        help=f"base trace (default: corpus {DEFAULT_BASE_GLOB}; for --storm the recompiles "
        "fixture tests/fixtures/traces/recompiles/recompiles.log when present)",
    )
    args = parser.parse_args(argv)
    base = args.base
    if base is None:
        storm_base = args.storm is not None and DEFAULT_STORM_BASE.is_file()
        base = DEFAULT_STORM_BASE if storm_base else default_base()
    if args.storm is not None and args.storm < 1:
        parser.error("--storm needs a positive count")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "wb") as dest:
        if args.size is not None:
            written, records, copies = write_size(base, args.size, dest)
            what = f"{copies} copies"
        else:
            written, records, copies = write_storm(base, args.storm, dest)
            what = f"{copies} recompiles"
    print(
        f"{args.output}: {written:,} bytes, {records:,} records ({what} of {base.name})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

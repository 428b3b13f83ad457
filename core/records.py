"""Split a trace log into records: glog header, one-line JSON envelope, TAB payload lines.

This is a pure iterator: it yields :class:`Record` objects and accounts every physical line in
a :class:`~tlsite.core.stats.ParseStats`. It knows nothing about event semantics.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .compile_id import CompileId
from .frames import InternTable
from .stats import ParseStats

# tlparse's header pattern, searched (not anchored) so prefixes like "[rank0]:" are accepted.
HEADER = re.compile(
    r"(?P<level>[VIWEC])(?P<month>\d{2})(?P<day>\d{2}) "
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2}).(?P<micro>\d{6}) "
    r"(?P<thread>\d+)(?P<pathname>[^:]+):(?P<lineno>\d+)\] (?P<json>.)"
)

#: Envelope keys that give context rather than naming the event type.
CONTEXT_KEYS = frozenset(
    {
        "rank",
        "compiled_autograd_id",
        "frame_id",
        "frame_compile_id",
        "attempt",
        "has_payload",
        "stack",
        "subgraph_name",
    }
)
_HEX32 = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True, slots=True)
class Header:
    """The glog prefix of a record line."""

    level: str
    month: int
    day: int
    time: str  # "HH:MM:SS.uuuuuu"
    thread: int
    pathname: str
    lineno: int


@dataclass(slots=True)
class Record:
    """One envelope with its payload, as read from the log."""

    line: int
    header: Header
    envelope: dict[str, Any]
    event_type: str
    compile_id: CompileId | None
    payload: str | None = None
    payload_md5: str | None = None
    payload_lines: int = 0
    md5_ok: bool = True
    other_rank: bool = False  # skipped by the rank filter; kept only for raw.jsonl
    json_text: str = ""  # the envelope as logged (raw.jsonl reuses it without re-encoding)

    @property
    def metadata(self) -> Any:
        return self.envelope.get(self.event_type) if self.event_type else None

    @property
    def payload_key(self) -> str | None:
        """The MD5 that names this payload: the declared one when it is well-formed."""
        declared = self.envelope.get("has_payload")
        if isinstance(declared, str) and _HEX32.fullmatch(declared):
            return declared
        return self.payload_md5


def event_type_of(envelope: dict[str, Any]) -> str:
    """The first key that is not a context key names the event ("" when there is none)."""
    for key in envelope:
        if key not in CONTEXT_KEYS:
            return key
    return ""


def _strip_eol(raw: bytes) -> bytes:
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw


def _join_payload(parts: list[bytes]) -> bytes:
    """Join raw payload lines (each ``\\t<text>\\n``) into the payload text's bytes."""
    data = b"".join(parts)
    if b"\r" in data:  # CRLF (or stray CR) line ends: take the careful path
        return b"\n".join(_strip_eol(p)[1:] for p in parts)
    data = data[1:].replace(b"\n\t", b"\n")
    return data[:-1] if data.endswith(b"\n") else data


def _payload_linenos(header: int, count: int, blank_lines: list[int]) -> list[int]:
    """The physical line numbers of ``count`` payload lines after ``header``, skipping blanks."""
    blanks = set(blank_lines)
    numbers: list[int] = []
    candidate = header
    while len(numbers) < count:
        candidate += 1
        if candidate not in blanks:
            numbers.append(candidate)
    return numbers


class RecordReader:
    """Iterate the records of one log, keeping the intern table and parse stats up to date."""

    def __init__(self, lines: Iterable[bytes], stats: ParseStats) -> None:
        self._lines = lines
        self.stats = stats
        self.strings = InternTable()
        self.expected_rank: int | None = None

    def __iter__(self) -> Iterator[Record]:
        stats = self.stats
        numbered = enumerate(self._lines, 1)
        pending: tuple[int, bytes] | None = None
        lineno = 0
        while True:
            if pending is not None:
                lineno, raw = pending
                pending = None
            else:
                item = next(numbered, None)
                if item is None:
                    break
                lineno, raw = item
                stats.total_lines = lineno
            raw = _strip_eol(raw)
            if not raw:
                stats.read("blank")
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                stats.skip("not_utf8", lineno, f"byte {exc.start}: {raw[:60]!r}")
                continue
            match = HEADER.search(text)
            if match is None:
                reason = "orphan_payload" if text.startswith("\t") else "bad_header"
                stats.skip(reason, lineno, text)
                continue
            json_text = text[match.start("json") :]
            try:
                envelope = json.loads(json_text)
            except ValueError as exc:
                stats.skip("bad_json", lineno, f"{exc}: {json_text}")
                continue
            if not isinstance(envelope, dict):
                stats.skip("not_object", lineno, json_text)
                continue
            record = self._make_record(lineno, match, envelope)
            record.json_text = json_text
            if "has_payload" in envelope:
                pending = self._read_payload(record, numbered)
            if record.event_type == "str":
                if self.strings.define(envelope["str"]):
                    stats.read("interned")
                else:
                    stats.skip("bad_str", lineno, json_text)
                stats.read("payload", record.payload_lines)
                continue
            if self._is_other_rank(envelope):
                stats.skip("other_rank", lineno, f"rank {envelope.get('rank')!r}")
                if record.payload_lines:
                    first = lineno + 1
                    stats.skip("other_rank", first, "its payload lines", count=record.payload_lines)
                record.other_rank = True
                yield record
                continue
            stats.read("record")
            stats.read("payload", record.payload_lines)
            yield record

    def _make_record(self, lineno: int, match: re.Match[str], envelope: dict) -> Record:
        header = Header(
            level=match["level"],
            month=int(match["month"]),
            day=int(match["day"]),
            time=f"{match['hour']}:{match['minute']}:{match['second']}.{match['micro']}",
            thread=int(match["thread"]),
            pathname=match["pathname"].strip(),
            lineno=int(match["lineno"]),
        )
        compile_id = CompileId.from_envelope(envelope)
        if compile_id is None:
            self.stats.find(
                "bad_compile_id",
                lineno,
                repr(
                    {
                        k: envelope.get(k)
                        for k in ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt")
                    }
                ),
            )
        return Record(
            line=lineno,
            header=header,
            envelope=envelope,
            event_type=event_type_of(envelope),
            compile_id=compile_id,
        )

    def _read_payload(
        self, record: Record, numbered: Iterator[tuple[int, bytes]]
    ) -> tuple[int, bytes] | None:
        """Consume the TAB lines after a header; return the first line that is not one.

        This loop runs once per payload line, most of a trace, so it does as little as it
        can per line: the tab prefixes and line ends are removed in one pass over the joined
        bytes afterwards.
        """
        parts: list[bytes] = []
        append = parts.append
        blank_lines: list[int] = []
        pending = None
        lineno = record.line
        for lineno, raw in numbered:
            if raw.startswith(b"\t"):
                append(raw)
            elif raw == b"\n" or raw == b"\r\n" or not raw:
                blank_lines.append(lineno)  # blank lines are dropped wherever they are
            else:
                pending = (lineno, raw)
                break
        self.stats.total_lines = max(self.stats.total_lines, lineno)
        self.stats.read("blank", len(blank_lines))
        data = _join_payload(parts)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            linenos = _payload_linenos(record.line, len(parts), blank_lines)
            text, dropped = self._drop_undecodable([_strip_eol(p)[1:] for p in parts], linenos)
            data = text.encode("utf-8")
            record.payload_lines = len(parts) - dropped
        else:
            record.payload_lines = len(parts)
        digest = hashlib.md5(data).hexdigest()
        record.payload = text
        record.payload_md5 = digest
        declared = record.envelope.get("has_payload")
        if declared != digest:
            record.md5_ok = False
            self.stats.find("md5_mismatch", record.line, f"declared {declared!r}, got {digest}")
        return pending

    def _drop_undecodable(self, parts: list[bytes], linenos: list[int]) -> tuple[str, int]:
        """Skip payload lines that are not UTF-8 (as tlparse does), counting each one."""
        kept: list[str] = []
        dropped = 0
        for lineno, part in zip(linenos, parts, strict=False):
            try:
                kept.append(part.decode("utf-8"))
            except UnicodeDecodeError:
                dropped += 1
                self.stats.skip("not_utf8", lineno, f"payload line {part[:60]!r}")
        return "\n".join(kept), dropped

    def _is_other_rank(self, envelope: dict[str, Any]) -> bool:
        """tlparse's rank filter: the first rank seen wins; later records must match it."""
        rank = envelope.get("rank")
        if self.expected_rank is None:
            if type(rank) is int:
                self.expected_rank = rank
                self.stats.detected_rank = rank
            return False
        return rank != self.expected_rank

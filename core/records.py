"""Split a trace log into records: glog header, one-line JSON envelope, TAB payload lines.

This is a pure iterator: it yields :class:`Record` objects and accounts every physical line in
a :class:`~tlsite.core.stats.ParseStats`. It knows nothing about event semantics.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from .compile_id import FIELDS, CompileId
from .frames import InternTable
from .stats import ParseStats, shorten_line

# tlparse's header pattern, searched (not anchored) so prefixes like "[rank0]:" are accepted.
# The thread id and path are one atomic group: the path ends at the first colon whatever digits
# the thread takes, so trying other splits could never match and only made a long run of digits
# cost quadratic time.
HEADER = re.compile(
    r"(?P<level>[VIWEC])(?P<month>\d{2})(?P<day>\d{2}) "
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2}).(?P<micro>\d{6}) "
    r"(?>(?P<thread>\d+)(?P<pathname>[^:]+)):(?P<lineno>\d+)\] (?P<json>.)"
)
#: Longest header (with its prefix) searched for: a header that ends further into its line is
#: not one. Searching a bounded window keeps a line that only looks like headers (say, many
#: ``V0101 00:00:00.000000 1`` and no colon) from costing time quadratic in its length; it is
#: longer than any real path (PATH_MAX is 4096).
HEADER_WINDOW = 8192

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

#: Deepest JSON nesting read from a trace (serde_json's default limit, so tlparse reads no
#: deeper). Deeper values make Python's recursive JSON code overflow its stack later, when a
#: page or an output file prints them, so they are refused where they are read.
MAX_JSON_DEPTH = 128
#: Largest compile-id field accepted; larger ones name absurd folders (a 4,000-digit frame id
#: is a file name no file system takes). Such a record is listed under "unknown".
MAX_COMPILE_ID = 2**63 - 1
#: Largest ``str`` id accepted: raw.jsonl's string table is a list indexed by id, so one huge
#: id would make it that long. Real traces number their file names from 0.
MAX_STRING_ID = 1 << 20
#: Compile ids the reader keeps to hand out again at most (see ``RecordReader._compile_id``).
MAX_KNOWN_IDS = 4096
#: The types of the values of a compile id's keys (``compile_id.FIELDS``) an id may have.
_ID_TYPES = frozenset({int, type(None)})
#: Longest thread id or line number in a glog header (a u64 has 20 digits).
_MAX_HEADER_DIGITS = 20


class JSONTooDeep(ValueError):
    """A JSON value nested deeper than :data:`MAX_JSON_DEPTH`."""


def json_depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a decoded JSON value nests lists/objects more than ``limit`` deep (no recursion)."""
    level = [value]
    depth = 0
    while level:
        level = [v for v in level if isinstance(v, (dict, list))]
        if not level:
            return False
        depth += 1
        if depth > limit:
            return True
        following: list[Any] = []
        for container in level:
            following.extend(container.values() if isinstance(container, dict) else container)
        level = following
    return False


def loads_bounded(text: str) -> Any:
    """``json.loads`` that raises :class:`JSONTooDeep` (a ValueError) instead of recursing.

    Text with few brackets cannot nest deeply, so only bracket-heavy text is walked.
    """
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise JSONTooDeep(f"nested more than {MAX_JSON_DEPTH} levels deep") from exc
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and json_depth_exceeds(value):
        raise JSONTooDeep(f"nested more than {MAX_JSON_DEPTH} levels deep")
    if _SURROGATE_ESCAPE.search(text):
        value = _without_lone_surrogates(value)
    return value


def is_finite_number(value: object) -> bool:
    """A JSON number a page can compute with: not a bool, infinity (``1e400``) or NaN."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_whole_number(value: object) -> bool:
    """A JSON integer (``true`` is an ``int`` to Python, not to JSON)."""
    return isinstance(value, int) and not isinstance(value, bool)


def dumps_finite(value: Any, **options: Any) -> str:
    """``json.dumps`` that writes JSON: infinities and NaN (which ``json.loads`` reads from
    ``1e400`` and ``NaN``) become ``null``."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False, **options)


def finite_json(value: Any) -> Any:
    """A decoded JSON value as :func:`dumps_finite` would write it: infinities and NaN (which
    ``json.loads`` reads from ``1e400`` and ``NaN``) become None; the value itself when it
    holds none."""
    values = [value]
    while values:
        item = values.pop()
        if type(item) is float and not math.isfinite(item):
            return _finite(value)
        if type(item) is dict:
            values.extend(item.values())
        elif type(item) is list:
            values.extend(item)
    return value


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


#: A JSON escape of a UTF-16 surrogate: unpaired, it decodes to a string UTF-8 cannot encode.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _fix_text(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD, so
    every page and file can be written as UTF-8 (pairs were joined by the decoder)."""
    if isinstance(value, str):
        return _fix_text(value)
    if not isinstance(value, (dict, list)):
        return value
    root = [value]
    todo: list[Any] = [root]
    while todo:
        container = todo.pop()
        if isinstance(container, dict):
            items = list(container.items())
            container.clear()
            for key, item in items:
                container[_fix_text(key) if isinstance(key, str) else key] = item
        for key, item in container.items() if isinstance(container, dict) else enumerate(container):
            if isinstance(item, str):
                container[key] = _fix_text(item)
            elif isinstance(item, (dict, list)):
                todo.append(item)
    return root[0]


def valid_string_id(value: Any) -> bool:
    """A ``str`` record's value ``[text, id]`` with an id the string table can hold."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and type(value[1]) is int
        and 0 <= value[1] <= MAX_STRING_ID
    )


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
    #: the glog prefix's fields as logged (level, month, day, hour, minute, second,
    #: microsecond, thread, path, line): most records never need them as a :class:`Header`
    head: tuple[str, ...]
    envelope: dict[str, Any]
    event_type: str
    compile_id: CompileId | None
    payload_bytes: bytes | None = None
    payload_md5: str | None = None
    payload_lines: int = 0
    md5_ok: bool = True
    other_rank: bool = False  # names another rank: skipped, kept only for raw.jsonl
    #: names no rank in a log whose rank is known: this rank's, though tlparse drops it
    unranked: bool = False
    json_text: str = ""  # the envelope as logged (raw.jsonl reuses it without re-encoding)

    @property
    def header(self) -> Header:
        """The glog prefix, its numbers read."""
        level, month, day, _, _, _, _, thread, pathname, lineno = self.head
        return Header(
            level, int(month), int(day), self.time, int(thread), pathname.strip(), int(lineno)
        )

    @property
    def time(self) -> str:
        """The glog time, ``HH:MM:SS.uuuuuu``."""
        return time_of(self.head)

    @property
    def payload(self) -> str | None:
        """The payload text (decoded on first use: most payloads only go to the store)."""
        if self.payload_bytes is None:
            return None
        return self.payload_bytes.decode("utf-8")

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


def time_of(head: tuple[str, ...]) -> str:
    """The glog time (``HH:MM:SS.uuuuuu``) of a record's :attr:`Record.head`."""
    return f"{head[3]}:{head[4]}:{head[5]}.{head[6]}"


def event_type_of(envelope: dict[str, Any]) -> str:
    """The first key that is not a context key names the event ("" when there is none)."""
    for key in envelope:
        if key not in CONTEXT_KEYS:
            return key
    return ""


CHUNK = 4 << 20
# The end of a run of payload lines: a newline not followed by the payload TAB.
_PAYLOAD_END = re.compile(rb"\n(?!\t)")


def _payload_lines(data: bytes) -> list[bytes]:
    """Split joined raw payload lines (``\\t<text>\\n`` each) into their texts."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line[:-1][1:] if line.endswith(b"\r") else line[1:] for line in lines]


def _join_payload(data: bytes) -> tuple[bytes, int]:
    """The payload's bytes from its raw lines joined together, and how many lines they were."""
    if b"\r" in data:  # CRLF (or stray CR) line ends: take the careful path
        lines = _payload_lines(data)
        return b"\n".join(lines), len(lines)
    joined = data.replace(b"\n\t", b"\n")  # the first line's tab stays: sliced off below
    # every line but the first starts after a newline: each replaced tab is one more line
    count = len(data) - len(joined) + 1 if data else 0
    return joined[1 : len(joined) - 1 if joined.endswith(b"\n") else len(joined)], count


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


def _chunks(source: Iterable[bytes] | BinaryIO) -> Iterator[bytes]:
    """Big chunks from a binary stream; any other iterable of bytes is taken as it comes."""
    read = getattr(source, "read", None)
    if read is None:
        yield from source  # type: ignore[misc]
        return
    while chunk := read(CHUNK):
        yield chunk


class RecordReader:
    """Iterate the records of one log, keeping the intern table and parse stats up to date.

    It works on a byte buffer rather than line by line: runs of payload lines (most of a
    trace) are found with one regular-expression search and joined with one replace.
    """

    def __init__(self, source: Iterable[bytes] | BinaryIO, stats: ParseStats) -> None:
        self._chunks = _chunks(source)
        self.stats = stats
        self.strings = InternTable()
        self.expected_rank: int | None = None
        self._buf = b""
        self._pos = 0
        self._eof = False
        self._lineno = 0  # number of physical lines consumed so far
        self._compile_ids: dict[tuple[Any, ...], CompileId] = {}

    # -- the buffer ----------------------------------------------------------------------------
    def _fill(self) -> bool:
        """Append more input (dropping what was consumed); False at the end of input.

        At least as many new bytes are appended as are left unconsumed, so the buffer at
        least doubles while one long line is gathered: copying it, and searching it again
        from its start, costs linear time in the line's length, not quadratic.
        """
        if self._eof:
            return False
        rest = self._buf[self._pos :]
        pieces = [rest]
        added = 0
        while added < max(len(rest), 1):
            chunk = next(self._chunks, None)
            if chunk is None:
                self._eof = True
                break
            pieces.append(chunk)
            added += len(chunk)
            if not chunk and added == 0 and not rest:
                break  # an empty chunk from an iterable: nothing to wait for
        if len(pieces) == 1:
            return not self._eof
        self._buf = b"".join(pieces)
        self._pos = 0
        return True

    def _next_line(self) -> bytes | None:
        """The next physical line without its newline, or None at the end of input."""
        while True:
            newline = self._buf.find(b"\n", self._pos)
            if newline >= 0:
                line = self._buf[self._pos : newline]
                self._pos = newline + 1
                self._lineno += 1
                return line
            if not self._fill():
                if self._pos < len(self._buf):
                    line = self._buf[self._pos :]
                    self._pos = len(self._buf)
                    self._lineno += 1
                    return line
                return None

    def _peek(self) -> bytes:
        """The next byte (b"" at the end of input)."""
        while self._pos >= len(self._buf):
            if not self._fill():
                return b""
        return self._buf[self._pos : self._pos + 1]

    def _take_payload_run(self) -> bytes:
        """Consume consecutive lines that start with a TAB and return them, raw (their number
        is counted once they are joined, see :func:`_join_payload`)."""
        while True:
            match = _PAYLOAD_END.search(self._buf, self._pos)
            if match is not None and match.end() < len(self._buf):
                end = match.end()
                break
            if match is not None and self._eof:
                end = match.end()
                break
            if not self._fill():
                end = len(self._buf) if match is None else match.end()
                break
        run = self._buf[self._pos : end]
        self._pos = end
        return run

    # -- records -------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Record]:
        stats = self.stats
        while True:
            raw = self._next_line()
            if raw is None:
                break
            lineno = self._lineno
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if not raw:
                stats.read("blank")
                continue
            if stats.first_line is None:
                stats.first_line = shorten_line(raw)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                stats.skip("not_utf8", lineno, f"byte {exc.start}: {raw[:60]!r}")
                continue
            match = HEADER.search(text, 0, HEADER_WINDOW)
            if match is None:
                reason = "orphan_payload" if text.startswith("\t") else "bad_header"
                stats.skip(reason, lineno, text)
                continue
            if max(len(match[8]), len(match[10])) > _MAX_HEADER_DIGITS:  # thread, line
                stats.skip("bad_header", lineno, f"thread id or line number too long: {text}")
                continue
            json_text = text[match.start(11) :]
            try:
                envelope = loads_bounded(json_text)
            except ValueError as exc:
                stats.skip("bad_json", lineno, f"{exc}: {json_text}")
                continue
            if not isinstance(envelope, dict):
                stats.skip("not_object", lineno, json_text)
                continue
            record = self._make_record(lineno, match, envelope)
            record.json_text = json_text
            raw = text = match = None  # type: ignore[assignment]  # a huge line: one copy, not 3
            if "has_payload" in envelope:
                self._read_payload(record)
            if record.event_type == "str":
                if valid_string_id(envelope["str"]) and self.strings.define(envelope["str"]):
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
            record.unranked = self.expected_rank is not None and envelope.get("rank") is None
            stats.read("record")
            stats.read("payload", record.payload_lines)
            yield record
        stats.total_lines = self._lineno

    def _make_record(self, lineno: int, match: re.Match[str], envelope: dict) -> Record:
        compile_id = self._compile_id(envelope)
        if compile_id is None:
            self.stats.find(
                "bad_compile_id",
                lineno,
                repr({k: envelope.get(k) for k in FIELDS}),
            )
        return Record(
            lineno,
            match.group(1, 2, 3, 4, 5, 6, 7, 8, 9, 10),  # every group before the JSON's
            envelope,
            event_type_of(envelope),
            compile_id,
        )

    def _compile_id(self, envelope: dict[str, Any]) -> CompileId | None:
        """The envelope's compile id: one object per distinct id (a log has a few, named by
        thousands of records), so the model keeps, hashes and compares one each."""
        key = tuple(map(envelope.get, FIELDS))
        # only plain whole numbers are looked up: True and 1.0 equal 1 as keys, but are not ids
        if set(map(type, key)) <= _ID_TYPES:
            known = self._compile_ids.get(key)
            if known is not None:
                return known
        compile_id = CompileId.from_envelope(envelope)
        if compile_id is None or any(
            v is not None and v > MAX_COMPILE_ID for v in compile_id.fields()
        ):
            return None
        if len(self._compile_ids) >= MAX_KNOWN_IDS:  # a hostile log may name millions
            self._compile_ids.clear()
        self._compile_ids[key] = compile_id
        return compile_id

    def _read_payload(self, record: Record) -> None:
        """Consume the TAB lines after a header (blank lines between them are dropped)."""
        runs: list[bytes] = []
        blank_lines: list[int] = []
        before = counted = 0  # payload lines before the last blank line, in runs[:counted]
        while True:
            head = self._buf[self._pos : self._pos + 1] or self._peek()
            if head == b"\t":
                runs.append(self._take_payload_run())
            elif head in (b"\n", b"\r") and self._blank_line_follows():
                self._next_line()
                # the payload lines are counted once joined: add those before the blank line
                # (each run once: a payload of lines each followed by a blank line has many)
                before += sum(run.count(b"\n") for run in runs[counted:])
                counted = len(runs)
                blank_lines.append(self._lineno + before)
            else:
                break
        self.stats.read("blank", len(blank_lines))
        data = b"".join(runs)
        payload, count = _join_payload(data)
        self._lineno += count
        if not payload.isascii():  # ASCII is valid UTF-8: only other payloads need a check
            try:
                payload.decode("utf-8")
            except UnicodeDecodeError:
                linenos = _payload_linenos(record.line, count, blank_lines)
                text, dropped = self._drop_undecodable(_payload_lines(data), linenos)
                payload = text.encode("utf-8")
                count -= dropped
        record.payload_lines = count
        digest = hashlib.md5(payload).hexdigest()
        record.payload_bytes = payload
        record.payload_md5 = digest
        declared = record.envelope.get("has_payload")
        if declared != digest:
            record.md5_ok = False
            self.stats.find("md5_mismatch", record.line, f"declared {declared!r}, got {digest}")

    def _blank_line_follows(self) -> bool:
        """True when the next line is empty (``\\n`` or ``\\r\\n``)."""
        if self._buf[self._pos : self._pos + 1] == b"\n":
            return True
        while len(self._buf) - self._pos < 2 and self._fill():
            pass
        return self._buf[self._pos : self._pos + 2] == b"\r\n"

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
        """The rank filter: the first rank seen wins; a later record naming another rank is
        skipped. A record that names no rank belongs to this log: torch logs some records
        (``torch_version``, the string table) without one even in a rank's own log, where
        tlparse drops them and so reports a healthy rank log as damaged."""
        rank = envelope.get("rank")
        if rank is None:
            return False
        if self.expected_rank is None:
            if type(rank) is int:
                self.expected_rank = rank
                self.stats.detected_rank = rank
            return False
        return rank != self.expected_rank

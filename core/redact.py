"""Redact a trace as it is read, so every output built from it is redacted too.

Redaction is a transform of the log's bytes, not of each output: the reader, ``raw.log``,
``raw.jsonl``, payload files, pages, the search index and the bundle are all made from the
redacted stream, so none of them can miss a path. The transform keeps every physical line
(line numbers in the report still match the redacted ``raw.log``), and when it rewrites a
payload whose declared MD5 (``has_payload``) was right, it declares the MD5 of the rewritten
payload instead, so redaction causes no MD5 mismatch. A payload that was already damaged keeps
its original, mismatching MD5: the report still says it was damaged.

Two levels:

- ``paths``: home folders (``/home/<user>``, ``/Users/<user>``, ``/root``,
  ``C:\\Users\\<user>`` and this machine's ``$HOME``) become ``~``; inductor's per-user folder
  ``torchinductor_<user>`` becomes ``torchinductor_USER``; each extra prefix becomes
  ``REDACTED``. Forms escaped inside JSON strings are matched too.
- ``code``: also drops the source text of user code: ``loc`` of stack frames, the
  ``, code: ...`` part of graph ``# File:`` comments, the ``# <source>`` of guard listings and
  the source lines of Python tracebacks.
  Library frames (``site-packages``, ``dist-packages``, the standard library) keep theirs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, cast

from markupsafe import Markup

from .source import LogSource

MODES = ("paths", "code")
HOME_TOKEN = "~"
USER_TOKEN = "USER"
PREFIX_TOKEN = "REDACTED"
SOURCE_TOKEN = "<source redacted>"

_READ_SIZE = 1 << 20

# A user name or folder name inside a path: anything up to a separator, quote or space.
_NAME = rb"[^/\\\s\"'<>:;,|*?()\[\]{}=`]+"
_PATH_CHAR = re.compile(rb"[\w.~-]")
_POSIX_HOME = re.compile(rb"/(home|Users)/(" + _NAME + rb")")
_ROOT_HOME = re.compile(rb"(?<![\w.~-])/root(?![\w.-])")
# C:\Users\me, C:/Users/me and, inside JSON strings, C:\\Users\\me
_WINDOWS_HOME = re.compile(rb"(?<![A-Za-z])[A-Za-z]:(\\\\|\\|/)(?i:users)\1(" + _NAME + rb")")
_INDUCTOR_USER = re.compile(rb"(?<=[/\\])torchinductor_(" + _NAME + rb")")
_HAS_PAYLOAD = re.compile(rb'"has_payload": "([0-9a-f]{32})"')
_LIBRARY = re.compile(
    r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib(?:64)?[/\\]python\d[\d.]*[/\\]|^<"
)

#: What a redacted trace can still tell a reader (shown on the overview and in the README).
STILL_REVEALED = (
    "your model's structure and generated code (graphs, kernels, guards), tensor shapes and "
    "dtypes, op, module, function and file names with line numbers, library versions and the "
    "layout of your installation, configuration values, timings, the tails of long file paths "
    "(guard listings shorten paths from the left), and any host or user name that appears "
    "outside the redacted path prefixes"
)


def is_library_path(path: str) -> bool:
    """True for files of installed packages or the standard library (not the user's code)."""
    return bool(_LIBRARY.search(path))


@dataclass
class RedactionStats:
    """What one full pass over the log changed."""

    replacements: Counter[str] = field(default_factory=Counter)
    lines_changed: int = 0
    md5_rewritten: int = 0

    @property
    def total(self) -> int:
        return sum(self.replacements.values())


@dataclass
class Redactor:
    """Rewrites log lines; ``stats`` describes the last complete pass over a log."""

    mode: str = "paths"
    prefixes: list[str] = field(default_factory=list)
    home: str | None = field(default_factory=lambda: os.environ.get("HOME"))
    stats: RedactionStats = field(default_factory=RedactionStats)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"redaction mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        self._literals: list[tuple[re.Pattern[bytes], bytes, str]] = []
        for prefix in sorted({p.rstrip("/\\") for p in self.prefixes if p.strip("/\\")}, key=len):
            self._literals.insert(0, (_literal(prefix), PREFIX_TOKEN.encode(), "prefix"))
        home = (self.home or "").rstrip("/\\")
        if home and not _covered_home(home.encode()):
            self._literals.append((_literal(home), HOME_TOKEN.encode(), "home"))

    @property
    def drops_code(self) -> bool:
        return self.mode == "code"

    # -- paths -----------------------------------------------------------------------------
    def redact_bytes(self, data: bytes, counts: Counter[str] | None = None) -> bytes:
        """``data`` with every home folder, per-user folder and extra prefix rewritten."""
        counts = counts if counts is not None else Counter()
        for pattern, token, kind in self._literals:
            data, n = pattern.subn(token, data)
            counts[kind] += n
        if b":" in data:  # before the POSIX rule, which would take C:/Users/me
            data, n = _WINDOWS_HOME.subn(HOME_TOKEN.encode(), data)
            counts["home"] += n
        if b"/home/" in data or b"/Users/" in data:
            data, n = _POSIX_HOME.subn(_posix_home_replacement(data), data)
            counts["home"] += n
        if b"/root" in data:
            data, n = _ROOT_HOME.subn(HOME_TOKEN.encode(), data)
            counts["home"] += n
        if b"torchinductor_" in data:
            data, n = _INDUCTOR_USER.subn(b"torchinductor_" + USER_TOKEN.encode(), data)
            counts["user"] += n
        return data

    def text(self, value: str) -> str:
        """A string shown to the user (file names, notes) with the same rewriting."""
        return self.redact_bytes(value.encode("utf-8")).decode("utf-8", "replace")

    # -- streams ---------------------------------------------------------------------------
    def redact_chunks(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """The redacted log, from the raw log's bytes in chunks of any size."""
        machine = _LineMachine(self)
        carry = b""
        for chunk in chunks:
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            if cut:
                out = machine.feed(data[:cut])
                if out:
                    yield out
        out = machine.feed(carry) + machine.finish() if carry else machine.finish()
        if out:
            yield out
        self.stats = machine.stats

    def open(self, opener: Callable[[], BinaryIO]) -> BinaryIO:
        """A read-only stream of the redacted bytes of the stream ``opener`` returns."""
        return cast(BinaryIO, _RedactedStream(self, opener()))


def redacted_source(log: LogSource, redactor: Redactor) -> LogSource:
    """``log`` read through ``redactor``, under a redacted display name."""
    return LogSource(
        display_name=redactor.text(log.display_name),
        opener=lambda: redactor.open(log.open),
        rank=log.rank,
        size_hint=log.size_hint,
        breaks=log.breaks,
        parts=tuple(replace(p, name=redactor.text(p.name)) for p in log.parts),
    )


def redaction_summary(redactor: Redactor) -> dict[str, Any]:
    """The facts of a redaction, for the bundle's manifest."""
    stats = redactor.stats
    return {
        "mode": redactor.mode,
        "prefixes": [PREFIX_TOKEN] * len(redactor.prefixes),
        "replacements": dict(sorted(stats.replacements.items())),
        "lines_changed": stats.lines_changed,
        "payload_md5_rewritten": stats.md5_rewritten,
        "still_revealed": STILL_REVEALED,
    }


def redaction_note(redactor: Redactor) -> Markup:
    """One paragraph for the overview: what was redacted, and what the trace still reveals."""
    stats = redactor.stats
    counts = stats.replacements
    parts = [
        "**This report was redacted** "
        f"(`--redact={redactor.mode}`): home folders (`/home/<user>`, `/Users/<user>`, "
        "`/root`, `C:\\Users\\<user>` and the `$HOME` of the machine that built it) became "
        "`~`, and inductor's per-user folder `torchinductor_<user>` became "
        "`torchinductor_USER`"
    ]
    if redactor.prefixes:
        n = len(redactor.prefixes)
        parts.append(f"; {n} given path prefix{'es' if n > 1 else ''} became `REDACTED`")
    changed = counts["home"] + counts["user"] + counts["prefix"]
    parts.append(
        f". {changed:,} path{' was' if changed == 1 else 's were'} rewritten on "
        f"{stats.lines_changed:,} line{'' if stats.lines_changed == 1 else 's'}"
    )
    if stats.md5_rewritten:
        parts.append(
            f", and the MD5 of {stats.md5_rewritten:,} rewritten "
            f"payload{'' if stats.md5_rewritten == 1 else 's'} was recomputed "
            f"(so {'it is' if stats.md5_rewritten == 1 else 'they are'} not reported as damaged)"
        )
    parts.append(".")
    if redactor.drops_code:
        dropped = counts["loc"] + counts["graph_code"] + counts["traceback"]
        dropped += counts["guard_code"]
        parts.append(
            f" The source text of user code was dropped from {dropped:,} places (stack "
            "frames, graph `# File:` comments, guard listings, tracebacks); library frames "
            "keep theirs."
        )
    revealed = STILL_REVEALED
    if not redactor.drops_code:
        revealed += ", and the source lines of your code quoted in stacks and graph comments"
    parts.append(f" A redacted trace still reveals {revealed}: share it knowingly.")
    return Markup("".join(parts))


# -- the line machine ---------------------------------------------------------------------------
@dataclass
class _Pending:
    """A record whose payload lines are still being collected."""

    envelope: bytes
    lines: list[bytes] = field(default_factory=list)  # payload and blank lines, in order


class _LineMachine:
    """Rewrites whole lines; holds one record back until its payload is complete."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.stats = RedactionStats()
        self._pending: _Pending | None = None
        self._strings: dict[int, str] = {}  # the trace's intern table, original paths

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        for line in data.splitlines(keepends=True):
            self._line(line, out)
        return b"".join(out)

    def finish(self) -> bytes:
        out: list[bytes] = []
        self._flush(out)
        return b"".join(out)

    def _line(self, line: bytes, out: list[bytes]) -> None:
        pending = self._pending
        if pending is not None:
            if line.startswith(b"\t") or not line.strip(b"\r\n"):
                pending.lines.append(line)
                return
            self._flush(out)
        if b'"has_payload"' in line:
            self._pending = _Pending(line)
            return
        out.append(self._envelope(line))

    def _count(self, before: bytes, after: bytes) -> bytes:
        if after != before:
            self.stats.lines_changed += 1
        return after

    def _envelope(self, line: bytes) -> bytes:
        """A non-payload line: paths rewritten, and for ``code`` user source dropped."""
        redactor = self.redactor
        if redactor.drops_code and b'{"str": ' in line:
            self._remember_string(line)
        new = redactor.redact_bytes(line, self.stats.replacements)
        if redactor.drops_code:
            new = self._drop_code_in_envelope(new)
        return self._count(line, new)

    def _flush(self, out: list[bytes]) -> None:
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        redactor = self.redactor
        counts = self.stats.replacements
        original = [_payload_text(line) for line in pending.lines if line.startswith(b"\t")]
        lines = [redactor.redact_bytes(line, counts) for line in pending.lines]
        if redactor.drops_code:
            lines = self._drop_code_in_payload(lines)
        changed = sum(1 for a, b in zip(pending.lines, lines, strict=True) if a != b)
        self.stats.lines_changed += changed
        envelope = self._envelope(pending.envelope)
        redacted = [_payload_text(line) for line in lines if line.startswith(b"\t")]
        declared = _HAS_PAYLOAD.search(envelope)
        if declared is not None and redacted != original:
            before = hashlib.md5(b"\n".join(original)).hexdigest().encode()
            if declared.group(1) == before:  # a damaged payload stays visibly damaged
                after = hashlib.md5(b"\n".join(redacted)).hexdigest().encode()
                start, end = declared.span(1)
                envelope = envelope[:start] + after + envelope[end:]
                self.stats.md5_rewritten += 1
        out.append(envelope)
        out.extend(lines)

    # -- code ------------------------------------------------------------------------------
    def _remember_string(self, line: bytes) -> None:
        start = line.find(b"] {")
        try:
            value = json.loads(line[start + 2 :])["str"]
            self._strings[int(value[1])] = str(value[0])
        except (ValueError, KeyError, IndexError, TypeError):
            return

    def _drop_code_in_envelope(self, line: bytes) -> bytes:
        counts = self.stats.replacements
        if b'"loc"' in line:
            line = self._drop_locs(line)
        if b"File" in line or b"  # " in line:
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                return line
            line = drop_source_text(text, counts, escaped=True).encode("utf-8")
        return line

    def _drop_locs(self, line: bytes) -> bytes:
        """Remove ``loc`` (the source text) from stack frames of user files."""
        start = line.find(b"] {")
        if start < 0:
            return line
        try:
            envelope = json.loads(line[start + 2 :])
        except ValueError:
            return line
        dropped = _strip_locs(envelope, self._strings)
        if not dropped:
            return line
        self.stats.replacements["loc"] += dropped
        ending = line[len(line.rstrip(b"\r\n")) :]
        return line[: start + 2] + json.dumps(envelope).encode("utf-8") + ending

    def _drop_code_in_payload(self, lines: list[bytes]) -> list[bytes]:
        """Drop user source text from a payload, keeping its number of lines."""
        texts = [_payload_text(line) for line in lines if line.startswith(b"\t")]
        if not any(b"File" in t or b"  # " in t for t in texts):
            return lines
        try:
            joined = b"\n".join(texts).decode("utf-8")
        except UnicodeDecodeError:
            return lines
        counts = self.stats.replacements
        new = drop_source_text(joined, counts, escaped=False)
        new = drop_source_text(new, counts, escaped=True)
        parts = new.split("\n")
        if len(parts) != len(texts):  # cannot happen: the rewrite keeps lines; be safe
            return lines
        result: list[bytes] = []
        it = iter(parts)
        for line in lines:
            if line.startswith(b"\t"):
                body = line.rstrip(b"\r\n")
                ending = line[len(body) :]
                result.append(b"\t" + next(it).encode("utf-8") + ending)
            else:
                result.append(line)
        return result


def _strip_locs(value: Any, strings: dict[int, str]) -> int:
    """Delete ``loc`` from every frame of a user file inside ``value``; return how many."""
    dropped = 0
    if isinstance(value, dict):
        if "loc" in value and "filename" in value:
            filename = value["filename"]
            path = strings.get(filename) if isinstance(filename, int) else filename
            if not (isinstance(path, str) and is_library_path(path)):
                del value["loc"]
                dropped += 1
        for item in value.values():
            dropped += _strip_locs(item, strings)
    elif isinstance(value, list):
        for item in value:
            dropped += _strip_locs(item, strings)
    return dropped


# -- source text in graph comments and tracebacks -----------------------------------------------
def _source_patterns(escaped: bool) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Graph-comment, traceback and guard patterns, for raw text or text in a JSON string."""
    if escaped:
        nl, q = r"\\n", r'\\"'
        lead = r'(?:(?<=\\n)|(?<="))'  # after an escaped newline or at the string's start
        rest = r'(?:[^\\"\n]|\\[^n])*'  # up to an escaped newline or the string's end
        path = r'(?:[^\\"\n]|\\[^n"])+?'
        char = r'(?:[^\\"\n]|\\[^n])'
    else:
        nl, q = r"\n", '"'
        lead = r"(?m:^)"
        rest = r"[^\n]*"
        path = r'[^"\n]+?'
        char = r"[^\n]"
    graph = re.compile(
        r"(?P<keep>#\s*File: (?P<path>" + path + r"):\d+ in [\w<>.]*), code: " + rest
    )
    # the source line is indented deeper than its "File" line; caret lines may follow it
    traceback = re.compile(
        lead
        + r"(?P<keep>(?P<indent>[ \t]*)File "
        + q
        + r"(?P<path>"
        + path
        + r")"
        + q
        + r", line \d+, in [^\n\\\"]*"
        + nl
        + r"(?P=indent)[ \t]+)(?P<source>(?![ \t])"
        + rest
        + r")(?P<carets>"
        + nl
        + r"[ \t]*[~^]+[ \t~^]*(?="
        + nl
        + r"|$|\"))?"
    )
    # guard listings: "<guard>  # <source line>  # <file>:<line> in <function>"
    guard = re.compile(
        r"  # (?P<source>(?:(?!  # )" + char + r")+)  # (?P<path>[^\s#\\\"]+):(?P<line>\d+) in "
    )
    return graph, traceback, guard


_RAW_PATTERNS = _source_patterns(escaped=False)
_ESCAPED_PATTERNS = _source_patterns(escaped=True)


def drop_source_text(text: str, counts: Counter[str], *, escaped: bool) -> str:
    """``text`` without the source lines of user code in graph comments and tracebacks.

    Raw text keeps its number of lines (a dropped source line becomes a marker, a caret line
    becomes empty); inside JSON strings (``escaped``) nothing needs to keep its place.
    """
    graph, traceback, guard = _ESCAPED_PATTERNS if escaped else _RAW_PATTERNS
    if "File" not in text and "  # " not in text:
        return text

    def graph_sub(match: re.Match[str]) -> str:
        if is_library_path(_unescape(match["path"], escaped)):
            return match.group(0)
        counts["graph_code"] += 1
        return match["keep"]

    def traceback_sub(match: re.Match[str]) -> str:
        if is_library_path(_unescape(match["path"], escaped)):
            return match.group(0)
        counts["traceback"] += 1
        # raw text keeps the caret line's place (empty); in a JSON string it just goes
        tail = "\n" if match["carets"] is not None and not escaped else ""
        return match["keep"] + SOURCE_TOKEN + tail

    def guard_sub(match: re.Match[str]) -> str:
        if is_library_path(_unescape(match["path"], escaped)):
            return match.group(0)
        counts["guard_code"] += 1
        return f"  # {match['path']}:{match['line']} in "

    text = graph.sub(graph_sub, text)
    text = guard.sub(guard_sub, text)
    return traceback.sub(traceback_sub, text)


def _unescape(path: str, escaped: bool) -> str:
    return path.replace("\\\\", "\\").replace('\\"', '"') if escaped else path


# -- helpers -----------------------------------------------------------------------------------
def _payload_text(line: bytes) -> bytes:
    """A payload line's text as the reader joins it: no TAB, no line ending."""
    return line[1:].rstrip(b"\n").removesuffix(b"\r")


def _literal(prefix: str) -> re.Pattern[bytes]:
    """A literal path prefix that ends at a path boundary (``/data/al`` misses ``/data/alice``)."""
    return re.compile(re.escape(prefix.encode("utf-8")) + rb"(?![\w.-])")


def _covered_home(home: bytes) -> bool:
    """True when the built-in patterns already rewrite this ``$HOME``."""
    return bool(
        _POSIX_HOME.fullmatch(home) or _ROOT_HOME.fullmatch(home) or _WINDOWS_HOME.fullmatch(home)
    )


def _posix_home_replacement(data: bytes) -> Callable[[re.Match[bytes]], bytes]:
    """``/home/me`` becomes ``~``; inside a longer path (``/mnt/home/me``) only the name goes."""

    def replace(match: re.Match[bytes]) -> bytes:
        start = match.start()
        if start > 0 and _PATH_CHAR.match(data, start - 1):
            return b"/" + match.group(1) + b"/" + USER_TOKEN.encode()
        return HOME_TOKEN.encode()

    return replace


class _RedactedStream:
    """A minimal binary reader over :meth:`Redactor.redact_chunks` (what the reader needs)."""

    def __init__(self, redactor: Redactor, source: BinaryIO) -> None:
        self._source = source
        self._chunks = redactor.redact_chunks(iter(lambda: source.read(_READ_SIZE), b""))
        self._buf = b""
        self._pos = 0

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buf) - self._pos < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buf = self._buf[self._pos :] + chunk
            self._pos = 0
        if size < 0:
            data, self._buf, self._pos = self._buf[self._pos :], b"", 0
            return data
        data = self._buf[self._pos : self._pos + size]
        self._pos += len(data)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> _RedactedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

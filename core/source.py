"""Open what the user gave us (file, .gz, .zip, .7z, directory, stdin) as binary log streams.

Whatever the user points at ends up as one or more ``LogSource``; each ``open()`` returns a fresh
stream of decompressed log bytes, so the reader may make more than one pass.

- Plain files and gzip data are streamed (gunzipped on the fly), never unpacked to disk.
- ``.zip`` members are streamed straight out of the archive.
- ``.7z`` members are extracted at resolve time into a private temporary directory, because
  py7zr has no streaming member API. So are stdin (``-``) and pipes, which can be read only once.
  That directory is removed by ``ResolvedInput.close()`` (or on leaving
  ``with resolve_input(...) as resolved:``), otherwise once nothing refers to it any more, and at
  the latest when the interpreter exits.

Formats are recognised by their magic bytes, so a renamed archive still works. Archives are
untrusted: a member that could escape a directory (absolute, ``..``, NUL, drive letter) or is a
symlink makes the whole archive refused, and both the number of entries and the unpacked size of
the members we read are capped (declared sizes are checked first, bytes are counted while reading,
a gzip log inside an archive is gunzipped once at resolve time to count its layer too, and an
archive may not unpack to more than ``MAX_RATIO`` times its size). In a directory, a symlink
leading out of it is skipped with a line that names it.

What is read is fixed when the log is chosen: a plain file is read up to the size it had then
(a log still being written gives the same bytes to the reader and to ``raw.log``), and a cut
or damaged gzip stream or zip member ends the log where it breaks, noted in
``LogSource.breaks``, instead of losing everything; one that decompresses to its end but not
to its CRC is read whole (garbage after the damage included) and noted there too.
Every problem becomes an ``InputError`` of one line that names the path.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import json
import lzma
import os
import re
import stat
import sys
import time
import weakref
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from .cleanup import make_scratch, remove_scratch
from .records import HEADER, HEADER_WINDOW
from .stats import SHOWS_WHAT_CAME_BEFORE, LogPart
from .store import copy_range

DEFAULT_MAX_UNPACKED_BYTES = 8 << 30
"""Most bytes we unpack from one archive (the logs we read, not the whole archive)."""

MAX_RATIO = 1100
"""Most bytes an archive's logs may unpack to per byte of the archive. One layer of deflate
tops out near 1032, so this stops a .gz inside a .zip (or a .zip inside a .gz) compressing
nothing but repetition, not a real trace."""

RATIO_FLOOR = 256 << 20
"""Below this many unpacked bytes the ratio is not checked (a tiny archive of a small log)."""

DEFAULT_MAX_ENTRIES = 10_000
"""Most entries an archive may list; log bundles have a handful, bombs have millions."""

STDIN_NAME = "<stdin>"

_HEAD_BYTES = 512  # enough for every magic number we look at, including tar's at offset 257
_CHUNK = 1 << 20
_MEMBER_STEP = 64 << 10  # bytes decoded per read of compressed data (see _GuardedRaw)
_SALVAGE_READ = 256  # bytes read at a time from an archive member up to a break
_LIST_SHOWN = 10  # candidates/ignored names quoted in one error line before "… and N more"

#: Names a folder's or archive's logs have (torch writes ``dedicated_log_torch_trace_*.log``);
#: a ``.txt`` beside them is someone's notes. A file named on the command line is read whatever
#: its name.
_LOG_SUFFIXES = (".log", ".log.gz")
_LOG_PREFIX = "dedicated_log_torch_trace"
#: A rank has at most 7 digits: a longer number (it would name files too long for any file
#: system) makes the name not a rank log's.
_RANK_RE = re.compile(r"dedicated_log_torch_trace_rank_(\d{1,7})(?:_.*)?\.log(?:\.gz)?", re.DOTALL)

# Errors a decompressor or a damaged/vanished file can raise while we read it.
_DATA_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)
_ZIP_ERRORS = (*_DATA_ERRORS, zipfile.LargeZipFile, NotImplementedError, RuntimeError, ValueError)

CRC_MISMATCH = (
    "the archive member is damaged: its data does not match its CRC; "
    "lines after the damage may be garbage"
)
GZIP_CRC_MISMATCH = (
    "the gzip data is damaged: it does not match its CRC; lines after the damage may be garbage"
)
CRC_MISMATCHES = (CRC_MISMATCH, GZIP_CRC_MISMATCH)
"""Lines in ``LogSource.breaks`` for data that decompressed to its end, wrongly."""

_KIND_TEXT = {
    "zip": "a zip archive",
    "7z": "a 7z archive",
    "tar": "a tar archive",
    "xz": "xz-compressed data",
    "bzip2": "bzip2-compressed data",
    "zstd": "zstd-compressed data",
}


class InputError(Exception):
    """A problem with the input path, as one line that names the path."""


class _Scratch:
    """A private temporary directory, removed on close(), on garbage collection or at exit."""

    def __init__(self) -> None:
        self.path = make_scratch("input")
        self._finalizer = weakref.finalize(self, remove_scratch, self.path)

    def close(self) -> None:
        self._finalizer()


def printable_name(name: str) -> str:
    """A file name as text UTF-8 can encode: bytes that are not UTF-8 (which Python keeps as
    lone surrogates) are shown as ``\\xNN``."""
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class LogSource:
    """One log to read: a name to show the user and a way to open its decompressed bytes."""

    display_name: str
    opener: Callable[[], BinaryIO]
    rank: int | None = None
    size_hint: int | None = None
    breaks: list[str] = field(default_factory=list, compare=False)
    """Where the data broke off (a cut or damaged gzip stream or archive member), one line each;
    the log is read up to there."""
    parts: tuple[LogPart, ...] = ()
    """The logs one process wrote, when this source reads several one after the other."""

    def __post_init__(self) -> None:
        # the name reaches pages, JSON and the terminal: it must be text UTF-8 can encode
        object.__setattr__(self, "display_name", printable_name(self.display_name))

    def open(self) -> BinaryIO:
        return self.opener()

    def logs_read(self) -> tuple[LogSource, ...]:
        """The logs this source reads: the ones it joins (see :func:`join_logs`), or itself."""
        opener = self.opener
        return opener.logs if isinstance(opener, _JoinedOpener) else (self,)

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The log's (decompressed) bytes, a chunk at a time (e.g. for ``raw.log``)."""
        with self.open() as stream:
            while chunk := stream.read(size):
                yield chunk

    def portable(self) -> LogSource:
        """A copy that pickles, for a worker process to read: the temporary folder a 7z
        member or buffered stdin lives in is kept alive by this process (which holds the
        ResolvedInput), not by the worker."""
        opener = self.opener
        if isinstance(opener, _JoinedOpener):
            return replace(self, opener=_JoinedOpener(tuple(p.portable() for p in opener.logs)))
        if getattr(opener, "keep_alive", None) is not None:
            return replace(self, opener=replace(opener, keep_alive=None))  # type: ignore[type-var]
        return self

    def copy_to(self, dest: str | os.PathLike[str]) -> None:
        """Write the bytes a reader of this log gets into ``dest`` (``raw.log``): a plain file
        is copied in the kernel, but only as far as the size it had when it was chosen, so
        a log still being written gives the bytes that were parsed."""
        opener = self.opener
        plain = isinstance(opener, _FileOpener) and not opener.gzipped
        if plain and opener.size is not None and _copy_prefix(opener.path, dest, opener.size):
            return
        with open(dest, "wb") as out:
            for chunk in self.chunks():
                out.write(chunk)

    @property
    def plain_path(self) -> str | None:
        """The file on disk when the log is a plain (uncompressed) file: it can be copied as is."""
        opener = self.opener
        if isinstance(opener, _FileOpener) and not opener.gzipped:
            return opener.path
        return None


@dataclass
class ResolvedInput:
    """The logs found for one input path, and what was looked at but not used.

    Use it as a context manager (or call ``close()``) to remove temporary files early; the logs
    cannot be opened after that.
    """

    logs: list[LogSource]
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    is_multi_rank: bool = False
    skipped: list[str] = field(default_factory=list)
    """Links leading out of an input folder, left unread: one line each, naming the link."""
    _scratch: list[_Scratch] = field(default_factory=list, repr=False, compare=False)

    def close(self) -> None:
        """Remove the temporary files behind the logs (7z members, buffered stdin)."""
        for scratch in self._scratch:
            scratch.close()

    def __enter__(self) -> ResolvedInput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class _Limits:
    max_unpacked_bytes: int
    max_entries: int


@dataclass(frozen=True)
class _Entry:
    """A regular file in a directory or an archive, as far as choosing logs is concerned."""

    name: str  # as shown: file name in a directory, full member name in an archive
    size: int
    mtime: float
    path: str = ""  # on-disk path for directory entries

    @property
    def base(self) -> str:
        return PurePosixPath(self.name.replace("\\", "/")).name


@dataclass
class _Choice:
    chosen: list[tuple[_Entry, int | None]]
    ignored: list[str]
    notes: list[str]
    multi_rank: bool = False
    joined: bool = False  # the chosen logs are one process's, read one after the other


# ---------------------------------------------------------------------------------------------
# Public entry point


def resolve_input(
    path: str | os.PathLike[str],
    *,
    latest: bool = False,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> ResolvedInput:
    """Find the log(s) to read for ``path`` (``-`` is stdin).

    A file or archive holding exactly one log gives that log; rank logs
    (``dedicated_log_torch_trace_rank_<N>…``) give all of them, sorted by rank, with
    ``is_multi_rank=True``; ``latest`` picks the most recently modified log; anything still
    ambiguous raises ``InputError`` listing the candidates.
    """
    shown = os.fspath(path)
    limits = _Limits(max_unpacked_bytes, max_entries)
    if shown == "-":
        return _resolve_stdin(latest, limits)
    st = _stat(shown)
    if stat.S_ISDIR(st.st_mode):
        return _resolve_dir(shown, latest)
    label = os.path.basename(shown.rstrip("/")) or shown
    if stat.S_ISREG(st.st_mode):
        return _resolve_file(shown, shown, label, latest, limits, st.st_size)
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        # `tlsite <(zcat trace.gz)` or /dev/stdin: a pipe can be read once, so buffer it.
        stream = _open_or_fail(shown, shown)
        with stream:
            return _resolve_stream(stream, shown, label, latest, limits)
    raise InputError(f"{shown}: not a file or directory")


# ---------------------------------------------------------------------------------------------
# Small helpers


def _reason(exc: OSError) -> str:
    """A short lower-case reason for an OSError, without the path (the caller names it)."""
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file or directory"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return (exc.strerror or str(exc) or type(exc).__name__).lower()


def _stat(shown: str) -> os.stat_result:
    try:
        return os.stat(shown)
    except OSError as exc:
        raise InputError(f"{shown}: {_reason(exc)}") from exc
    except ValueError as exc:  # embedded NUL in the path
        raise InputError(f"{shown}: invalid path ({exc})") from exc


def _open_or_fail(path: str, where: str) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise InputError(f"{where}: {_reason(exc)}") from exc


def _read_head(path: str, where: str) -> bytes:
    """First bytes of a file, which is also how we find out early that it is unreadable."""
    with _open_or_fail(path, where) as f:
        try:
            return f.read(_HEAD_BYTES)
        except OSError as exc:
            raise InputError(f"{where}: {_reason(exc)}") from exc


def _sniff(head: bytes) -> str:
    """Name the format from its magic bytes; file names can lie."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(b"7z\xbc\xaf\x27\x1c"):
        return "7z"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head[:3] == b"BZh" and head[4:10] == b"1AY&SY":
        return "bzip2"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    if head[257:262] == b"ustar":
        return "tar"
    return "plain"


def _unsupported(where: str, kind: str, *, gzipped: bool = False) -> InputError:
    what = _KIND_TEXT.get(kind, kind) + (" inside gzip" if gzipped else "")
    return InputError(
        f"{where}: {what}, not a trace log; tlsite reads plain or gzip logs, "
        "and .zip/.7z archives of them"
    )


def _gzip_or_plain(where: str, head: bytes, open_raw: Callable[[], BinaryIO]) -> bool:
    """Whether a log's bytes need gunzipping; refuse other formats and corrupt gzip early."""
    kind = _sniff(head)
    if kind == "plain":
        return False
    if kind != "gzip":
        raise _unsupported(where, kind)
    breaks: list[str] = []
    try:
        with _gunzipped(open_raw(), where, breaks, None) as gz:
            inner = gz.read(_HEAD_BYTES)
    except _DATA_ERRORS as exc:
        raise InputError(f"{where}: corrupt gzip data ({exc})") from exc
    if not inner and breaks:
        raise InputError(f"{where}: corrupt gzip data, nothing decompresses")
    inner_kind = _sniff(inner)
    if inner_kind != "plain":
        raise _unsupported(where, inner_kind, gzipped=True)
    return True


def _rank_of(name: str) -> int | None:
    m = _RANK_RE.fullmatch(name)
    return int(m.group(1)) if m else None


def _is_log_name(name: str) -> bool:
    return name.lower().endswith(_LOG_SUFFIXES) or name.startswith(_LOG_PREFIX)


def _short_list(items: Iterable[str], sep: str = ", ") -> str:
    items = list(items)
    shown = sep.join(items[:_LIST_SHOWN])
    if len(items) > _LIST_SHOWN:
        shown += f"{sep}… and {len(items) - _LIST_SHOWN} more"
    return shown


def _human(n: int) -> str:
    """Sizes in error messages, e.g. "8.0 GiB" or "1000 bytes"."""
    if n < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


# ---------------------------------------------------------------------------------------------
# Streams


class _GuardedRaw(io.RawIOBase):
    """Turns read errors and overlong members into InputError, so no traceback escapes.

    With ``breaks`` (an archive member), damaged data ends the stream where it breaks, with a
    line in ``breaks``, so the log is read up to there; ``stop_at`` ends it after that many
    bytes (a file that is still growing is read as far as it reached when it was chosen).

    An archive member is read a step at a time (``readinto1``): a decompression error loses
    what the failing call decoded, the same bytes on every pass, so with ``reopen`` (a fresh
    stream of the same member) that step is read again in small pieces up to the damage. Its
    ``crc`` is checked here at the end, not by :mod:`zipfile`, which would drop the last read's
    bytes with the error; a mismatch is a line in ``breaks``.
    """

    def __init__(
        self,
        inner: BinaryIO,
        display: str,
        limit: int | None = None,
        closers: tuple[Callable[[], object], ...] = (),
        *,
        breaks: list[str] | None = None,
        stop_at: int | None = None,
        crc: int | None = None,
        reopen: Callable[[], contextlib.AbstractContextManager[BinaryIO]] | None = None,
    ) -> None:
        super().__init__()
        self._inner = inner
        self._reopen = reopen
        self._stepped = getattr(inner, "readinto1", None) is not None
        self._expected_crc = crc
        self._crc = 0
        self._display = display
        self._limit = limit
        self._closers = closers
        self._breaks = breaks
        self._stop_at = stop_at
        self._count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._stop_at is not None:
            room = self._stop_at - self._count
            if room <= 0:
                return 0
            buffer = memoryview(buffer)[:room]
        try:
            if self._stepped:
                step = memoryview(buffer)[:_MEMBER_STEP]
                n = self._inner.readinto1(step)  # type: ignore[attr-defined]
            else:
                n = self._inner.readinto(buffer)  # type: ignore[attr-defined]
        except _DATA_ERRORS as exc:
            if self._breaks is None:
                raise InputError(f"{self._display}: unreadable or corrupt data ({exc})") from exc
            n = self._salvage(memoryview(buffer)[:_MEMBER_STEP]) if self._stepped else 0
            self._count += n
            _note_break(self._breaks, f"the archive member breaks off ({exc})", self._count)
            self._stop_at = self._count
            return n
        if self._expected_crc is not None:
            if n:
                self._crc = zlib.crc32(memoryview(buffer)[:n], self._crc)
            else:
                self._check_crc()
        self._count += n
        if self._limit is not None and self._count > self._limit:
            raise InputError(
                f"{self._display}: unpacks to more than the {self._limit} bytes it declares; "
                "refused"
            )
        return n

    def _salvage(self, step: memoryview) -> int:
        """Put in ``step`` what the failed step decodes before the damage, read from a fresh
        stream in small pieces; how many bytes."""
        if self._reopen is None:
            return 0
        got = 0
        try:
            with self._reopen() as again:
                left = self._count
                while left > 0:  # decoded before: no error
                    skipped = len(again.read(min(left, _CHUNK)))
                    if not skipped:
                        return 0
                    left -= skipped
                while got < len(step):
                    piece = again.read1(min(_SALVAGE_READ, len(step) - got))  # type: ignore[attr-defined]
                    if not piece:
                        break
                    step[got : got + len(piece)] = piece
                    got += len(piece)
        except (*_DATA_ERRORS, InputError):
            pass  # the damage, where the failed step met it
        return got

    def _check_crc(self) -> None:
        """At the end of a member: its bytes are the ones that were stored, or say so."""
        breaks = self._breaks
        if breaks is not None and self._crc != self._expected_crc and CRC_MISMATCH not in breaks:
            breaks.append(CRC_MISMATCH)
        self._expected_crc = None  # checked once per pass

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._inner.close()
            for close in self._closers:
                close()
        finally:
            super().close()


def _note_break(breaks: list[str], what: str, offset: int) -> None:
    line = f"{what} after {offset:,} bytes of log{SHOWS_WHAT_CAME_BEFORE}"
    if line not in breaks:  # each pass over the log meets the same break
        breaks.append(line)


class _Gunzip(io.RawIOBase):
    """Gzip data (one or more members) gunzipped as it is read, counted against ``limit``.

    Unlike :class:`gzip.GzipFile`, a cut or damaged stream is not an error that loses the
    last buffer: everything that decompressed is returned, then the stream ends and
    ``breaks`` says where. A decoding error loses the step that raised it, so each step starts
    from a copy of the decoder, and the failed step is decoded again from it a byte at a
    time up to the damage (or the checksum that failed).
    """

    def __init__(
        self, raw: BinaryIO, display: str, breaks: list[str], limit: int | None = None
    ) -> None:
        super().__init__()
        self._raw = raw
        self._display = display
        self._breaks = breaks
        self._limit = limit
        self._z = zlib.decompressobj(wbits=31)
        self._out = 0
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._done:
            data = self._z.unconsumed_tail
            if not data:
                if self._z.eof:  # one gzip member ended: another may follow
                    data = self._z.unused_data or self._read()
                    if not data.strip(b"\0"):  # the end (trailing NULs are padding)
                        self._done = True
                        break
                    self._z = zlib.decompressobj(wbits=31)
                else:
                    data = self._read()
                    if not data:
                        self._stop("the gzip data ends early")
                        break
            step = min(len(buffer), _MEMBER_STEP)
            start = self._z.copy()
            try:  # in fixed steps, the same on every pass
                out = self._z.decompress(data, step)
            except zlib.error as exc:
                out = _decoded_before_error(start, data, step)  # what came before the error
                if "incorrect data check" in str(exc) or "incorrect length check" in str(exc):
                    self._done = True  # read to the end, but not what was written
                    if GZIP_CRC_MISMATCH not in self._breaks:
                        self._breaks.append(GZIP_CRC_MISMATCH)
                else:
                    self._stop(f"the gzip data is damaged ({exc})", len(out))
                if not out:
                    break
            if out:
                n = len(out)
                buffer[:n] = out
                self._out += n
                if self._limit is not None and self._out > self._limit:
                    raise InputError(
                        f"{self._display}: unpacks to more than the {_human(self._limit)} "
                        "limit; refused"
                    )
                return n
        return 0

    def _read(self) -> bytes:
        try:
            return self._raw.read(_CHUNK)
        except _DATA_ERRORS as exc:
            raise InputError(f"{self._display}: unreadable or corrupt data ({exc})") from exc

    def _stop(self, what: str, more: int = 0) -> None:
        """End the stream after ``more`` bytes still to be returned, noting where it broke."""
        self._done = True
        _note_break(self._breaks, what, self._out + more)

    def close(self) -> None:
        if not self.closed:
            try:
                self._raw.close()
            finally:
                super().close()


def _decoded_before_error(decoder: Any, data: bytes, limit: int) -> bytes:
    """What ``decoder`` (a copy taken before the step that failed) decodes from ``data`` before
    the damage, up to ``limit`` bytes: fed a byte at a time, so that nothing decoded before
    the bad byte is lost (a step is at most :data:`_MEMBER_STEP` bytes of output)."""
    out = bytearray()
    for at in range(len(data)):
        try:
            out += decoder.decompress(data[at : at + 1], limit - len(out))
        except zlib.error:
            break
        if len(out) >= limit or decoder.unconsumed_tail or decoder.eof:
            break
    return bytes(out)


def _guarded(
    inner: BinaryIO,
    display: str,
    limit: int | None = None,
    closers: tuple[Callable[[], object], ...] = (),
    **kwargs: object,
) -> BinaryIO:
    raw = _GuardedRaw(inner, display, limit, closers, **kwargs)  # type: ignore[arg-type]
    return io.BufferedReader(raw, buffer_size=_CHUNK)


def _gunzipped(raw: BinaryIO, display: str, breaks: list[str], limit: int | None) -> BinaryIO:
    return io.BufferedReader(_Gunzip(raw, display, breaks, limit), buffer_size=_CHUNK)


def _copy_prefix(src: str, dest: str | os.PathLike[str], size: int) -> bool:
    """Copy the first ``size`` bytes of ``src`` (in the kernel where it can); False when the
    file no longer holds them."""
    with open(src, "rb") as inp, open(dest, "wb") as out:
        try:
            copy_range(inp.fileno(), 0, size, out)
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class _FileOpener:
    """Opens a log file on disk, gunzipping on the fly when it holds gzip data.

    ``size`` is the file's size when it was chosen: reading stops there, so a log that is
    still being written is read (and copied to ``raw.log``) as one fixed set of bytes.
    """

    path: str
    display: str
    gzipped: bool
    keep_alive: object = None  # the temporary directory the file lives in, if any
    size: int | None = None
    breaks: list[str] | None = field(default=None, compare=False)
    limit: int | None = None  # most unpacked bytes (gzip inside an archive)

    def __call__(self) -> BinaryIO:
        unbuffered = self.size is not None  # buffered once, by the guard
        try:
            f = open(self.path, "rb", buffering=0 if unbuffered else -1)  # noqa: SIM115
        except OSError as exc:
            raise InputError(f"{self.display}: {_reason(exc)}") from exc
        stream: BinaryIO = f  # type: ignore[assignment]
        if self.size is not None:
            stream = _guarded(f, self.display, stop_at=self.size)  # type: ignore[arg-type]
        if self.gzipped:
            breaks = self.breaks if self.breaks is not None else []
            return _gunzipped(stream, self.display, breaks, self.limit)
        return stream


@dataclass(frozen=True)
class _ZipMemberOpener:
    """Streams one zip member (re-opening the archive so every stream is independent)."""

    archive: str
    member: str
    display: str
    gzipped: bool
    declared_size: int
    keep_alive: object = None
    breaks: list[str] | None = field(default=None, compare=False)
    limit: int | None = None  # most bytes a gzip log inside may unpack to

    def __call__(self) -> BinaryIO:
        zf, member, crc = self._open()
        breaks = self.breaks if self.breaks is not None else []
        raw = _guarded(
            member,
            self.display,
            self.declared_size,
            (zf.close,),
            breaks=breaks,
            crc=crc,
            reopen=self._again,
        )
        if not self.gzipped:
            return raw
        return _gunzipped(raw, self.display, breaks, self.limit)

    def _open(self) -> tuple[zipfile.ZipFile, BinaryIO, int]:
        """The archive, the member's stream (which checks no CRC) and the member's CRC."""
        try:
            zf = zipfile.ZipFile(self.archive)
        except _ZIP_ERRORS as exc:
            raise InputError(f"{self.display}: cannot open the archive ({exc})") from exc
        try:
            info = zf.getinfo(self.member)
            crc = info.CRC
            del info.CRC  # zipfile would check it, and drop the last bytes read: the guard does
            member = zf.open(info)
        except (*_ZIP_ERRORS, KeyError, AttributeError) as exc:
            zf.close()
            raise InputError(f"{self.display}: cannot open the member ({exc})") from exc
        except BaseException:
            zf.close()
            raise
        return zf, member, crc  # type: ignore[return-value]

    @contextlib.contextmanager
    def _again(self) -> Iterator[BinaryIO]:
        """A fresh stream of the member (to read a damaged step again, see _GuardedRaw)."""
        zf, member, _ = self._open()
        try:
            yield member
        finally:
            member.close()
            zf.close()


@dataclass(frozen=True)
class _JoinedOpener:
    """Reads several logs one after the other as one stream (see :func:`join_logs`)."""

    logs: tuple[LogSource, ...]

    def __call__(self) -> BinaryIO:
        return io.BufferedReader(_JoinedRaw(self.logs), buffer_size=_CHUNK)  # type: ignore[return-value]


class _JoinedRaw(io.RawIOBase):
    """The logs' bytes in turn, a log cut inside a line ended with a newline so that the next
    log's first record starts a line of its own. A log is opened when its turn comes."""

    def __init__(self, logs: tuple[LogSource, ...]) -> None:
        super().__init__()
        self._waiting = list(logs)
        self._current: BinaryIO | None = None
        self._pending = b""
        self._last = b"\n"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while True:
            if self._pending:
                n = min(len(buffer), len(self._pending))
                buffer[:n], self._pending = self._pending[:n], self._pending[n:]
                return n
            if self._current is None:
                if not self._waiting:
                    return 0
                self._current = self._waiting.pop(0).open()
            data = self._current.read(len(buffer))
            if data:
                buffer[: len(data)] = data
                self._last = data[-1:]
                return len(data)
            self._current.close()
            self._current = None
            if self._last != b"\n":
                self._pending, self._last = b"\n", b"\n"

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None
        super().close()


def join_logs(logs: list[LogSource], where: str, rank: int | None = None) -> LogSource:
    """One source reading ``logs`` (one process's, in the order it wrote them, found in the
    folder or archive named ``where``) in turn.

    The reader then keeps one table of interned file names, as the process did: a stack in the
    draft-export log names files interned in the main log. Each log's lines are counted here,
    so pages can say which lines of the whole (and of ``raw.log``) came from which log.
    """
    parts = []
    line = 0
    for log in logs:
        count, last = 0, b"\n"
        for chunk in log.chunks():
            count += chunk.count(b"\n")
            last = chunk[-1:]
        count += last != b"\n"
        parts.append(LogPart(log.display_name, line + 1, line + count, tuple(log.breaks)))
        line += count
    return LogSource(
        f"{where} ({len(logs)} logs of one process)",
        _JoinedOpener(tuple(logs)),
        rank,
        sum(log.size_hint or 0 for log in logs),
        [],  # each part's breaks are its own
        tuple(parts),
    )


# ---------------------------------------------------------------------------------------------
# Choosing logs among the files of a directory or the members of an archive


def _choose(
    shown: str,
    files: list[_Entry],
    looked_at: int,
    latest: bool,
    archive: bool,
    skipped: list[str] | None = None,
    head_of: Callable[[_Entry], bytes] | None = None,
) -> _Choice:
    """Apply the rules: one log → it; --latest → newest; rank logs → all; logs of one process
    (their first bytes told by ``head_of``) → all, joined; else ask the user."""
    ignored: list[str] = []
    candidates: list[_Entry] = []
    for entry in files:
        if not _is_log_name(entry.base):
            ignored.append(f"{entry.name}: not a log")
        elif entry.size == 0:
            ignored.append(f"{entry.name}: empty")
        else:
            candidates.append(entry)
    if not candidates:
        what = "members" if archive else "files"
        shown_ignored = (skipped or []) + ignored
        detail = f": {_short_list(shown_ignored, '; ')}" if shown_ignored else ""
        raise InputError(f"{shown}: no trace logs found (looked at {looked_at} {what}{detail})")
    if len(candidates) == 1:
        only = candidates[0]
        return _Choice([(only, _rank_of(only.base))], ignored, [])
    if latest:
        return _choose_latest(candidates, ignored)
    ranked = [e for e in candidates if _rank_of(e.base) is not None]
    if len(ranked) >= 2:
        return _choose_ranks(shown, candidates, ranked, ignored, archive, head_of)
    if head_of is not None and not ranked and (order := _one_process(candidates, head_of)):
        return _Choice([(e, None) for e in order], ignored, [], joined=True)
    names = [e.name for e in candidates]
    raise InputError(
        f"{shown}: {len(names)} logs found; pass --latest to use the newest, "
        f"or {_name_one(archive)}: {_short_list(names)}"
    )


_PEEK_BYTES = 64 << 10  # enough for a log's first envelope and first interned string
_PEEK_PIECE = 1 << 10


def _peek(open_raw: Callable[[], BinaryIO]) -> bytes:
    """A log's first bytes, gunzipped when it is gzip data; what was read before damage.

    Read in small pieces: a damaged member shorter than :data:`_PEEK_BYTES` fails its CRC
    check on the read that reaches its end, and the bytes before that still name the log.
    """
    pieces: list[bytes] = []
    try:
        with open_raw() as raw:
            size = 0
            while size < _PEEK_BYTES:
                piece = raw.read(_PEEK_PIECE)
                if not piece:
                    break
                pieces.append(piece)
                size += len(piece)
    except (*_ZIP_ERRORS, InputError):
        pass
    data = b"".join(pieces)
    if data.startswith(b"\x1f\x8b"):
        try:
            data = zlib.decompressobj(wbits=31).decompress(data, _PEEK_BYTES)
        except zlib.error:
            return b""
    return data


def _one_process(candidates: list[_Entry], head_of: Callable[[_Entry], bytes]) -> list[_Entry]:
    """The logs in the order one process wrote them, or none when they are not one process's.

    One process writes several logs when a second trace handler opens its own (``TORCH_DTRACE``:
    draft export writes its records apart from the main log's). They share the pid, and the
    table of interned file names, which torch keeps once per process: a later log continues it
    and never defines id 0 again, as another process given the same pid would.
    """
    starts: dict[str, tuple[str, int]] = {}
    pids: set[str] = set()
    for entry in candidates:
        start = _process_start(head_of(entry))
        if start is None:
            return []
        pid, starts[entry.name] = start[0], start[1:]
        pids.add(pid)
    if len(pids) != 1:
        return []
    order = sorted(candidates, key=lambda e: (*starts[e.name], e.name))
    if any(starts[e.name][1] == 0 for e in order[1:]):
        return []
    return order


def _process_start(head: bytes) -> tuple[str, str, int] | None:
    """From a log's first bytes: the pid and time of its first record, and the id of the first
    file name it interns (-1 when none is in sight); None when no record is."""
    first: tuple[str, str] | None = None
    for line in head.decode("utf-8", "replace").split("\n"):
        match = None if line.startswith("\t") else HEADER.search(line, 0, HEADER_WINDOW)
        if match is None:  # a payload line, or not a record
            continue
        if first is None:
            first = (match["thread"], line[match.start("month") : match.end("micro")])
        if line.startswith('{"str"', match.start("json")):
            try:
                value = json.loads(line[match.start("json") :])["str"]
            except (ValueError, TypeError, KeyError):
                continue
            if isinstance(value, list) and len(value) == 2 and type(value[1]) is int:
                return (*first, value[1])
    return None if first is None else (*first, -1)


def _name_one(archive: bool) -> str:
    return "unpack the archive and name one" if archive else "name one"


def _choose_latest(candidates: list[_Entry], ignored: list[str]) -> _Choice:
    newest = max(candidates, key=lambda e: (e.mtime, e.name))
    for entry in candidates:
        if entry is not newest:
            ignored.append(f"{entry.name}: older than {newest.name} (--latest)")
    note = f"--latest: using {newest.name}, the newest of {len(candidates)} logs"
    return _Choice([(newest, _rank_of(newest.base))], ignored, [note])


def _choose_ranks(
    shown: str,
    candidates: list[_Entry],
    ranked: list[_Entry],
    ignored: list[str],
    archive: bool,
    head_of: Callable[[_Entry], bytes] | None,
) -> _Choice:
    """Every rank's log; a rank with several logs (torchrun under ``TORCH_DTRACE``: each
    rank's process writes its main log and draft export's) gets them all, in the order its
    process wrote them, when they are one process's; else the user names one."""
    by_rank: dict[int, list[_Entry]] = {}
    for entry in ranked:
        by_rank.setdefault(_rank_of(entry.base), []).append(entry)  # type: ignore[arg-type]
    for rank, entries in sorted(by_rank.items()):
        if len(entries) == 1:
            continue
        order = _one_process(entries, head_of) if head_of is not None else []
        if not order:
            names = _short_list(e.name for e in entries)
            raise InputError(
                f"{shown}: {len(entries)} logs for rank {rank} ({names}); pass --latest to use "
                f"the newest, or {_name_one(archive)}"
            )
        by_rank[rank] = order
    for entry in candidates:
        if _rank_of(entry.base) is None:
            ignored.append(f"{entry.name}: not a rank log (multi-rank input)")
    ranks = sorted(by_rank)
    note = (
        f"multi-rank input: {len(ranks)} rank logs (ranks {_short_list(map(str, ranks))}); "
        f"only rank {ranks[0]} is built for now"
    )
    chosen = [(entry, r) for r in ranks for entry in by_rank[r]]
    return _Choice(chosen, ignored, [note], multi_rank=True)


def _assemble(logs: list[LogSource], choice: _Choice, where: str) -> list[LogSource]:
    """The logs to read: one process's logs joined (all of them, or each rank's)."""
    if choice.joined:
        return [join_logs(logs, where)]
    by_rank: dict[int | None, list[LogSource]] = {}
    for log in logs:
        by_rank.setdefault(log.rank, []).append(log)
    if all(len(group) == 1 for group in by_rank.values()):
        return logs
    return [
        group[0] if len(group) == 1 else join_logs(group, f"{where} rank {rank}", rank)
        for rank, group in by_rank.items()
    ]


# ---------------------------------------------------------------------------------------------
# Files and directories


def _resolve_file(
    path: str,
    shown: str,
    label: str,
    latest: bool,
    limits: _Limits,
    size: int,
    keep_alive: object = None,
) -> ResolvedInput:
    """A single file: a log (plain or gzip) or an archive of logs."""
    head = _read_head(path, shown)
    if not head:
        raise InputError(f"{shown}: empty file")
    kind = _sniff(head)
    if kind == "zip":
        return _resolve_zip(path, shown, label, latest, limits, keep_alive)
    if kind == "7z":
        return _resolve_7z(path, shown, label, latest, limits)
    gzipped = _gzip_or_plain(shown, head, functools.partial(open, path, "rb"))
    breaks: list[str] = []
    opener = _FileOpener(path, label, gzipped, keep_alive, size, breaks)
    return ResolvedInput(logs=[LogSource(label, opener, _rank_of(label), size, breaks)])


def _scan_dir(shown: str) -> tuple[list[_Entry], list[str], list[str], int]:
    """Regular files directly in the directory; everything else is reported as ignored.

    A symlink is followed only to a file inside the directory: one leading out (to
    ``/etc/passwd``, say) would copy that file into ``raw.log`` and the shareable bundle, so
    it is skipped with a note that names it.
    """
    try:
        with os.scandir(shown) as it:
            dirents = sorted(it, key=lambda d: d.name)
        root = os.path.realpath(shown)
    except OSError as exc:
        raise InputError(f"{shown}: cannot list the directory ({_reason(exc)})") from exc
    files: list[_Entry] = []
    ignored: list[str] = []
    notes: list[str] = []
    for d in dirents:
        try:
            path = d.path
            if d.is_symlink():
                path = os.path.realpath(d.path)
                if not is_inside(path, root):
                    notes.append(f"{d.path}: a link to outside the folder; skipped")
                    continue
            if d.is_dir():
                ignored.append(f"{d.name}/: directory (not searched)")
            elif d.is_file():
                st = os.stat(path)
                files.append(_Entry(d.name, st.st_size, st.st_mtime, path))
            elif d.is_symlink():
                ignored.append(f"{d.name}: broken symlink")
            else:
                ignored.append(f"{d.name}: not a regular file")
        except OSError as exc:
            ignored.append(f"{d.name}: {_reason(exc)}")
    return files, ignored, notes, len(dirents)


def is_inside(path: str, root: str) -> bool:
    """Whether the resolved ``path`` is ``root`` or below it (both already resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _resolve_dir(shown: str, latest: bool) -> ResolvedInput:
    files, ignored, skipped, looked_at = _scan_dir(shown)
    choice = _choose(
        shown,
        files,
        looked_at,
        latest,
        archive=False,
        skipped=skipped,
        head_of=lambda entry: _peek(functools.partial(open, entry.path, "rb")),
    )
    logs = []
    for entry, rank in choice.chosen:
        where = os.path.join(shown, entry.name)
        head = _read_head(entry.path, where)
        gzipped = _gzip_or_plain(where, head, functools.partial(open, entry.path, "rb"))
        breaks: list[str] = []
        opener = _FileOpener(entry.path, entry.name, gzipped, None, entry.size, breaks)
        logs.append(LogSource(entry.name, opener, rank, entry.size, breaks))
    return ResolvedInput(
        logs=_assemble(logs, choice, os.path.basename(os.path.abspath(shown)) or shown),
        ignored=sorted(ignored + choice.ignored),
        notes=skipped + choice.notes,
        is_multi_rank=choice.multi_rank,
        skipped=skipped,
    )


# ---------------------------------------------------------------------------------------------
# stdin and pipes


def _resolve_stdin(latest: bool, limits: _Limits) -> ResolvedInput:
    stdin = sys.stdin
    if stdin is None:
        raise InputError(f"{STDIN_NAME}: no standard input")
    stream = getattr(stdin, "buffer", stdin)
    if getattr(stream, "isatty", lambda: False)():
        raise InputError(f"{STDIN_NAME}: is a terminal; pipe a trace log in or name a file")
    return _resolve_stream(stream, STDIN_NAME, STDIN_NAME, latest, limits)


def _resolve_stream(
    stream: BinaryIO, shown: str, label: str, latest: bool, limits: _Limits
) -> ResolvedInput:
    """Buffer a read-once stream in a temporary file, then treat it like any file."""
    scratch = _Scratch()
    target = scratch.path / "input"
    try:
        with open(target, "wb") as out:
            size = _copy(stream, out, shown)
        resolved = _resolve_file(str(target), shown, label, latest, limits, size, scratch)
    except BaseException:
        scratch.close()
        raise
    resolved._scratch.append(scratch)
    return resolved


def _copy(src: BinaryIO, dst: BinaryIO, shown: str) -> int:
    total = 0
    try:
        while chunk := src.read(_CHUNK):
            dst.write(chunk)
            total += len(chunk)
    except OSError as exc:
        raise InputError(f"{shown}: cannot buffer the input ({_reason(exc)})") from exc
    return total


# ---------------------------------------------------------------------------------------------
# Archives


def _check_member(shown: str, name: str, *, symlink: bool) -> None:
    """Refuse names that could land outside a directory, and symlinks, as tar's data filter does."""
    parts = re.split(r"[\\/]", name)
    if (
        "\0" in name
        or name.startswith(("/", "\\"))
        or re.match(r"[A-Za-z]:", name)
        or ".." in parts
    ):
        raise InputError(f"{shown}: member {name!r} would escape; refused")
    if symlink:
        raise InputError(f"{shown}: member {name!r} is a symlink; refused")


def _check_entry_count(shown: str, count: int, limits: _Limits) -> None:
    if count > limits.max_entries:
        raise InputError(
            f"{shown}: {count} entries, over the limit of {limits.max_entries}; refused"
        )


def archive_budget(path: str, limits: _Limits) -> int:
    """Most bytes the logs of the archive at ``path`` may unpack to, every layer counted."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return min(limits.max_unpacked_bytes, max(MAX_RATIO * size, RATIO_FLOOR))


def _check_unpacked(shown: str, chosen: list[tuple[_Entry, int | None]], budget: int) -> None:
    total = sum(entry.size for entry, _ in chosen)
    if total > budget:
        raise InputError(
            f"{shown}: the logs would unpack to {_human(total)}, over the "
            f"{_human(budget)} limit; refused"
        )


def _unpacked_size(opener: Callable[[], BinaryIO]) -> int:
    """Gunzip a log inside an archive once, without parsing it: a bomb is refused in the time
    decompression takes (not parsing), and the progress bar gets the true size."""
    size = 0
    with opener() as stream:
        while chunk := stream.read(_CHUNK):
            size += len(chunk)
    return size


def _inner_limit(budget: int, chosen: list[tuple[_Entry, int | None]], entry: _Entry) -> int:
    """What a gzip log inside an archive may unpack to: the budget less the other logs."""
    return budget - sum(other.size for other, _ in chosen if other is not entry)


def _check_unique(shown: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"{shown}: member {name!r} appears twice; refused")
        seen.add(name)


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    try:
        return time.mktime((*info.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return 0.0


def _resolve_zip(
    path: str, shown: str, label: str, latest: bool, limits: _Limits, keep_alive: object
) -> ResolvedInput:
    try:
        with zipfile.ZipFile(path) as zf:
            return _resolve_open_zip(zf, path, shown, label, latest, limits, keep_alive)
    except _ZIP_ERRORS as exc:
        raise InputError(f"{shown}: corrupt or unsupported zip archive ({exc})") from exc


def _resolve_open_zip(
    zf: zipfile.ZipFile,
    path: str,
    shown: str,
    label: str,
    latest: bool,
    limits: _Limits,
    keep_alive: object,
) -> ResolvedInput:
    infos = zf.infolist()
    _check_entry_count(shown, len(infos), limits)
    for info in infos:
        _check_member(shown, info.filename, symlink=stat.S_ISLNK(info.external_attr >> 16))
    members = [i for i in infos if not i.is_dir()]
    _check_unique(shown, [i.filename for i in members])
    files = [_Entry(i.filename, i.file_size, _zip_mtime(i)) for i in members]
    choice = _choose(
        shown,
        files,
        len(members),
        latest,
        archive=True,
        head_of=lambda entry: _peek(lambda: zf.open(entry.name)),
    )
    budget = archive_budget(path, limits)
    _check_unpacked(shown, choice.chosen, budget)
    logs = []
    for entry, rank in choice.chosen:
        display = f"{label}:{entry.name}"
        info = zf.getinfo(entry.name)
        if info.flag_bits & 0x1:
            raise InputError(f"{display}: encrypted zip members are not supported")
        try:
            with zf.open(info) as member:
                head = member.read(_HEAD_BYTES)
        except _DATA_ERRORS as exc:
            raise InputError(f"{display}: the data breaks off before any record ({exc})") from exc
        gzipped = _gzip_or_plain(display, head, lambda i=info: zf.open(i))
        breaks: list[str] = []
        limit = _inner_limit(budget, choice.chosen, entry)
        opener = _ZipMemberOpener(
            path, entry.name, display, gzipped, entry.size, keep_alive, breaks, limit
        )
        size = _unpacked_size(opener) if gzipped else entry.size
        logs.append(LogSource(display, opener, rank, size, breaks))
    return ResolvedInput(
        logs=_assemble(logs, choice, label),
        ignored=choice.ignored,
        notes=choice.notes,
        is_multi_rank=choice.multi_rank,
    )


def _resolve_7z(path: str, shown: str, label: str, latest: bool, limits: _Limits) -> ResolvedInput:
    from . import sevenzip  # py7zr is slow to import: only for 7z archives

    try:
        with sevenzip.open_archive(path) as sz:
            return _resolve_open_7z(sz, path, shown, label, latest, limits)
    except (*_DATA_ERRORS, *sevenzip.ERRORS) as exc:
        raise InputError(f"{shown}: corrupt or unsupported 7z archive ({exc})") from exc


def _resolve_open_7z(
    sz: Any, path: str, shown: str, label: str, latest: bool, limits: _Limits
) -> ResolvedInput:
    if sz.needs_password():
        raise InputError(f"{shown}: encrypted 7z archives are not supported")
    infos = sz.list()
    _check_entry_count(shown, len(infos), limits)
    for fi in infos:
        _check_member(shown, fi.filename, symlink=fi.is_symlink)
        if not (fi.is_file or fi.is_directory):
            raise InputError(f"{shown}: member {fi.filename!r} is not a regular file; refused")
    members = [fi for fi in infos if fi.is_file]
    _check_unique(shown, [fi.filename for fi in members])
    files = [
        _Entry(fi.filename, fi.uncompressed, fi.creationtime.timestamp() if fi.creationtime else 0)
        for fi in members
    ]
    choice = _choose(shown, files, len(members), latest, archive=True)
    budget = archive_budget(path, limits)
    _check_unpacked(shown, choice.chosen, budget)
    scratch = _Scratch()
    try:
        names = [e.name for e, _ in choice.chosen]
        extracted, cut = _extract_7z(sz, shown, names, scratch, budget)
        logs = []
        notes = list(choice.notes)
        for entry, rank in choice.chosen:
            if entry.name not in extracted:
                notes.append(f"{entry.name}: not read, the archive breaks off before it")
                continue
            display = f"{label}:{entry.name}"
            file = str(extracted[entry.name])
            head = _read_head(file, display)
            gzipped = _gzip_or_plain(display, head, functools.partial(open, file, "rb"))
            breaks = [cut[entry.name]] if entry.name in cut else []
            limit = _inner_limit(budget, choice.chosen, entry)
            opener = _FileOpener(file, display, gzipped, scratch, None, breaks, limit)
            size = _unpacked_size(opener) if gzipped else entry.size
            logs.append(LogSource(display, opener, rank, size, breaks))
    except BaseException:
        scratch.close()
        raise
    return ResolvedInput(
        logs=logs,
        ignored=choice.ignored,
        notes=notes,
        is_multi_rank=choice.multi_rank,
        _scratch=[scratch],
    )


def _extract_7z(
    sz: Any, shown: str, names: list[str], scratch: _Scratch, budget: int
) -> tuple[dict[str, Path], dict[str, str]]:
    """Extract the named members into ``scratch``: member name → file on disk, and member name
    → where it breaks off, for the member a damaged archive cut short (members after it are
    left out; none read at all is an :class:`InputError`)."""
    from . import sevenzip

    try:
        extracted = sevenzip.extract(
            sz, names, scratch.path / "extract", scratch.path, budget, _DATA_ERRORS
        )
    except sevenzip.OverBudget as exc:
        raise InputError(
            f"{shown}: unpacks to more than the {_human(budget)} limit; refused"
        ) from exc
    except sevenzip.Damaged as damaged:
        return _extracted_before(shown, names, damaged)
    files: dict[str, Path] = {}
    for name, file in extracted.items():
        if file is None:
            raise InputError(f"{shown}: could not extract member {name!r}")
        files[name] = file
    return files, {}


def _extracted_before(
    shown: str, names: list[str], damaged: Any
) -> tuple[dict[str, Path], dict[str, str]]:
    """What a failed extraction left (``damaged``, a :class:`sevenzip.Damaged`): the members
    written before the error, and the one it hit (the last one py7zr began), cut where the
    error stopped it or whole but not matching its CRC. A member with no byte written is left
    out."""
    from . import sevenzip

    written = {name: file for name, file in damaged.written.items() if file is not None}
    hit = damaged.hit
    name = next((n for n, f in written.items() if f == hit), None)
    size = hit.stat().st_size if hit is not None and hit.exists() else 0
    if name is not None and size == 0:
        del written[name]
    exc = damaged.cause
    if not written:
        member = f"member {names[0]!r}" if len(names) == 1 else "the members"
        raise InputError(
            f"{shown}: corrupt 7z archive: {member} could not be decompressed ({exc}), "
            "not even the start"
        ) from exc
    if name not in written:
        return written, {}
    if isinstance(exc, sevenzip.CRC_ERRORS):
        return written, {name: CRC_MISMATCH}
    what = f"the 7z data is damaged ({exc or type(exc).__name__})"
    return written, {name: f"{what} after {size:,} bytes of log{SHOWS_WHAT_CAME_BEFORE}"}

"""7z archives as trace inputs (see :mod:`.source`), kept apart because py7zr takes longer to
import than the rest of the reader: only a build that opens a .7z pays for it.

py7zr has no streaming member API, so the chosen members are extracted into the input's
scratch folder through a writer that stops past the unpacked-size budget. py7zr writes what
each block of compressed data decoded before it decodes the next, so a damaged archive leaves
every member before the damage whole and the one it hit cut short, and the report is built
from those. Its decoder reads 1 MiB blocks (tens of megabytes of log, often a whole trace,
lost at a break), and takes no block size: extraction sets the module default it reads.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import py7zr
import py7zr.compressor
import py7zr.exceptions
import py7zr.io

from .source import (
    _DATA_ERRORS,
    CRC_MISMATCH,
    InputError,
    LogSource,
    ResolvedInput,
    _check_entry_count,
    _check_member,
    _check_unique,
    _check_unpacked,
    _choose,
    _Entry,
    _FileOpener,
    _gzip_or_plain,
    _human,
    _inner_limit,
    _Limits,
    _read_head,
    _Scratch,
    _unpacked_size,
    archive_budget,
)
from .stats import SHOWS_WHAT_CAME_BEFORE

_7Z_ERRORS = (
    *_DATA_ERRORS,
    py7zr.exceptions.ArchiveError,
    py7zr.exceptions.PasswordRequired,
    py7zr.exceptions.AbsolutePathError,
    KeyError,
    IndexError,
    ValueError,
    TypeError,
)


#: Compressed bytes py7zr's decoder reads (and decodes) at a time: a decoding error loses
#: that block's output.
_BLOCK = 1 << 10


class _OverBudget(Exception):
    pass


class _CappedWriter(py7zr.io.Py7zIO):
    """Writes one extracted 7z member to disk, charging every byte to the shared budget."""

    def __init__(self, target: Path, factory: _CappedWriterFactory) -> None:
        self._file = open(target, "wb")  # noqa: SIM115 - py7zr calls close()
        self._factory = factory
        self._size = 0

    def write(self, s: bytes | bytearray) -> int:
        self._factory.charge(len(s))
        self._size += len(s)
        return self._file.write(s)

    def read(self, size: int | None = None) -> bytes:
        return b""

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def seekable(self) -> bool:
        return False  # tells py7zr not to rewind us on close

    def flush(self) -> None:
        self._file.flush()

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        self._file.close()


class _CappedWriterFactory(py7zr.io.WriterFactory):
    """Gives py7zr numbered files in our scratch directory and stops it past the byte budget."""

    def __init__(self, directory: Path, budget: int) -> None:
        self.directory = directory
        self.budget = budget
        self.written = 0
        self.files: dict[str, Path] = {}
        self._lock = threading.Lock()

    def create(self, filename: str) -> py7zr.io.Py7zIO:
        with self._lock:
            target = self.directory / f"member-{len(self.files)}"
            self.files[filename] = target
        return _CappedWriter(target, self)

    def charge(self, n: int) -> None:
        with self._lock:
            self.written += n
            if self.written > self.budget:
                raise _OverBudget


def resolve_7z(path: str, shown: str, label: str, latest: bool, limits: _Limits) -> ResolvedInput:
    try:
        with py7zr.SevenZipFile(path, "r") as sz:
            return _resolve_open_7z(sz, path, shown, label, latest, limits)
    except _7Z_ERRORS as exc:
        raise InputError(f"{shown}: corrupt or unsupported 7z archive ({exc})") from exc


def _resolve_open_7z(
    sz: py7zr.SevenZipFile, path: str, shown: str, label: str, latest: bool, limits: _Limits
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
    sz: py7zr.SevenZipFile, shown: str, names: list[str], scratch: _Scratch, budget: int
) -> tuple[dict[str, Path], dict[str, str]]:
    """Extract the named members into ``scratch``: member name → file on disk, and member name
    → where it breaks off, for the member a damaged archive cut short (members after it are
    left out; none read at all is an :class:`InputError`)."""
    root = scratch.path / "extract"
    root.mkdir()
    factory = _CappedWriterFactory(scratch.path, budget)
    try:
        with _small_blocks():
            sz.extract(path=root, targets=names, factory=factory)
    except _OverBudget as exc:
        raise InputError(
            f"{shown}: unpacks to more than the {_human(budget)} limit; refused"
        ) from exc
    except _7Z_ERRORS as exc:
        return _extracted_before(shown, names, root, factory, exc)
    return _extracted(shown, names, root, factory), {}


@contextlib.contextmanager
def _small_blocks() -> Iterator[None]:
    """Have py7zr's decoders read :data:`_BLOCK` bytes at a time (see the module's doc)."""
    default = py7zr.compressor.get_default_blocksize
    py7zr.compressor.get_default_blocksize = lambda: _BLOCK
    try:
        yield
    finally:
        py7zr.compressor.get_default_blocksize = default


def _extracted_before(
    shown: str, names: list[str], root: Path, factory: _CappedWriterFactory, exc: Exception
) -> tuple[dict[str, Path], dict[str, str]]:
    """What a failed extraction left: the members written before the error, and the one it hit
    (the last one py7zr began), cut where the error stopped it or whole but not matching its
    CRC. A member with no byte written is left out."""
    written = _extracted(shown, names, root, factory, partial=True)
    hit = next(reversed(factory.files.values()), None)  # the member being written
    name = next((n for n, f in written.items() if f == hit), None)
    size = hit.stat().st_size if hit is not None and hit.exists() else 0
    if name is not None and size == 0:
        del written[name]
    if not written:
        member = f"member {names[0]!r}" if len(names) == 1 else "the members"
        raise InputError(
            f"{shown}: corrupt 7z archive: {member} could not be decompressed ({exc}), "
            "not even the start"
        ) from exc
    if name not in written:
        return written, {}
    if isinstance(exc, py7zr.exceptions.CrcError):
        return written, {name: CRC_MISMATCH}
    what = f"the 7z data is damaged ({exc or type(exc).__name__})"
    return written, {name: f"{what} after {size:,} bytes of log{SHOWS_WHAT_CAME_BEFORE}"}


def _extracted(
    shown: str,
    names: list[str],
    root: Path,
    factory: _CappedWriterFactory,
    *,
    partial: bool = False,
) -> dict[str, Path]:
    """Member name → the file py7zr wrote it to (with ``partial``, the members it reached)."""
    extracted: dict[str, Path] = {}
    for name in names:
        # py7zr names the output after the member, below `root`, with "./" parts dropped.
        parts = [p for p in PurePosixPath(name).parts if p != "."]
        key = root.joinpath(*parts).as_posix()
        file = factory.files.get(key)
        if file is None and len(names) == 1 and len(factory.files) == 1:
            file = next(iter(factory.files.values()))
        if file is None:
            if partial:
                continue
            raise InputError(f"{shown}: could not extract member {name!r}")
        extracted[name] = file
    return extracted

"""7z archives as trace inputs (see :mod:`.source`), kept apart because py7zr takes longer to
import than the rest of the reader: only a build that opens a .7z pays for it.

py7zr has no streaming member API, so the chosen members are extracted into the input's
scratch folder through a writer that stops past the unpacked-size budget.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path, PurePosixPath

import py7zr
import py7zr.exceptions
import py7zr.io

from .source import (
    _DATA_ERRORS,
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
        extracted = _extract_7z(sz, shown, [e.name for e, _ in choice.chosen], scratch, budget)
        logs = []
        for entry, rank in choice.chosen:
            display = f"{label}:{entry.name}"
            file = str(extracted[entry.name])
            head = _read_head(file, display)
            gzipped = _gzip_or_plain(display, head, functools.partial(open, file, "rb"))
            breaks: list[str] = []
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
        notes=choice.notes,
        is_multi_rank=choice.multi_rank,
        _scratch=[scratch],
    )


def _extract_7z(
    sz: py7zr.SevenZipFile, shown: str, names: list[str], scratch: _Scratch, budget: int
) -> dict[str, Path]:
    """Extract the named members into ``scratch``; returns member name → file on disk."""
    root = scratch.path / "extract"
    root.mkdir()
    factory = _CappedWriterFactory(scratch.path, budget)
    try:
        sz.extract(path=root, targets=names, factory=factory)
    except _OverBudget as exc:
        raise InputError(
            f"{shown}: unpacks to more than the {_human(budget)} limit; refused"
        ) from exc
    extracted: dict[str, Path] = {}
    for name in names:
        # py7zr names the output after the member, below `root`, with "./" parts dropped.
        parts = [p for p in PurePosixPath(name).parts if p != "."]
        key = root.joinpath(*parts).as_posix()
        file = factory.files.get(key)
        if file is None and len(names) == 1 and len(factory.files) == 1:
            file = next(iter(factory.files.values()))
        if file is None:
            raise InputError(f"{shown}: could not extract member {name!r}")
        extracted[name] = file
    return extracted

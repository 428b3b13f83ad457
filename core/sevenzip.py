"""py7zr behind the few calls :mod:`.source` makes to read a 7z input, kept apart because
py7zr takes longer to import than the rest of the reader: only a build that opens a .7z
pays for it. What is accepted (members, sizes, limits) is decided in :mod:`.source`.

py7zr has no streaming member API, so the chosen members are extracted into the input's
scratch folder through a writer that stops past the unpacked-size budget.
"""

from __future__ import annotations

import threading
from pathlib import Path, PurePosixPath

import py7zr
import py7zr.exceptions
import py7zr.io

#: What py7zr raises on a damaged or unsupported archive.
ERRORS = (
    py7zr.exceptions.ArchiveError,
    py7zr.exceptions.PasswordRequired,
    py7zr.exceptions.AbsolutePathError,
    KeyError,
    IndexError,
    ValueError,
    TypeError,
)


class OverBudget(Exception):
    """Extraction passed the unpacked-size budget."""


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
                raise OverBudget


def open_archive(path: str) -> py7zr.SevenZipFile:
    return py7zr.SevenZipFile(path, "r")


def extract(
    sz: py7zr.SevenZipFile, names: list[str], root: Path, spool: Path, budget: int
) -> dict[str, Path | None]:
    """Extract the named members below ``root`` (files numbered in ``spool``), at most
    ``budget`` bytes (else :class:`OverBudget`); member name → its file (None: not found)."""
    root.mkdir()
    factory = _CappedWriterFactory(spool, budget)
    sz.extract(path=root, targets=names, factory=factory)
    extracted: dict[str, Path | None] = {}
    for name in names:
        # py7zr names the output after the member, below `root`, with "./" parts dropped.
        parts = [p for p in PurePosixPath(name).parts if p != "."]
        file = factory.files.get(root.joinpath(*parts).as_posix())
        if file is None and len(names) == 1 and len(factory.files) == 1:
            file = next(iter(factory.files.values()))
        extracted[name] = file
    return extracted

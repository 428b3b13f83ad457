"""py7zr behind the few calls :mod:`.source` makes to read a 7z input, kept apart because
py7zr takes longer to import than the rest of the reader: only a build that opens a .7z
pays for it. What is accepted (members, sizes, limits) is decided in :mod:`.source`.

py7zr has no streaming member API, so the chosen members are extracted into the input's
scratch folder through a writer that stops past the unpacked-size budget. py7zr writes what
each block of compressed data decoded before it decodes the next, so a damaged archive leaves
every member before the damage whole and the one it hit cut short (:class:`Damaged`). Its
decoder reads 1 MiB blocks (tens of megabytes of log, often a whole trace, lost at a break)
and takes no block size: extraction sets the module default it reads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import py7zr
import py7zr.compressor
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


#: Compressed bytes py7zr's decoder reads (and decodes) at a time: a decoding error loses
#: that block's output.
_BLOCK = 1 << 10


#: What py7zr raises when a member's data does not match its CRC.
CRC_ERRORS = (py7zr.exceptions.CrcError,)


class OverBudget(Exception):
    """Extraction passed the unpacked-size budget."""


class Damaged(Exception):
    """Extraction stopped at damaged data (``cause``): ``written`` maps each named member
    to the file py7zr wrote it to (None: not reached), ``hit`` is the file of the member
    being written when it stopped (None: none begun)."""

    def __init__(
        self, cause: BaseException, written: dict[str, Path | None], hit: Path | None
    ) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.written = written
        self.hit = hit


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
    sz: py7zr.SevenZipFile,
    names: list[str],
    root: Path,
    spool: Path,
    budget: int,
    data_errors: tuple[type[BaseException], ...] = (),
) -> dict[str, Path | None]:
    """Extract the named members below ``root`` (files numbered in ``spool``), at most
    ``budget`` bytes (else :class:`OverBudget`); member name → its file (None: not found).
    py7zr's errors and ``data_errors`` while extracting raise :class:`Damaged`."""
    root.mkdir()
    factory = _CappedWriterFactory(spool, budget)
    try:
        with _small_blocks():
            sz.extract(path=root, targets=names, factory=factory)
    except OverBudget:
        raise
    except (*ERRORS, *data_errors) as exc:
        hit = next(reversed(factory.files.values()), None)  # the member being written
        raise Damaged(exc, _files(names, root, factory), hit) from exc
    return _files(names, root, factory)


def _files(names: list[str], root: Path, factory: _CappedWriterFactory) -> dict[str, Path | None]:
    extracted: dict[str, Path | None] = {}
    for name in names:
        # py7zr names the output after the member, below `root`, with "./" parts dropped.
        parts = [p for p in PurePosixPath(name).parts if p != "."]
        file = factory.files.get(root.joinpath(*parts).as_posix())
        if file is None and len(names) == 1 and len(factory.files) == 1:
            file = next(iter(factory.files.values()))
        extracted[name] = file
    return extracted


@contextlib.contextmanager
def _small_blocks() -> Iterator[None]:
    """Have py7zr's decoders read :data:`_BLOCK` bytes at a time (see the module's doc)."""
    default = py7zr.compressor.get_default_blocksize
    py7zr.compressor.get_default_blocksize = lambda: _BLOCK
    try:
        yield
    finally:
        py7zr.compressor.get_default_blocksize = default

"""A content-addressed payload store on disk: the trace's payloads stay out of memory.

Payloads are appended once per distinct content (keyed by their MD5) to one pack file, and
read back by offset only when a page or an output file needs them. One file, not one file
per payload: a recompile storm has tens of thousands of payloads, and creating a file each
costs more than reading the whole trace.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, NamedTuple

from .cleanup import make_scratch, remove_scratch, remove_scratch_soon

#: How many distinct payloads :meth:`PayloadStore.put` recognises at least (and at most twice
#: as many): the most recent ones. A trace of a million distinct artifacts kept a few hundred
#: bytes each in the index; a payload logged again after that many others is stored again.
RECOGNISED = 1 << 16


class PayloadRef(NamedTuple):
    """A payload in the store: its MD5, size in bytes and pack offset."""

    md5: str
    size: int
    offset: int


class PayloadStore:
    """Payloads appended to ``<root>/payloads.pack``, indexed by the MD5 of their bytes."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, owned: bool = False) -> None:
        """``root``: the store's folder (default: a new temporary one, removed by
        :meth:`close`); ``owned``: remove a given ``root`` on close too."""
        self._owned = root is None or owned
        self.root = make_scratch("store") if root is None else Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.pack_path = self.root / "payloads.pack"
        #: The pack's path as text: one string shared by the thousands of code blocks that
        #: point into it (``str(pack_path)`` for each was 100 bytes apiece).
        self.pack_file = str(self.pack_path)
        self._writer: BinaryIO | None = open(self.pack_path, "ab")  # noqa: SIM115
        self._size = self._writer.seek(0, os.SEEK_END)
        self._reader: BinaryIO | None = None
        self._index: dict[str, PayloadRef] = {}  # the payloads put most recently
        self._older: dict[str, PayloadRef] = {}  # the RECOGNISED before them
        self._derived: dict[tuple[str, Callable[[str], str]], PayloadRef] = {}  # see derived
        self._dirty = False

    def put(self, text: str, md5: str | None = None) -> PayloadRef:
        return self.put_bytes(text.encode("utf-8"), md5)

    def put_bytes(self, data: bytes, md5: str | None = None) -> PayloadRef:
        """Store UTF-8 ``data`` (``md5`` is its digest, when the caller already has it)."""
        digest = md5 or hashlib.md5(data).hexdigest()
        ref = self._index.get(digest) or self._older.get(digest)
        if ref is None:
            assert self._writer is not None, "the store is closed"
            offset = self._size  # not tell(): a system call per payload
            self._writer.write(data)
            self._size += len(data)
            self._dirty = True
            if len(self._index) >= RECOGNISED:
                self._older, self._index = self._index, {}
            ref = self._index[digest] = PayloadRef(digest, len(data), offset)
        return ref

    def derived(self, ref: PayloadRef, make: Callable[[str], str]) -> PayloadRef:
        """The text ``make`` makes of the payload's, stored: made once per distinct payload
        while the store recognises payloads. An artifact's pretty-printed JSON is wanted
        while the trace is read (to highlight it), for its tlparse file and for its page."""
        key = (ref.md5, make)
        found = self._derived.get(key)
        if found is None:
            found = self.put(make(self.read(ref)))
            if len(self._derived) >= RECOGNISED:
                self._derived = {}
            self._derived[key] = found
        return found

    def forget_index(self) -> None:
        """Stop recognising contents already stored: a later :meth:`put` of the same
        text appends it again. The index is only worth its memory (a few hundred bytes per
        payload) while the trace is read and its pages rendered; a site build calls this
        before writing pages."""
        self._index = {}
        self._older = {}
        self._derived = {}

    def flush(self) -> None:
        """Make everything put so far readable by other processes (highlight workers)."""
        if self._dirty and self._writer is not None:
            self._writer.flush()
            self._dirty = False

    def read_bytes(self, ref: PayloadRef) -> bytes:
        self.flush()
        if self._reader is None:
            self._reader = open(self.pack_path, "rb")  # noqa: SIM115
        self._reader.seek(ref.offset)
        return self._reader.read(ref.size)

    def read(self, ref: PayloadRef) -> str:
        return self.read_bytes(ref).decode("utf-8")

    def copy_to(self, ref: PayloadRef, dest: str | os.PathLike[str]) -> None:
        """Write the payload to ``dest`` (replacing what is there; its folder exists)."""
        self.flush()
        if self._reader is None:
            self._reader = open(self.pack_path, "rb")  # noqa: SIM115
        with open(dest, "wb") as target:  # (the reader's position is left alone)
            copy_range(self._reader.fileno(), ref.offset, ref.size, target)

    def spill_path(self, name: str) -> Path:
        """A scratch file beside the pack (raw.jsonl and chromium events are spilled here)."""
        return self.root / name

    def close(self) -> None:
        self._close(remove_scratch_soon)

    def __del__(self) -> None:  # best effort: temporary stores do not outlive the model
        # removed here and now: the removal thread's queue and lock are not safe to use
        # from a finalizer, which may run while this thread holds them
        with contextlib.suppress(Exception):
            self._close(remove_scratch)

    def _close(self, remove: Callable[[Path], None]) -> None:
        for handle in (self._writer, self._reader):
            if handle is not None:
                handle.close()
        self._writer = self._reader = None
        if self._owned:
            self._owned = False
            remove(self.root)


def copy_range(source: int, offset: int, size: int, target: BinaryIO) -> None:
    """Write ``size`` bytes of the file open as ``source`` (a descriptor), from ``offset``,
    to ``target`` (a file open for writing), copied by the kernel where it can
    (``sendfile``): a big trace's pages and tlparse files are hundreds of megabytes, which
    reading into this process and writing out again costs several times as much."""
    target.flush()
    sendfile = getattr(os, "sendfile", None)  # not on Windows; to files only on Linux
    with contextlib.suppress(OSError):
        while sendfile is not None and size > 0:
            sent = sendfile(target.fileno(), source, offset, size)
            if sent == 0:
                break  # the file ends early: said below
            offset, size = offset + sent, size - sent
    while size > 0:
        chunk = os.pread(source, min(size, 1 << 20), offset)
        if not chunk:
            raise OSError(f"the file ends {size} bytes before the {offset + size} copied")
        target.write(chunk)
        offset, size = offset + len(chunk), size - len(chunk)


def read_slice(path: str | os.PathLike[str], offset: int, size: int) -> bytes:
    """Read one payload from a pack file (used by worker processes)."""
    with open(path, "rb") as pack:
        pack.seek(offset)
        return pack.read(size)

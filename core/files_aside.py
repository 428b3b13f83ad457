"""Many small files written by a helper process while the build goes on.

A recompile storm's tlparse files are thousands of small files, and creating a file costs the
kernel more than tlsite spends on most of them (a fifth to a third of a storm's build
process). :class:`FilesAside` hands each file to a helper process (:mod:`.worker`) that
copies it out of the payload store's pack file, or writes its text, while the build process
renders the pages; the files are the bytes the build process would have written.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection

from .store import copy_range
from .worker import WorkerProcess

_SERVICE = "tlsite.core.files_aside:_write_files"


class FilesAside:
    """Files of a site written by a helper process, in the order they are handed over."""

    def __init__(self, pack: str) -> None:
        """``pack``: the payload store's pack file, which :meth:`copy` copies from (what it
        holds must be flushed before it is named)."""
        self._worker = WorkerProcess(_SERVICE, pack)

    def folder(self, path: str) -> None:
        """Make the folder ``path`` (and its parents, if missing)."""
        self._worker.send(("folder", path, None))

    def copy(self, dest: str, offset: int, size: int) -> None:
        """Write ``size`` bytes of the pack from ``offset`` to ``dest``."""
        self._worker.send(("copy", dest, (offset, size)))

    def text(self, dest: str, text: str) -> None:
        """Write ``text`` to ``dest`` (UTF-8)."""
        self._worker.send(("text", dest, text))

    def finish(self) -> None:
        """Wait until every file is written; ``OSError`` for the first that could not be."""
        self._worker.end_input()
        try:
            failure = self._worker.receive()
        except (EOFError, OSError) as error:
            failure = f"the helper process writing the files stopped ({error!r})"
        finally:
            self._worker.close()
        if failure is not None:
            raise OSError(failure)

    def stop(self) -> None:
        """Stop the helper now (the build failed)."""
        self._worker.kill()


def _write_files(inbox: Connection, outbox: Connection, pack: str) -> None:
    """Helper side: write each file named in ``inbox``; answer None, or what failed first
    (names are read to the end, so that the build process never blocks on a full pipe)."""
    failure = None
    with open(pack, "rb") as source:
        while True:
            try:
                kind, path, what = inbox.recv()
            except EOFError:
                break
            if failure is not None:
                continue
            try:
                if kind == "folder":
                    os.makedirs(path, exist_ok=True)
                elif kind == "copy":
                    offset, size = what
                    with open(path, "wb") as target:
                        copy_range(source.fileno(), offset, size, target)
                else:
                    with open(path, "w", encoding="utf-8") as target:
                        target.write(what)
            except OSError as error:
                failure = f"{path}: {error}"
    outbox.send(failure)

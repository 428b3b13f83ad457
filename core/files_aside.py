"""Many small files written by a helper process while the build goes on.

A recompile storm's tlparse files are thousands of small files, and creating a file costs the
kernel more than tlsite spends on most of them, in series with the build's own work.
:class:`FilesAside` hands each file to a helper process (:mod:`.worker`) that
copies it out of the payload store's pack file, or writes its text, while the build process
renders the pages; the files are the bytes the build process would have written.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from .store import copy_range
from .worker import WorkerProcess

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

_SERVICE = "tlsite.core.files_aside:_write_files"


#: Files handed to the helper in one message: a message apiece woke the thread that feeds
#: the helper's pipe once per file.
BATCH = 256


def write_text(path: str, text: str) -> None:
    """Write ``text`` to the file ``path`` as UTF-8 (a tlparse file, here or in the helper)."""
    with open(path, "w", encoding="utf-8") as target:
        target.write(text)


class FilesAside:
    """Files of a site written by a helper process, in the order they are handed over."""

    def __init__(self, pack: str, root: str) -> None:
        """``pack``: the payload store's pack file, which :meth:`copy` copies from (what it
        holds must be flushed before it is named); ``root``: the folder every file goes
        below, which must exist (the helper never makes it again once it is gone)."""
        self._worker = WorkerProcess(_SERVICE, pack, root)
        self._batch: list[tuple[str, str, object]] = []
        self._ended = False

    def _hand(self, kind: str, path: str, what: object) -> None:
        self._batch.append((kind, path, what))
        if len(self._batch) >= BATCH:
            self._worker.send(self._batch)
            self._batch = []

    def folder(self, path: str) -> None:
        """Make the folder ``path`` (and its parents below the root, if missing)."""
        self._hand("folder", path, None)

    def copy(self, dest: str, offset: int, size: int) -> None:
        """Write ``size`` bytes of the pack from ``offset`` to ``dest``."""
        self._hand("copy", dest, (offset, size))

    def text(self, dest: str, text: str) -> None:
        """Write ``text`` to ``dest`` (UTF-8)."""
        self._hand("text", dest, text)

    def end(self) -> None:
        """Hand nothing more: the helper answers once every file is written (:meth:`done`)."""
        if self._batch:
            self._worker.send(self._batch)
            self._batch = []
        if not self._ended:
            self._ended = True
            self._worker.end_input()

    def done(self) -> bool:
        """Whether the helper has answered, after :meth:`end` (then :meth:`finish` does not
        wait)."""
        return self._ended and self._worker.answers.poll()

    def finish(self) -> None:
        """Wait until every file is written; ``OSError`` for the first that could not be."""
        self.end()
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


def _write_files(inbox: Connection, outbox: Connection, pack: str, root: str) -> None:
    """Helper side: write each file of each batch read from ``inbox``; answer None, or what
    failed first (batches are read to the end: the build process never blocks on a full pipe)."""
    failure = None
    with open(pack, "rb") as source:
        while True:
            try:
                batch = inbox.recv()
            except EOFError:
                break
            if failure is None:
                failure = _write_batch(batch, source.fileno(), root)
    outbox.send(failure)


def _write_batch(batch: list[tuple[str, str, Any]], source: int, root: str) -> str | None:
    """Write the files of ``batch``, up to the first that fails: then what failed."""
    for kind, path, what in batch:
        try:
            if kind == "folder":
                _make_below(root, path)
            elif kind == "copy":
                offset, size = what
                with open(path, "wb") as target:
                    copy_range(source, offset, size, target)
            else:
                write_text(path, what)
        except OSError as error:
            return f"{path}: {error}"
    return None


def _make_below(root: str, path: str) -> None:
    """Make the folder ``path`` and its missing parents up to ``root``, but never ``root``:
    a build stopped meanwhile removes its staging folder, which must stay removed."""
    folder = root
    for part in os.path.relpath(path, root).split(os.sep):
        if part in ("", os.curdir, os.pardir):
            raise OSError(f"not a folder below {root}")
        folder = os.path.join(folder, part)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)

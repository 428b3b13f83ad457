"""Scratch folders that a killed build does not leave behind for good.

A build stages its site beside the output and keeps payloads in a store in the temporary
folder: hundreds of MB for a big trace. ``finally`` blocks remove them when the build fails or
is interrupted, and :func:`exit_on_sigterm` makes SIGTERM unwind the same way; SIGKILL cannot
be caught, so each folder is named ``…tlsite-<kind>-<pid>-…`` and holds a marker file with its
owner's pid and host, and :func:`remove_stale` (run when a build starts) removes those whose
owner is gone. A folder without the marker, or whose owner still runs, is never touched.
Whatever a ``finally`` could not reach (a signal between a folder's making and the block that
removes it) is removed when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import re
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

#: The file inside each scratch folder that says tlsite made it, and which process owns it.
MARKER = ".tlsite-scratch"
#: Exit code after SIGTERM, as a shell reports it.
EXIT_TERMINATED = 128 + signal.SIGTERM
_NAME = re.compile(r"(?:^|\.)tlsite-[a-z]+(?:-[a-z]+)*-(?P<pid>[0-9]+)(?:-[^/]*)?$")


#: The scratch folders made and not yet removed, with the pid of the process that made each
#: (a forked child inherits the parent's, which are not its to remove).
_made: dict[str, int] = {}


def make_scratch(kind: str, parent: str | os.PathLike[str] | None = None, prefix: str = "") -> Path:
    """A new folder ``<prefix>tlsite-<kind>-<pid>-<random>`` in ``parent`` (default: the
    temporary folder), marked as this process's and removed at exit if nothing removed it
    before."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}tlsite-{kind}-{os.getpid()}-", dir=parent))
    _made[os.fspath(path)] = os.getpid()
    mark(path)
    return path


def _remove_leftovers() -> None:
    for path, pid in list(_made.items()):
        if pid == os.getpid():
            remove_scratch(path)


atexit.register(_remove_leftovers)


@contextlib.contextmanager
def scratch_folder(kind: str, *, soon: bool = False) -> Iterator[str]:
    """:func:`make_scratch` as a ``with`` block (what ``tempfile.TemporaryDirectory`` is);
    ``soon``: removed by :func:`remove_scratch_soon`."""
    path = make_scratch(kind)
    try:
        yield str(path)
    finally:
        (remove_scratch_soon if soon else remove_scratch)(path)


_removals: queue.Queue[str] = queue.Queue()
_remover: threading.Thread | None = None
_remover_lock = threading.Lock()


def remove_scratch_soon(path: str | os.PathLike[str]) -> None:
    """:func:`remove_scratch` in a thread of this process while the build goes on: on a file
    system that discards freed blocks as it frees them (ext4 mounted with ``discard``),
    removing a folder blocks, and a job's build removes many. What is
    queued is removed before the process ends, or before :func:`wait_for_removals` returns."""
    global _remover
    with _remover_lock:
        if _remover is None:
            remover = threading.Thread(target=_remove_queued, name="tlsite-remove", daemon=True)
            try:
                remover.start()
            except RuntimeError:  # no new thread (the interpreter is ending): remove it now
                remove_scratch(path)
                return
            _remover = remover
            atexit.register(wait_for_removals)
        _removals.put(os.fspath(path))


def wait_for_removals() -> None:
    """Return once every folder given to :func:`remove_scratch_soon` is removed."""
    _removals.join()


def _remove_queued() -> None:
    while True:
        path = _removals.get()
        try:
            remove_scratch(path)
        finally:
            _removals.task_done()


def mark(path: Path) -> None:
    """Claim the folder ``path`` for this process (see :func:`remove_stale`)."""
    (path / MARKER).write_text(f"{os.getpid()} {socket.gethostname()}\n", encoding="utf-8")


def mark_for_removal(path: Path) -> None:
    """:func:`mark` a folder about to be removed, if it can be (a folder tlsite did not make,
    e.g. the report being replaced, may be read-only: its removal then fails anyway)."""
    with contextlib.suppress(OSError):
        mark(path)


def remove_scratch(path: str | os.PathLike[str]) -> None:
    """Remove a scratch folder, its marker last: a removal cut short (SIGTERM while it runs)
    leaves a folder the next build still recognises as tlsite's."""
    with contextlib.suppress(OSError), os.scandir(path) as entries:
        for entry in list(entries):
            if entry.name == MARKER:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    shutil.rmtree(path, ignore_errors=True)
    _made.pop(os.fspath(Path(path)), None)


def remove_stale(parent: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the scratch folders in ``parent`` (default: the temporary folder) left by tlsite
    processes of this host that no longer run; the folders removed."""
    folder = Path(parent if parent is not None else tempfile.gettempdir())
    removed = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            match = _NAME.search(entry.name)
            if match is None or not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path)
            if _owner_is_gone(path, int(match["pid"])):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def _owner_is_gone(path: Path, pid: int) -> bool:
    try:
        owner, host = (path / MARKER).read_text(encoding="utf-8").split()
    except (OSError, ValueError, UnicodeDecodeError):
        return False  # not tlsite's (or not readable): not ours to remove
    if owner != str(pid) or host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it runs, as another user
        return False
    return False


#: The signals that end a build politely: ``kill``, and the terminal closing.
_ENDING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(SystemExit):
    """Raised in the main thread on SIGTERM (or SIGHUP), so every ``finally`` removes what
    it made; its code is ``128 + signal``, as a shell reports it."""


def exit_on_sigterm() -> None:
    """Make SIGTERM and SIGHUP unwind the main thread instead of ending the process where
    it stands. Further such signals are ignored while the cleanup runs."""

    def terminated(signum: int, _frame: FrameType | None) -> None:
        for sig in _ENDING:
            signal.signal(sig, signal.SIG_IGN)
        raise Terminated(128 + signum)

    with contextlib.suppress(ValueError):  # not the main thread: leave the defaults
        for sig in _ENDING:
            signal.signal(sig, terminated)

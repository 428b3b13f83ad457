"""Helper processes for the CPU work that overlaps a build (highlighting, the zip bundle).

A :class:`WorkerProcess` is a fresh interpreter (``python -c``) that runs one *service*, a
function named ``"package.module:function"``, with two pipe ends wrapped as
:class:`multiprocessing.connection.Connection` objects. It is deliberately not
:mod:`multiprocessing`'s process machinery: that starts a fork server and a resource tracker
(two more processes) and re-imports the caller's ``__main__`` in every child, which breaks
scripts that call tlsite without an ``if __name__ == "__main__"`` guard. A worker costs one
interpreter start and the imports of its service's module, and shares nothing with the
build process, so its memory stays small however big the trace is.

:meth:`WorkerProcess.send` never blocks: a thread of the build process feeds the worker's
pipe. A pipe holds 64 kB; a build that sends faster than the worker works (the reader hands
over code to highlight, the plugin files to zip) would otherwise stall on it.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

# The child puts the parent's sys.path first (tlsite may be importable only through it),
# then serves: argv = [sys.path as JSON, service, read fd, write fd, *service arguments].
_BOOTSTRAP = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from tlsite.core.worker import _serve; _serve(sys.argv[2:])"
)
_END_OF_INPUT = object()


class WorkerProcess:
    """One helper process serving ``service(inbox, outbox, *args)`` until its inbox closes."""

    def __init__(self, service: str, *args: str) -> None:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        fds = [str(to_child), str(from_child)]
        self._process = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP, json.dumps(sys.path), service, *fds, *args],
            pass_fds=(to_child, from_child),
            stdin=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._outbox = Connection(from_parent, readable=False)
        self._inbox = Connection(to_parent, writable=False)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._gone = False  # the worker's pipe broke: nothing more reaches it
        self._feeder = threading.Thread(target=self._feed, name="tlsite-worker-feed", daemon=True)
        self._feeder.start()

    def send(self, message: Any) -> None:
        """Queue ``message`` (picklable) for the worker; ``OSError`` if it has gone."""
        if self._gone:
            raise BrokenPipeError("the worker process has gone")
        self._queue.put(message)

    def _feed(self) -> None:
        """Feeder thread: send queued messages in order, then close the worker's input."""
        while (message := self._queue.get()) is not _END_OF_INPUT:
            if self._gone:
                continue
            try:
                self._outbox.send(message)
            except OSError:
                self._gone = True
        self._outbox.close()

    def receive(self) -> Any:
        """The worker's next answer; ``EOFError`` if it has gone."""
        return self._inbox.recv()

    def end_input(self) -> None:
        """Send nothing more: the worker finishes once it has read what was queued."""
        if self._feeder.is_alive():
            self._queue.put(_END_OF_INPUT)

    def close(self) -> None:
        """End its input (the service's signal to finish), read what it still says (so it
        never blocks on a full pipe) and wait for the process to end."""
        self.end_input()
        while not self._inbox.closed:
            try:
                self._inbox.recv()
            except (EOFError, OSError):
                self._inbox.close()
        self._feeder.join()
        self._process.wait()

    def stop(self) -> None:
        """Kill the process now, whatever it was doing (:meth:`close` still to be called)."""
        self._gone = True
        self._process.kill()

    def kill(self) -> None:
        """Stop the worker now and close it."""
        self.stop()
        self.close()


def _serve(argv: list[str]) -> None:
    """Child side: import the service and run it on the two pipe ends."""
    service, read_fd, write_fd, *args = argv
    module_name, function_name = service.split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    inbox = Connection(int(read_fd), writable=False)
    outbox = Connection(int(write_fd), readable=False)
    try:
        function(inbox, outbox, *args)
    except (EOFError, BrokenPipeError):
        pass  # the build process went away: nothing left to do
    finally:
        outbox.close()
        inbox.close()

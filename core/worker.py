"""Helper processes: the one way tlsite runs work beside the build (highlighting, the zip
bundle, a storm's tlparse files, the ranks of a job).

A :class:`WorkerProcess` is a fresh interpreter (``python -c``) that runs one *service*, a
function named ``"package.module:function"``, with two pipe ends wrapped as
:class:`multiprocessing.connection.Connection` objects; :class:`TaskPool` runs functions
over picklable tasks in a few of them. It is deliberately not :mod:`multiprocessing`'s
process machinery: ``fork`` (its default on Linux before Python 3.14) copies a process whose
other threads (the progress bar, a worker's feeder) may hold locks, and ``forkserver`` (the
default from 3.14) and ``spawn`` start more processes and re-import the caller's
``__main__`` in every child, which breaks scripts that call tlsite without an
``if __name__ == "__main__"`` guard. A new interpreter is safe whatever the start method.
A worker costs one interpreter start and the imports of its service's module, and shares
nothing with the build process, so its memory stays small however big the trace is.

:meth:`WorkerProcess.send` never blocks: a thread of the build process feeds the worker's
pipe. A pipe holds 64 kB; a build that sends faster than the worker works (the reader hands
over code to highlight, the plugin files to zip) would otherwise stall on it.
"""

from __future__ import annotations

import collections
import importlib
import json
import os
import pickle
import queue
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a worker is started: most builds start none
    from multiprocessing.connection import Connection

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
        from multiprocessing.connection import Connection

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

    @property
    def answers(self) -> Connection:
        """The connection its answers arrive on (to wait on several workers at once)."""
        return self._inbox

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
    from multiprocessing.connection import Connection

    service, read_fd, write_fd, *args = argv
    module_name, function_name = service.split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    inbox = Connection(int(read_fd), writable=False)
    outbox = Connection(int(write_fd), readable=False)
    try:
        function(inbox, outbox, *args)
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the build process went away or was interrupted (it says so): nothing left to do
    finally:
        outbox.close()
        inbox.close()


class TaskPool:
    """Up to ``workers`` processes running named functions over picklable tasks: helper
    processes, and with ``here`` this process too (one helper fewer to start: an interpreter
    and its imports). The helpers are kept from one :meth:`run` to the next, so that a later
    run (a job's comparisons after its ranks) starts no process and finds what the helpers
    set up once per process (imports, the theme's compiled templates) already done."""

    def __init__(self, workers: int, *, here: bool = False) -> None:
        self.workers = max(1, workers)
        self.here = here
        self._helpers: list[WorkerProcess] | None = None  # started by the first run
        self._broken = False

    @property
    def processes(self) -> int:
        """How many processes run tasks (before the first run: at most this many)."""
        helpers = self.workers - 1 if self.here else self.workers
        if self._helpers is not None:
            helpers = len(self._helpers)
        return helpers + (1 if self.here else 0)

    def run(self, function: str, tasks: Sequence[Any]) -> Iterator[Any]:
        """``function(task)`` for each task; the results in the order they come.

        ``function`` is named ``"package.module:function"``; tasks and results are pickled
        (a task run in this process is not). A task that raises ends the run with its error
        (as it was, or as a :class:`RuntimeError` carrying the helper's traceback when it
        cannot be pickled); so does a helper that dies; the pool cannot run more after
        either. While this process runs a task, each helper holds a second, so that it
        works on meanwhile.
        """
        from multiprocessing.connection import wait

        if self._broken:
            raise RuntimeError("a task of this pool failed before")
        todo = collections.deque((function, task) for task in tasks)
        if self._helpers is None:
            self.start(len(todo))
        pool = self._helpers
        held: dict[Connection, int] = {}  # a helper's answers -> tasks it holds
        by_answers = {worker.answers: worker for worker in pool}
        run = _function(function) if self.here or not pool else None
        try:
            for worker in pool:
                _hand_out(worker, todo, held, 1)
            while held or todo:
                if run is not None and todo:
                    ready = wait(list(held), timeout=0)
                    if not ready:
                        _, task = todo.popleft()
                        for worker in pool:  # a second task each, to work on meanwhile
                            _hand_out(worker, todo, held, 2)
                        yield run(task)
                        continue
                else:
                    ready = wait(list(held))
                for answers in ready:
                    worker = by_answers[answers]  # type: ignore[index]
                    try:
                        failed, value = worker.receive()
                    except (EOFError, OSError) as error:
                        raise RuntimeError(f"a helper process stopped: {error!r}") from error
                    if failed:
                        raise value
                    held[worker.answers] -= 1
                    if not held[worker.answers]:
                        del held[worker.answers]
                    _hand_out(worker, todo, held, 1)
                    yield value
        except BaseException:  # a task failed, or the caller stopped reading the results
            self._broken = True
            for worker in pool:
                worker.stop()
            raise

    def start(self, tasks: int | None = None, preload: Sequence[str] = ()) -> None:
        """Start the helpers now (one per task at most, when ``tasks`` is known) unless they
        are: a caller that knows work will come starts them before it imports what it needs
        itself, and each helper imports the modules ``preload`` names meanwhile."""
        if self._helpers is None:
            wanted = self.workers - 1 if self.here else self.workers
            if tasks is not None:
                wanted = min(wanted, tasks)
            self._helpers = [WorkerProcess(_TASK_SERVICE, *preload) for _ in range(max(wanted, 0))]

    def close(self) -> None:
        """End the helpers (they finish what they hold) and wait for them."""
        for worker in self._helpers or []:
            worker.close()
        self._helpers = []

    def __enter__(self) -> TaskPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TASK_SERVICE = "tlsite.core.worker:_task_service"


def _hand_out(
    worker: WorkerProcess, todo: collections.deque[Any], held: dict[Connection, int], ahead: int
) -> None:
    """Give ``worker`` tasks until it holds ``ahead``."""
    while held.get(worker.answers, 0) < ahead and todo:
        worker.send(todo.popleft())
        held[worker.answers] = held.get(worker.answers, 0) + 1


def _function(name: str) -> Any:
    """The function named ``"package.module:function"``."""
    module_name, function_name = name.split(":")
    return getattr(importlib.import_module(module_name), function_name)


def _task_service(inbox: Connection, outbox: Connection, *preload: str) -> None:
    """Helper side of :class:`TaskPool`: import the modules ``preload`` names, then answer
    ``(failed, result or error)`` per ``(function, task)``."""
    for module in preload:
        importlib.import_module(module)
    functions: dict[str, Any] = {}
    while True:
        name, task = inbox.recv()  # EOFError once the input ends: _serve returns
        try:
            if name not in functions:
                functions[name] = _function(name)
            outbox.send((False, functions[name](task)))
        except Exception as error:
            outbox.send((True, _portable(error)))


def _portable(error: Exception) -> Exception:
    """``error`` if it survives pickling, else a RuntimeError with the traceback."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        trace = "".join(traceback.format_exception(error))
        return RuntimeError(f"failed in a helper process:\n{trace}")
    return error

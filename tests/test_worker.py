"""Helper processes: the build hands them work without ever waiting on their pipe."""

from __future__ import annotations

import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from tlsite.core.worker import WorkerProcess

MESSAGES = 2_000
MESSAGE = "x" * 1_000  # 2 MB in all: thirty times what a pipe holds


def _count_after_go(inbox: Connection, outbox: Connection, go: str) -> None:
    """Read nothing until ``go`` exists, then count the messages up to the end of input."""
    while not Path(go).exists():
        time.sleep(0.01)
    count = 0
    while True:
        try:
            assert inbox.recv() == MESSAGE
        except EOFError:
            break
        count += 1
    outbox.send(count)


def test_send_does_not_wait_for_a_busy_worker(tmp_path: Path) -> None:
    go = tmp_path / "go"
    worker = WorkerProcess(f"{__name__}:_count_after_go", str(go))
    try:
        sender = threading.Thread(target=lambda: [worker.send(MESSAGE) for _ in range(MESSAGES)])
        sender.start()
        sender.join(timeout=30)
        assert not sender.is_alive(), "send() blocked while the worker was not reading"
        go.touch()
        worker.end_input()
        assert worker.receive() == MESSAGES  # nothing lost, in order
    finally:
        go.touch()
        worker.close()


def test_killing_a_worker_that_is_behind_ends_at_once(tmp_path: Path) -> None:
    worker = WorkerProcess(f"{__name__}:_count_after_go", str(tmp_path / "never"))
    for _ in range(MESSAGES):
        worker.send(MESSAGE)
    started = time.monotonic()
    worker.kill()
    assert time.monotonic() - started < 10

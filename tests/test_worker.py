"""Helper processes: the build hands them work without ever waiting on their pipe, and
does itself what a highlight worker could not do."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from tlsite.core.render.highlight import CodeBlock, Highlighter
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


def test_a_block_a_worker_cannot_render_is_rendered_here_with_the_real_error(
    tmp_path: Path,
) -> None:
    code = tmp_path / "pack"
    code.write_bytes(b"def f():\n    return 1\n")
    good = CodeBlock(str(code), 0, code.stat().st_size, "good", "python")
    missing = CodeBlock(str(tmp_path / "gone"), 0, 10, "missing", "python")
    highlighter = Highlighter(tmp_path / "cache", workers=1)
    try:
        highlighter.start()
        highlighter.submit(missing)
        assert highlighter.submit(good) == highlighter.submit(good)  # once per content
        with pytest.raises(FileNotFoundError):
            highlighter.html(missing.key, "artifact-1")
        html = highlighter.html(good.key, "artifact-2")
    finally:
        highlighter.close()
    assert 'data-block="artifact-2"' in html
    assert '<span class="k">def</span>' in html


def test_highlight_workers_keep_going_while_nobody_asks_for_their_blocks(
    tmp_path: Path, code_blocks: Callable[[list[bytes]], list[CodeBlock]]
) -> None:
    """Between reading the trace and writing the first page nothing is asked for; the
    workers' answers (thousands at 1 GB) must not fill their pipe and stop them."""
    lines = [f"x_{n} = {n}\n".encode() for n in range(3_000)]
    blocks = code_blocks(lines)
    highlighter = Highlighter(tmp_path / "cache", workers=1)
    try:
        highlighter.start()
        for block in blocks:
            highlighter.submit(block)
        highlighter.start()  # the last blocks submitted, fewer than a batch, go now
        deadline = time.monotonic() + 60
        rendered = 0
        while rendered < len(lines) and time.monotonic() < deadline:
            time.sleep(0.1)
            packs = (tmp_path / "cache").glob("*.html")
            rendered = sum(p.read_bytes().count(b"<code>") for p in packs)
        assert rendered == len(lines)
    finally:
        highlighter.close()


def test_blocks_submitted_after_a_highlight_worker_died_are_rendered_here(
    tmp_path: Path, code_blocks: Callable[[list[bytes]], list[CodeBlock]]
) -> None:
    """A worker killed (out of memory, say) between two batches: the blocks submitted after
    it died were sent to it anyway and waited for its answer for ever, hanging the build."""
    blocks = code_blocks([f"def f_{n}():\n    return {n}\n".encode() for n in range(40)])
    highlighter = Highlighter(tmp_path / "cache", workers=1)
    try:
        highlighter.start()
        first = highlighter.submit(blocks[0])
        highlighter.start()
        assert '<span class="k">def</span>' in highlighter.html(first, "b-0")
        process = highlighter._workers[0]._process  # killed from outside, as by the OOM killer
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        highlighter._collectors[0].join(timeout=30)  # it saw the worker go
        keys = [highlighter.submit(block) for block in blocks[1:]]
        answers: list[str] = []
        asking = threading.Thread(
            target=lambda: answers.extend(highlighter.html(k, "b") for k in keys), daemon=True
        )
        asking.start()
        asking.join(timeout=30)
        assert len(answers) == len(keys)
        assert all('<span class="k">def</span>' in html for html in answers)
    finally:
        highlighter.close()

"""Fixes from the fourth review (of the branches merged on the day of small2 … ddp16)."""

from __future__ import annotations

import gc
import hashlib
import io
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from corpus import FIXTURE_TRACES

from tlsite import cli
from tlsite.core import handlers, load, multirank
from tlsite.core.analysis.diff import diff_traces
from tlsite.core.records import RecordReader
from tlsite.core.render.templating import render_markdown
from tlsite.core.stats import ParseStats
from tlsite.mkdocs_plugin import pipeline
from tlsite.mkdocs_plugin.diff_build import MAX_VERDICT_FINDINGS


def _double_spaced_log(count: int, bad: int | None = None) -> bytes:
    """One artifact whose ``count`` payload lines are each followed by a blank line (a log
    passed through a tool that double-spaces lines); line ``bad`` of the payload is not UTF-8."""
    lines = [f"line {n}".encode() for n in range(count)]
    if bad is not None:
        lines[bad] = b"caf\xe9"
    kept = [line for line in lines if line.isascii()]
    md5 = hashlib.md5(b"\n".join(kept)).hexdigest()
    head = (
        'V1124 06:00:00.000000 1 a.py:1] {"artifact": {"name": "x", "encoding": "string"}, '
        f'"frame_id": 0, "frame_compile_id": 0, "attempt": 0, "has_payload": "{md5}"}}\n'
    )
    return head.encode() + b"".join(b"\t" + line + b"\n\n" for line in lines)


class _Run(bytes):
    """A run of payload lines that counts how often its newlines are counted."""

    counted = 0

    def count(self, *args: Any) -> int:
        type(self).counted += 1
        return super().count(*args)


def test_a_double_spaced_payload_counts_each_run_of_lines_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each blank line's number took the newlines of every run before it again: a payload of
    n lines, each followed by a blank line, cost n²/2 counts."""
    take = RecordReader._take_payload_run
    runs: list[_Run] = []

    def counted_run(self: RecordReader) -> bytes:
        runs.append(_Run(take(self)))
        return runs[-1]

    monkeypatch.setattr(RecordReader, "_take_payload_run", counted_run)
    count = 2_000
    stats = ParseStats()
    records = list(RecordReader(io.BytesIO(_double_spaced_log(count)), stats))
    assert [r.payload_lines for r in records] == [count] and records[0].md5_ok
    assert stats.total_lines == 1 + 2 * count
    assert len(runs) == count
    assert _Run.counted <= len(runs)


def test_a_double_spaced_payload_names_its_undecodable_line() -> None:
    """The line number of an undecodable payload line after blank lines is still its own."""
    stats = ParseStats()
    records = list(RecordReader(io.BytesIO(_double_spaced_log(50, bad=30)), stats))
    assert records[0].payload_lines == 49 and records[0].md5_ok
    # the header is line 1, payload line k (from 0) is line 2 + 2k, its blank line 3 + 2k
    assert stats.lines_by_reason["not_utf8"] == [2 + 2 * 30]


def test_the_cli_build_leaves_what_its_caller_froze_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A caller that froze its objects (a server that forks workers, as Python's documentation
    advises) found them all unfrozen after a build: ``cli.build`` unfroze everything."""
    seen: list[int] = []
    thawed: list[str] = []  # the freezing calls made while the caller's objects are frozen

    def build(path: str, out: Path, **options: Any) -> str:
        seen.append(gc.get_freeze_count())
        return "built"

    unfreeze, freeze = gc.unfreeze, gc.freeze
    monkeypatch.setattr(pipeline, "build", build)
    # The count itself is not compared: any thread of an earlier test (a build's helpers, the
    # scratch folders' remover) may free frozen objects meanwhile, which lowers it.
    freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        monkeypatch.setattr(gc, "unfreeze", lambda: thawed.append("unfreeze"))
        monkeypatch.setattr(gc, "freeze", lambda: thawed.append("freeze"))
        assert cli.build("trace.log", Path("site")) == "built"
        assert thawed == []
        assert len(seen) == 1 and 0 < seen[0] <= frozen  # the build ran with them frozen
    finally:
        monkeypatch.undo()
        unfreeze()


def test_diverging_ranks_without_graph_breaks_say_none_not_the_same_zero() -> None:
    """Two ranks of a real torchrun job, neither with a graph break, read "the same 0 on
    both" in the landing page's "Diverging ranks compared" table."""
    logs = sorted(Path(FIXTURE_TRACES, "dtrace_torchrun").glob("*rank_[01]_*.log"))
    before, after = load(str(logs[0])), load(str(logs[-1]))
    diff = diff_traces(before, after)
    assert not diff.graph_breaks.unchanged and not diff.graph_breaks.new
    markdown = render_markdown(
        "diff_rank_links.md", pairs=[(0, 1, diff)], left_out=[], max_findings=MAX_VERDICT_FINDINGS
    )
    row = next(line for line in markdown.splitlines() if line.startswith("| [rank 0"))
    assert row.split(" | ")[2] == "none on either", row


class _SlowImport:
    """``tlsite.mkdocs_plugin.pipeline`` for ``cli.build``: the first import of ``build``
    waits for ``go`` (a first import of MkDocs and the rest takes a while)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.go = threading.Event()
        self._first = True

    @property
    def build(self) -> Any:
        if self._first:
            self._first = False
            self.entered.set()
            assert self.go.wait(10)
        return lambda path, out, **options: "built"


@pytest.mark.slow
def test_two_threads_building_at_once_leave_the_garbage_collector_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thread that starts a build while another imports MkDocs (with the collector off)
    read "off", and turned it off again after the first turned it back on: no collection
    for the rest of the process."""
    slow = _SlowImport()
    monkeypatch.setitem(sys.modules, "tlsite.mkdocs_plugin.pipeline", slow)
    first = threading.Thread(target=cli.build, args=("a.log", Path("a")))
    second = threading.Thread(target=cli.build, args=("b.log", Path("b")))

    class Collector:
        """``gc`` for ``cli``: the second thread's look at the collector lets the first
        thread finish its import, and waits for it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(gc, name)

        def isenabled(self) -> bool:
            enabled = gc.isenabled()
            if threading.current_thread() is second:
                slow.go.set()
                first.join(10)
            return enabled

    monkeypatch.setattr(cli, "gc", Collector())
    try:
        first.start()
        assert slow.entered.wait(10)
        second.start()
        slow.go.wait(0.5)  # the second thread looks now, or (waiting its turn) after the first
        slow.go.set()
        first.join(10)
        second.join(10)
        assert not first.is_alive() and not second.is_alive()
        assert gc.isenabled()
        assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_long_chromium_event_names_are_read_but_not_kept_for_the_process() -> None:
    """Event names were kept in a process-wide cache of a thousand, however long: a hostile
    log's names of megabytes each stayed in memory after its build."""
    handlers._event_name.cache_clear()
    names = [f"event {n} " + "x" * 1_000 for n in range(20)]
    for name in names:
        text = json.dumps({"name": name, "ts": 1, "args": {}, "ph": "B"})
        assert handlers._phase_mark(text) == (True, name)
    assert handlers._event_name.cache_info().currsize == 0
    assert handlers._phase_mark('{"name": "inductor_compile", "ph": "E"}') == (
        False,
        "inductor_compile",
    )
    assert handlers._event_name.cache_info().currsize == 1


def test_a_megabyte_guard_is_cut_where_the_landing_page_names_it() -> None:
    """The landing page names the failed guard of each rank's extra compile id; a trace's
    guard of a megabyte (a hostile or generated one) is cut there, a real one kept whole."""
    real = "tensor 'args[0]' size mismatch at index 0. expected 8, actual 5"
    assert multirank._guard_line(f"0/0: {real}   # x = f(y)\n  File ...") == f"0/0: {real}"
    cut = multirank._guard_line("0/0: L['x'] == " + "7" * 1_000_000)
    assert cut is not None and len(cut) == multirank.GUARD_LINE_MAX and cut.endswith("…")

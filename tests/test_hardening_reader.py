"""Bounded time and memory whatever the input (issue #20, points 7-10).

Complexity is checked by counting work (bytes copied, objects kept) rather than by timing, so
the tests hold on a loaded machine; the one timed test has a bound a hundred times its cost.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tlsite.core import records
from tlsite.core.records import HEADER, HEADER_WINDOW, RecordReader
from tlsite.core.stats import ParseStats

PROJECT_PARENT = Path(__file__).resolve().parents[2]
HEAD = "V0101 00:00:00.000000 1 f.py:1] "

# tlparse's header pattern as written (Rust's regex never backtracks; Python's does).
TLPARSE_HEADER = re.compile(
    r"(?P<level>[VIWEC])(?P<month>\d{2})(?P<day>\d{2}) "
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2}).(?P<micro>\d{6}) "
    r"(?P<thread>\d+)(?P<pathname>[^:]+):(?P<lineno>\d+)\] (?P<json>.)"
)


def payload_record(payload: str, name: str = "x") -> str:
    md5 = hashlib.md5(payload.encode()).hexdigest()
    envelope = f'{{"artifact": {{"name": "{name}", "encoding": "string"}}, "has_payload": "{md5}"}}'
    return f"{HEAD}{envelope}\n\t{payload}\n"


class CopyCounter:
    """Counts the bytes the reader's buffer holds after each refill (what it copied)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.copied = 0
        fill = RecordReader._fill

        def counted(reader: RecordReader) -> bool:
            more = fill(reader)
            self.copied += len(reader._buf)
            return more

        monkeypatch.setattr(RecordReader, "_fill", counted)


def read_in_chunks(data: bytes, size: int) -> ParseStats:
    stats = ParseStats(source="t.log")
    chunks = (data[i : i + size] for i in range(0, len(data), size))
    list(RecordReader(chunks, stats))
    return stats


# -- 7: one very long line -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        pytest.param("x" * 2_000_000 + "\n", id="junk"),
        pytest.param(HEAD + '{"artifact": {"pad": "' + "a" * 2_000_000 + '"}}\n', id="header"),
        pytest.param(payload_record("b" * 2_000_000), id="payload"),
    ],
)
def test_a_long_line_is_copied_a_bounded_number_of_times(monkeypatch, line):
    """Gathering a 2 MB line from 4 KB chunks copies it a few times over, not once per chunk
    (which made a 200 MB line take half a minute and a 2 GB one hours)."""
    counter = CopyCounter(monkeypatch)
    data = line.encode()
    stats = read_in_chunks(data, 4096)
    assert stats.total_lines == line.count("\n")
    assert sum(stats.outcomes.values()) == stats.total_lines
    assert counter.copied < 8 * len(data), f"copied {counter.copied:,} bytes for {len(data):,}"


def test_long_lines_read_the_same_whatever_the_chunks():
    data = (
        payload_record("p" * 70_000)
        + "y" * 50_000
        + "\n"
        + HEAD
        + '{"str": ["'
        + "s" * 60_000
        + '", 0]}\n'
        + payload_record("q\n\tr" * 9_000, name="two")
    ).encode()
    whole = read_in_chunks(data, len(data))
    for size in (1, 7, 4096, 65_537):
        assert read_in_chunks(data, size) == whole
    assert +whole.outcomes == {"record": 2, "payload": 9_002, "bad_header": 1, "interned": 1}


# -- 8: the header regex ---------------------------------------------------------------------------
def test_a_line_of_header_like_digits_reads_at_once():
    """A 100 KB ``V0101 00:00:00.000000 111…`` line took the header pattern 87 s of
    backtracking. Run in a child so that a regression fails instead of hanging the suite."""
    script = textwrap.dedent(
        """
        from tlsite.core.records import RecordReader
        from tlsite.core.stats import ParseStats
        line = b"V0101 00:00:00.000000 " + b"1" * 100_000 + b"\\n"
        stats = ParseStats()
        list(RecordReader([line * 3], stats))
        print(dict(stats.outcomes))
        """
    )
    env = {"PYTHONPATH": str(PROJECT_PARENT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'bad_header': 3}"


def test_the_header_is_searched_in_a_bounded_window(monkeypatch):
    """However long the line, the header search looks at its first HEADER_WINDOW characters:
    a line of many header-like pieces and no colon cannot cost time quadratic in its length."""
    windows: list[int] = []

    class Spy:
        def search(self, text, pos=0, endpos=sys.maxsize):
            windows.append(min(endpos, len(text)))
            return HEADER.search(text, pos, endpos)

    monkeypatch.setattr(records, "HEADER", Spy())
    line = ("V0101 00:00:00.000000 1x" * 20_000 + "\n").encode()
    stats = read_in_chunks(line + (HEAD + '{"str": ["a", 0]}\n').encode(), 1 << 20)
    assert +stats.outcomes == {"bad_header": 1, "interned": 1}
    assert windows and max(windows) <= HEADER_WINDOW


@pytest.mark.parametrize(
    "text",
    [
        HEAD + "{}",
        "[rank3]:" + HEAD + '{"a": 1}',
        "V0101 00:00:00.000000 123:45] {",  # thread 12, path "3"
        "V0101 00:00:00.000000 12345 /a/b.py:7] {",
        "V0101 00:00:00.000000 1 a.py:x] {} b.py:9] {",
        "V0101 00:00:00.000000 1 a:b.py:9] {",
        "junk V0101 00:00:00.000000 99 p 1] V0101 00:00:00.000000 7 q.py:3] {",
        "V0101 00:00:00.000000 777",
        "V0101 00:00:00.000000 7 p.py:3]  ",
    ],
)
def test_the_header_pattern_matches_as_tlparse_does(text):
    """The atomic thread/path group only removes backtracking that could never succeed."""
    ours, theirs = HEADER.search(text), TLPARSE_HEADER.search(text)
    assert (ours is None) == (theirs is None)
    if ours is not None and theirs is not None:
        assert ours.groupdict() == theirs.groupdict()
        assert ours.span() == theirs.span()


# -- 10: many artifacts in one compile id ----------------------------------------------------------
def artifacts_trace(count: int, *, name: str = "art_{i}") -> bytes:
    lines = []
    for i in range(count):
        payload = f"payload {i}"
        md5 = hashlib.md5(payload.encode()).hexdigest()
        envelope = (
            f'{{"artifact": {{"name": "{name.format(i=i)}", "encoding": "string"}}, '
            f'"frame_id": 0, "frame_compile_id": 0, "attempt": 0, "has_payload": "{md5}"}}'
        )
        lines.append(f"{HEAD}{envelope}\n\t{payload}\n")
    return "".join(lines).encode()


def unit_page_of(data: bytes):
    from tlsite.core.builder import build_trace
    from tlsite.core.render.pages import render_tree

    trace = build_trace([data], "many.log")
    try:
        pages = render_tree(trace).pages
        (page,) = [p for p in pages if p.path == "-_0_0_0/index.md"]
        return page, page.standalone_markdown()
    finally:
        trace.close()


def test_a_compile_with_thousands_of_artifacts_lists_the_rest_compactly():
    """Past MAX_ARTIFACT_SECTIONS a compile's artifacts are rows of one HTML table, not
    sections: thousands of headings and Markdown-in-HTML blocks made the site build quadratic
    (10 k artifacts: 72 s). Every artifact still has its anchor and its raw file link."""
    from tlsite.core.render.pages import MAX_ARTIFACT_SECTIONS

    count = MAX_ARTIFACT_SECTIONS + 700
    page, text = unit_page_of(artifacts_trace(count))
    headings = re.findall(r"^### .*\{ #artifact-(\d+) \}$", text, re.M)
    rows = re.findall(r'<tr id="artifact-(\d+)">', text)
    assert len(headings) == MAX_ARTIFACT_SECTIONS
    assert len(rows) == count - MAX_ARTIFACT_SECTIONS
    assert sorted(map(int, headings + rows)) == list(range(count))
    assert text.count(" markdown>") <= 2 * MAX_ARTIFACT_SECTIONS + 10
    last = count - 1
    assert f'<a href="../-_0_0_0/art_{last}_{last}.txt"><code>art_{last}</code></a>' in text
    assert f"logged {count} artifacts: the first {MAX_ARTIFACT_SECTIONS} are shown" in text
    assert len(page.code) == MAX_ARTIFACT_SECTIONS  # the search index has no code of the rest


def test_listed_artifact_names_are_escaped():
    from tlsite.core.render.pages import MAX_ARTIFACT_SECTIONS

    data = artifacts_trace(MAX_ARTIFACT_SECTIONS + 1, name="<img src=x onerror=alert({i})>")
    _, text = unit_page_of(data)
    table = text[text.index('<div class="tlsite-artifact-rows"') :]
    assert "<img" not in table
    assert "&lt;img src=x onerror=alert(" in table


def test_dump_file_paths_are_claimed_once_each():
    """dump_file names that share a stem (case, unsafe characters, a 120-character cut) get
    stem, stem_2, stem_3... The same name logged again keeps its path."""
    long = "n" * 130
    names = [long + "a", long + "b", "Foo", "foo", "f/oo".upper(), long + "a"]
    lines = []
    for name in names:
        md5 = hashlib.md5(b"x").hexdigest()
        lines.append(f'{HEAD}{{"dump_file": {{"name": "{name}"}}, "has_payload": "{md5}"}}\n\tx\n')
    from tlsite.core.builder import build_trace

    trace = build_trace(["".join(lines).encode()], "dumps.log")
    try:
        paths = [a.path for u in trace.units.values() for a in u.artifacts]
    finally:
        trace.close()
    stem = "dump_file/" + "n" * 120
    assert paths == [
        f"{stem}.html",
        f"{stem}_2.html",
        "dump_file/Foo.html",
        "dump_file/foo_2.html",
        "dump_file/F_OO.html",
        f"{stem}.html",
    ]


# -- 9: memory does not grow with records that feed no page --------------------------------------
CHROMIUM = '{"name": "a", "ph": "i", "ts": 1700000000000000, "pid": 0}'
STACK = '[{"line": 1, "name": "f", "filename": 0}, {"line": 2, "name": "g", "filename": 0}]'


def feedless_records(count: int) -> bytes:
    """Records torch writes many of that no page lists one by one: chromium events (some with
    a stack), tensor descriptions (kept on disk), string-table entries (one id redefined)."""
    md5 = hashlib.md5(CHROMIUM.encode()).hexdigest()
    ids = '"frame_id": 0, "frame_compile_id": 0, "attempt": 0'
    lines = [f'{HEAD}{{"str": ["a.py", 0]}}\n']
    for i in range(count // 4):
        lines += [
            f'{HEAD}{{"chromium_event": {{}}, {ids}, "has_payload": "{md5}"}}\n\t{CHROMIUM}\n',
            f'{HEAD}{{"chromium_event": {{}}, "stack": {STACK}, "has_payload": "{md5}"}}\n'
            f"\t{CHROMIUM}\n",
            f'{HEAD}{{"describe_tensor": {{"id": {i}, "ndim": 1}}, {ids}}}\n',
            f'{HEAD}{{"str": ["b.py", 1]}}\n',
        ]
    return "".join(lines).encode()


def retained_after_reading(data: bytes) -> int:
    import gc
    import tracemalloc

    from tlsite.core.builder import build_trace

    gc.collect()
    tracemalloc.start()
    try:
        trace = build_trace([data], "feedless.log")
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    trace.close()
    return kept


@pytest.mark.slow
def test_records_that_feed_no_page_keep_next_to_no_memory():
    """A log's model must not grow with records shown only as counts (chromium events, tensor
    descriptions, repeated stacks): 4 k more of them keep under 20 bytes each (tensor
    descriptions keep 18 bytes of file offsets); a stack kept per record was a kilobyte."""
    small, big = (
        retained_after_reading(feedless_records(4_000)),
        retained_after_reading(feedless_records(8_000)),
    )
    assert (big - small) / 4_000 < 20, f"{(big - small) / 4_000:.0f} bytes per record"


def test_events_share_their_compile_id_frames_and_empty_stacks():
    """Per kept event, only what a page shows: events of one compile share its CompileId, equal
    frames are one object, and an event without stacks holds no dict of its own."""
    from tlsite.core.builder import build_trace

    ids = '"frame_id": 0, "frame_compile_id": 0, "attempt": 0'
    lines = [f'{HEAD}{{"str": ["a.py", 0]}}\n']
    for i in range(4):
        lines.append(f'{HEAD}{{"guard_added_fast": {{"expr": "s{i} > 1", "stack": 0}}, {ids}}}\n')
        lines.append(f'{HEAD}{{"guard_added": {{"expr": "s{i} < 9", "stack": {STACK}}}, {ids}}}\n')
    trace = build_trace(["".join(lines).encode()], "events.log")
    try:
        (unit,) = trace.units.values()
        events = unit.events
    finally:
        trace.close()
    assert len(events) == 8
    assert len({id(e.compile_id) for e in events} | {id(unit.id)}) == 1
    plain = [e for e in events if e.type == "guard_added_fast"]
    assert len({id(e.stacks) for e in plain}) == 1 and not plain[0].stacks
    stacked = [e.stacks["stack"] for e in events if e.type == "guard_added"]
    assert len({id(frame) for stack in stacked for frame in stack}) == 2


@pytest.mark.slow
def test_many_dump_file_names_sharing_a_stem_read_at_once():
    """20 k dump_file names that share their first 120 characters: each name looked through
    every claimed path for every suffix it tried (5 k names took 16 s). Run in a child so that
    a regression fails instead of hanging the suite."""
    script = textwrap.dedent(
        """
        import hashlib
        from tlsite.core.builder import build_trace
        head = "V0101 00:00:00.000000 1 f.py:1] "
        md5 = hashlib.md5(b"x").hexdigest()
        lines = [
            head + '{"dump_file": {"name": "%s%d"}, "has_payload": "%s"}\\n\\tx\\n'
            % ("n" * 130, i, md5)
            for i in range(20_000)
        ]
        trace = build_trace(["".join(lines).encode()], "dumps.log")
        print(len({a.path.lower() for u in trace.units.values() for a in u.artifacts}))
        trace.close()
        """
    )
    env = {"PYTHONPATH": str(PROJECT_PARENT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "20000"


def test_a_compile_with_thousands_of_metrics_records_shows_a_bounded_number():
    """The same class as artifacts: each metrics record is a heading and a Markdown block."""
    from tlsite.core.render.pages import MAX_ARTIFACT_SECTIONS

    ids = '"frame_id": 0, "frame_compile_id": 0, "attempt": 0'
    count = MAX_ARTIFACT_SECTIONS + 30
    record = f'{HEAD}{{"compilation_metrics_runtime": {{"a": 1}}, {ids}}}\n'
    _, text = unit_page_of((record * count).encode())
    assert len(re.findall(r"^## .*\{ #metrics\\?-\d+ \}$", text, re.M)) == MAX_ARTIFACT_SECTIONS
    assert "This compile logged 30 more metrics records, not shown" in text

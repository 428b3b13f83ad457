"""Corrupt input, generated from real corpus traces: never a crash, every line accounted for.

``test_bad_input.py`` injects one hand-placed defect into one trace. This suite generates its
damage systematically, the way crashed jobs, killed processes and interleaved ranks produce it:
every record cut at every kind of boundary, payload lines dropped and duplicated, two ranks
written into one file, mixed line endings, stray non-UTF-8 and NUL bytes, 10 MB lines, valid
JSON of the wrong shape, absurd ids, and inputs that are not logs at all. Each variant is read
into the full model; one of each kind is also built into a site through the CLI, which must
exit with the documented code (0 built, 1 nothing could be built, 3 built but ``--strict``
found skipped lines), say what it skipped in one line, and list the skipped lines with their
reasons on the Parse health page.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from corpus import HEADER_PREFIX, TORCH_213, tlparse_input, trace_lines

from tlsite import cli
from tlsite.core.builder import build_trace
from tlsite.core.model import Trace
from tlsite.core.records import HEADER, MAX_JSON_DEPTH
from tlsite.core.render.pages import render_tree
from tlsite.core.stats import FINDING_REASONS, SAMPLE_CHARS, SKIP_REASONS

CID = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
MB = 1 << 20
H = HEADER_PREFIX


# -- reading bytes into the model ------------------------------------------------------------------
def read(data: bytes, *, pages: bool = False) -> Trace:
    """The full model of ``data`` (reader, handlers, analyses; optionally the Markdown pages).

    Asserts the accounting invariant every corrupt input must keep.
    """
    trace = build_trace([data], "corrupt.log")
    try:
        stats = trace.stats
        assert stats.total_lines == physical_lines(data)
        assert stats.accounted_lines == stats.total_lines, stats.outcomes
        for view in (trace.graph_breaks, trace.recompiles, trace.failures, trace.compile_times):
            assert isinstance(view, list)
        if pages:
            assert render_tree(trace).pages
    finally:
        trace.close()
    return trace


def physical_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def problems(trace: Trace) -> set[tuple[str, int]]:
    """(reason, line) of every skipped line and every damaged payload."""
    stats = trace.stats
    return {
        (reason, line)
        for reason, lines in stats.lines_by_reason.items()
        if reason in SKIP_REASONS or reason == "md5_mismatch"
        for line in lines
    }


# -- the structure of a clean corpus trace ---------------------------------------------------------
@dataclass(frozen=True)
class Rec:
    """One record of a clean trace: its header line (1-based) and payload line count."""

    line: int
    payload_lines: int
    is_str: bool


@dataclass(frozen=True)
class Clean:
    """A clean corpus trace split into physical lines (with their ends) and records."""

    name: str
    lines: list[bytes]
    records: list[Rec]

    @property
    def data(self) -> bytes:
        return b"".join(self.lines)

    def start(self, line: int) -> int:
        """Byte offset of physical line ``line`` (1-based)."""
        return sum(len(raw) for raw in self.lines[: line - 1])

    def records_before(self, line: int) -> int:
        """Records (not string-table lines) whose header comes before ``line``."""
        return sum(1 for r in self.records if r.line < line and not r.is_str)


def clean(path: Path, *, max_lines: int | None = None) -> Clean:
    """Split a corpus trace; ``max_lines`` keeps only whole records up to about that many lines."""
    lines = path.read_bytes().splitlines(keepends=True)
    records: list[Rec] = []
    for number, raw in enumerate(lines, 1):
        if raw.startswith(b"\t"):
            continue
        match = HEADER.search(raw.decode("utf-8"))
        assert match is not None, f"{path}:{number} is not a clean trace line"
        count = 0
        while number + count < len(lines) and lines[number + count].startswith(b"\t"):
            count += 1
        records.append(Rec(number, count, b'] {"str": ' in raw))
    if max_lines is not None:
        ends = [r.line for r in records if r.line > max_lines]
        if ends:
            lines = lines[: ends[0] - 1]
            records = [r for r in records if r.line < ends[0]]
    return Clean(path.name, lines, records)


def torch_213(folder: str, pattern: str = "*.log") -> Path:
    found = sorted((TORCH_213 / folder).glob(pattern))
    if not found:
        pytest.fail(f"no corpus trace in {TORCH_213 / folder}")
    return found[0]


CLEAN_TRACES = {
    "comp_metrics": lambda: clean(tlparse_input("comp_metrics.log")),
    "links": lambda: clean(tlparse_input("links.log")),
    "chromium_events": lambda: clean(tlparse_input("chromium_events.log")),
    "torch213_simple": lambda: clean(torch_213("simple"), max_lines=1500),
}


@pytest.fixture(params=sorted(CLEAN_TRACES), scope="module")
def base(request: pytest.FixtureRequest) -> Clean:
    trace = CLEAN_TRACES[request.param]()
    assert read(trace.data).stats.is_clean, trace.name
    return trace


def sample(records: list[Rec], most: int = 40) -> list[Rec]:
    """Every record of a small trace; an even spread of ``most`` of a big one."""
    if len(records) <= most:
        return records
    step = len(records) / most
    return [records[int(i * step)] for i in range(most)]


# -- cuts: a killed process leaves a trace that stops anywhere -------------------------------------
def cuts(base: Clean, rec: Rec) -> Iterator[tuple[str, int, set[tuple[str, int]], int]]:
    """(kind, byte offset, expected problems, expected records) for each way ``rec`` can be cut."""
    header = base.lines[rec.line - 1]
    start = base.start(rec.line)
    before = base.records_before(rec.line)
    with_rec = before + (0 if rec.is_str else 1)
    json_at = header.index(b"] {") + 2
    body_end = len(header.rstrip(b"\r\n"))
    yield "at_the_record_start", start, set(), before
    yield "mid_header", start + 10, {("bad_header", rec.line)}, before
    yield "mid_json", start + (json_at + body_end) // 2, {("bad_json", rec.line)}, before
    no_payload = {("md5_mismatch", rec.line)} if rec.payload_lines else set()
    yield "before_the_header_newline", start + body_end, no_payload, with_rec
    if rec.payload_lines:
        first = start + len(header)
        damaged = {("md5_mismatch", rec.line)}
        yield "after_the_payload_tab", first + 1, damaged, with_rec
        middle = rec.line + 1 + rec.payload_lines // 2
        line_start = base.start(middle)
        yield "mid_payload_line", line_start + len(base.lines[middle - 1]) // 2, damaged, with_rec
        if rec.payload_lines > 1:
            yield (
                "between_payload_lines",
                base.start(rec.line + rec.payload_lines),
                damaged,
                with_rec,
            )


def test_cut_at_every_kind_of_boundary(base: Clean) -> None:
    data = base.data
    tried = 0
    for rec in sample(base.records):
        for kind, offset, expected, records in cuts(base, rec):
            cut = data[:offset]
            trace = read(cut)
            where = f"{base.name} cut {kind} of the record on line {rec.line}"
            assert problems(trace) == expected, where
            assert trace.stats.records == records, where
            tried += 1
    assert tried >= 4 * min(len(base.records), 40)


def test_the_last_record_of_a_cut_trace_is_kept_as_far_as_it_goes(tmp_path: Path) -> None:
    base = clean(tlparse_input("comp_metrics.log"))
    rec = next(r for r in base.records if r.payload_lines > 4)
    offset = base.start(rec.line + 3) + 5  # two whole payload lines and 4 bytes of the third
    trace = build_trace([base.data[:offset]], "cut.log")
    try:
        artifact = next(a for a in trace.artifacts() if a.line == rec.line)
        assert artifact.payload is not None
        kept = trace.read_payload(artifact.payload).split("\n")
        expected = [raw.decode()[1:].rstrip("\n") for raw in base.lines[rec.line : rec.line + 2]]
        assert kept[:2] == expected
        assert kept[2] == base.lines[rec.line + 2].decode()[1:5]
    finally:
        trace.close()


# -- payload lines lost or written twice -----------------------------------------------------------
def test_payload_lines_dropped_or_duplicated(base: Clean) -> None:
    with_payload = [r for r in base.records if r.payload_lines >= 2]
    assert with_payload, base.name
    for rec in sample(with_payload, 15):
        index = rec.line + rec.payload_lines // 2  # 0-based index of a middle payload line
        for kind, lines in (
            ("dropped", base.lines[:index] + base.lines[index + 1 :]),
            ("duplicated", base.lines[: index + 1] + base.lines[index:]),
        ):
            trace = read(b"".join(lines))
            where = f"{base.name}: payload line {index + 1} {kind}"
            assert problems(trace) == {("md5_mismatch", rec.line)}, where
            assert trace.stats.records == base.records_before(10**9), where


def test_a_lost_header_orphans_its_payload_lines(base: Clean) -> None:
    rec = next(r for r in base.records if r.payload_lines and not r.is_str)
    lines = base.lines[: rec.line - 1] + base.lines[rec.line :]
    trace = read(b"".join(lines))
    assert trace.stats.outcomes["orphan_payload"] == rec.payload_lines
    assert trace.stats.lines_by_reason["orphan_payload"][0] == rec.line
    assert trace.stats.records == base.records_before(10**9) - 1


def test_a_header_written_twice_keeps_both_records(base: Clean) -> None:
    rec = next(r for r in base.records if r.payload_lines and not r.is_str)
    lines = base.lines[: rec.line] + base.lines[rec.line - 1 :]
    trace = read(b"".join(lines))
    assert problems(trace) == {("md5_mismatch", rec.line)}  # the first copy lost its payload
    assert trace.stats.records == base.records_before(10**9) + 1


# -- two ranks in one file -------------------------------------------------------------------------
def rank_logs() -> tuple[Clean, Clean]:
    zero = clean(torch_213("multi_rank", "*rank_0*.log"), max_lines=800)
    one = clean(torch_213("multi_rank", "*rank_1*.log"), max_lines=800)
    return zero, one


def record_blocks(trace: Clean) -> list[list[bytes]]:
    """Each record's header with its payload lines."""
    return [trace.lines[r.line - 1 : r.line + r.payload_lines] for r in trace.records]


def test_two_ranks_interleaved_record_by_record() -> None:
    zero, one = rank_logs()
    blocks = [*zip(record_blocks(zero), record_blocks(one), strict=False)]
    data = b"".join(b"".join(a) + b"".join(b) for a, b in blocks)
    trace = read(data)
    stats = trace.stats
    alone = read(b"".join(b"".join(a) for a, _ in blocks)).stats  # rank 0's records by themselves
    # every rank-1 record is skipped with its payload lines, except string-table lines (shared)
    # and records that name no rank (torch_version): nothing says they are not rank 0's
    ones = [r for r in one.records[: len(blocks)] if not r.is_str]
    named = [r for r in ones if b'"rank": ' in one.lines[r.line - 1]]
    assert trace.rank == 0
    assert stats.records == alone.records + len(ones) - len(named) > 0
    assert stats.findings["md5_mismatch"] == 0
    other = sum(1 + r.payload_lines for r in named)
    assert stats.outcomes["other_rank"] == alone.outcomes["other_rank"] + other
    assert "other rank" in stats.summary()


def test_two_ranks_interleaved_line_by_line() -> None:
    """Writers racing at line granularity: payloads get mixed up, but nothing is lost."""
    zero, one = rank_logs()
    mixed = [line for pair in zip(zero.lines, one.lines, strict=False) for line in pair]
    trace = read(b"".join(mixed), pages=True)
    stats = trace.stats
    assert stats.records > 0
    assert stats.outcomes["other_rank"] > 0
    assert stats.findings["md5_mismatch"] > 0
    assert not stats.is_clean


# -- line endings and stray bytes ------------------------------------------------------------------
def test_mixed_line_endings_read_like_lf(base: Clean) -> None:
    mixed = b"".join(
        raw.replace(b"\n", b"\r\n") if i % 2 else raw for i, raw in enumerate(base.lines)
    )
    lf, crlf = read(base.data), read(mixed)
    assert crlf.stats.is_clean, crlf.stats.summary()
    assert crlf.stats.outcomes == lf.stats.outcomes
    assert [a.path for a in crlf.artifacts()] == [a.path for a in lf.artifacts()]


def mutate(base: Clean, seed: int, make: bytes) -> tuple[bytes, int, int]:
    """Put ``make`` at a random byte of a random line: the data, the line number, the column."""
    rng = random.Random(seed)
    number = rng.randrange(1, len(base.lines) + 1)
    raw = base.lines[number - 1]
    at = rng.randrange(0, max(1, len(raw) - 1))
    lines = list(base.lines)
    lines[number - 1] = raw[:at] + make + raw[at:]
    return b"".join(lines), number, at


@pytest.mark.parametrize(
    "stray", [b"\xff", b"\xc3", b"\x00", b"\x00\x00\x00\x00"], ids=["ff", "c3", "nul", "nuls"]
)
def test_stray_bytes_anywhere_cost_at_most_their_record(base: Clean, stray: bytes) -> None:
    whole = base.records_before(10**9)
    for seed in range(25):
        data, number, at = mutate(base, seed, stray)
        trace = read(data)
        where = f"{base.name}: {stray!r} put into line {number} (seed {seed})"
        found = problems(trace)
        if not found:
            # only a NUL in the glog prefix goes unnoticed (tlparse's header pattern takes any
            # text up to the ':' as the path); JSON and payload text are never changed silently
            raw = base.lines[number - 1]
            assert stray.strip(b"\x00") == b"" and at < raw.find(b"] {"), where
        # the damage stays with the record it hit: its header line, or its payload
        owner = max(r.line for r in base.records if r.line <= number)
        for reason, line in found:
            assert line in (number, owner) or reason == "orphan_payload", (where, found)
        assert whole - 1 <= trace.stats.records <= whole, where


def test_non_utf8_header_orphans_its_payload(base: Clean) -> None:
    rec = next(r for r in base.records if r.payload_lines and not r.is_str)
    lines = list(base.lines)
    lines[rec.line - 1] = lines[rec.line - 1].replace(b"] {", b"] \xfe{", 1)
    trace = read(b"".join(lines))
    orphans = {("orphan_payload", rec.line + 1 + i) for i in range(rec.payload_lines)}
    assert problems(trace) == {("not_utf8", rec.line), *orphans}
    assert trace.stats.outcomes["orphan_payload"] == rec.payload_lines


# -- very long lines -------------------------------------------------------------------------------
def ten_mb_line(kind: str) -> tuple[bytes, str | None]:
    """A 10 MB line of some kind, and the reason it must be skipped for (None: it is read)."""
    big = 10 * MB
    if kind == "garbage_line":
        return b"x" * big + b"\n", "bad_header"
    if kind == "garbage_line_without_newline_at_the_end":
        return b"x" * big, "bad_header"
    if kind == "unterminated_json":
        return H.encode() + b'{"artifact": {"name": "' + b"a" * big + b"\n", "bad_json"
    if kind == "valid_json":
        envelope = {"artifact": {"name": "a", "encoding": "string", "x": "b" * big}}
        return trace_lines(envelope).encode(), None
    if kind == "payload_line":
        envelope = {"artifact": {"name": "big", "encoding": "string"}, **CID}
        return trace_lines(envelope, "c" * big).encode(), None
    assert kind == "non_utf8_line"
    return b"\xff" * big + b"\n", "not_utf8"


TEN_MB_KINDS = [
    "garbage_line",
    "garbage_line_without_newline_at_the_end",
    "unterminated_json",
    "valid_json",
    "payload_line",
    "non_utf8_line",
]


@pytest.mark.parametrize("kind", TEN_MB_KINDS)
def test_a_10_mb_line(kind: str) -> None:
    line, reason = ten_mb_line(kind)
    base = clean(tlparse_input("comp_metrics.log"))
    at = base.records[5].line - 1
    if kind.endswith("at_the_end"):
        data, number = base.data + line, len(base.lines) + 1
    else:
        data, number = b"".join([*base.lines[:at], line, *base.lines[at:]]), at + 1
    trace = read(data)  # its time, at growing sizes: bench/hostile_bench.py long-line
    expected = {(reason, number)} if reason else set()
    assert problems(trace) == expected
    assert trace.stats.records == base.records_before(10**9) + (1 if reason is None else 0)
    for sample_ in trace.stats.samples:  # the Parse health page quotes a bounded excerpt
        assert len(sample_.detail) <= SAMPLE_CHARS + 1


# -- valid JSON, wrong shapes ----------------------------------------------------------------------


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


#: Whole lines whose JSON parses but is not a usable envelope, with what must be reported.
WRONG_ENVELOPES: dict[str, tuple[str, str | None]] = {
    "array": (H + "[1, 2]", "not_object"),
    "string": (H + '"artifact"', "not_object"),
    "number": (H + "17", "not_object"),
    "null": (H + "null", "not_object"),
    "true": (H + "true", "not_object"),
    "empty_object": (H + "{}", None),
    "only_context_keys": (H + json.dumps({**CID, "attempt": 1}), None),
    "nested_too_deep": (H + '{"x": ' + deep(MAX_JSON_DEPTH + 5) + "}", "bad_json"),
    "nested_beyond_the_recursion_limit": (H + '{"x": ' + deep(100_000) + "}", "bad_json"),
    "nan_and_infinity": (H + '{"compilation_metrics": {"a": NaN, "b": -Infinity}}', None),
    "duplicate_keys": (H + '{"link": {"name": "a"}, "link": {"name": "b", "url": 5}}', None),
    "str_not_a_list": (H + '{"str": "file.py"}', "bad_str"),
    "str_id_negative": (H + '{"str": ["file.py", -1]}', "bad_str"),
    "str_id_huge": (H + '{"str": ["file.py", 1000000000000]}', "bad_str"),
    "str_id_float": (H + '{"str": ["file.py", 1.5]}', "bad_str"),
    "str_text_not_a_string": (H + '{"str": [7, 3]}', "bad_str"),
    "thread_id_of_5000_digits": (
        "V1206 15:18:15.925000 " + "7" * 5000 + ' a.py:1] {"x": 1}',
        "bad_header",
    ),
    "line_number_of_5000_digits": (
        "V1206 15:18:15.925000 1 a.py:" + "7" * 5000 + '] {"x": 1}',
        "bad_header",
    ),
    "id_with_5000_digits": (H + '{"x": {}, "frame_id": ' + "9" * 5000 + "}", "bad_json"),
}


@pytest.mark.parametrize("kind", sorted(WRONG_ENVELOPES))
def test_valid_json_of_the_wrong_type(kind: str) -> None:
    line, reason = WRONG_ENVELOPES[kind]
    base = clean(tlparse_input("comp_metrics.log"))
    at = base.records[3].line - 1
    data = b"".join([*base.lines[:at], line.encode() + b"\n", *base.lines[at:]])
    trace = read(data, pages=True)
    expected = {(reason, at + 1)} if reason else set()
    assert problems(trace) == expected
    assert trace.stats.records == base.records_before(10**9) + (0 if reason else 1)


#: Context keys of the wrong type: the record is kept, under "unknown", and the finding noted.
BAD_CONTEXT: dict[str, dict[str, Any]] = {
    "frame_id_negative": {"frame_id": -1},
    "frame_id_huge": {"frame_id": 2**64},
    "frame_id_of_4000_digits": {"frame_id": 10**3999},
    "attempt_float": {"attempt": 1.5},
    "frame_id_string": {"frame_id": "0"},
    "frame_id_bool": {"frame_id": True},
    "compiled_autograd_id_list": {"compiled_autograd_id": [1]},
}


@pytest.mark.parametrize("kind", sorted(BAD_CONTEXT))
def test_negative_huge_or_mistyped_compile_ids(kind: str) -> None:
    envelope = {"artifact": {"name": "x", "encoding": "string"}, **CID, **BAD_CONTEXT[kind]}
    data = trace_lines(envelope, "payload").encode()
    trace = read(data, pages=True)
    assert trace.stats.records == 1
    assert trace.stats.findings["bad_compile_id"] == 1
    (unit,) = trace.units.values()
    assert unit.id is None
    assert [a.path for a in unit.artifacts] == ["unknown_1/x_0.txt"]


def test_str_ids_never_defined_name_an_unknown_file() -> None:
    stack = [{"line": 3, "name": "f", "filename": 12345}, {"line": 4, "name": "g", "filename": -2}]
    data = (
        trace_lines({"str": ["/defined.py", 0]})
        + trace_lines({"dynamo_start": {"stack": [*stack, {"line": 1, "filename": 0}]}, **CID})
    ).encode()
    trace = read(data, pages=True)
    assert trace.stats.is_clean
    frames = trace.unit("[0/0]").stack
    assert [f.line for f in frames] == [3, 4, 1]
    assert frames[0].filename == frames[1].filename != "/defined.py"
    assert frames[2].filename == "/defined.py"


def test_unknown_event_types_are_kept() -> None:
    kinds = ["brand_new_event", "another", "x" * 300, "ünïcode", "<b>html</b>"]
    data = "".join(
        trace_lines({kind: {"n": i}, **CID}, f"payload {i}" if i % 2 else None)
        for i, kind in enumerate(kinds)
    ).encode()
    trace = read(data, pages=True)
    assert trace.stats.records == len(kinds)
    assert trace.stats.is_clean
    assert set(trace.stats.unknown_events) == set(kinds)


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ({"dynamo_guards": {}}, deep(5000)),
        ({"artifact": {"name": "a", "encoding": "json"}}, deep(5000)),
        (
            {"artifact": {"name": "recompile_reasons", "encoding": "string"}},
            deep(MAX_JSON_DEPTH + 1),
        ),
        (
            {
                "artifact": {
                    "name": "inductor_provenance_tracking_node_mappings",
                    "encoding": "json",
                }
            },
            '{"a":' * 5000 + "1" + "}" * 5000,
        ),
        ({"artifact": {"name": "torch_version", "encoding": "json"}}, deep(5000)),
        ({"chromium_event": {}}, deep(5000)),
    ],
    ids=[
        "guards",
        "json_artifact",
        "recompile_reasons",
        "node_mappings",
        "torch_version",
        "chromium",
    ],
)
def test_payloads_nested_too_deeply_are_kept_as_events(event: dict, payload: str) -> None:
    data = trace_lines({**event, **CID}, payload).encode()
    trace = read(data, pages=True)
    assert trace.stats.records == 1
    assert trace.stats.findings["bad_payload"] == 1
    assert not [a for a in trace.artifacts() if a.path and a.kind != "chromium_event"]


# -- whole inputs through the command line ---------------------------------------------------------
@dataclass(frozen=True)
class CliCase:
    """An input as the user gives it to ``tlsite build``, and what the command must do."""

    make: Any  # (tmp_path) -> path to pass
    code: int  # exit code without --strict
    message: str  # regex the one-line message (summary or error) must match
    skipped: tuple[tuple[str, int], ...] = ()  # (reason, line) listed on the Parse health page


def _file(name: str, data: Any) -> Any:
    """A ``make`` that writes ``data()`` (made only when the case runs) to ``name``."""

    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(data())
        return path

    return make


def _comp_metrics_with(edit: Any) -> Any:
    return lambda: edit(clean(tlparse_input("comp_metrics.log")))


def _binary() -> bytes:
    rng = random.Random(8)
    return bytes(rng.randrange(256) for _ in range(256 * 1024))


def _directory_without_logs(tmp: Path) -> Path:
    folder = tmp / "no_logs"
    folder.mkdir()
    (folder / "notes.md").write_text("not a log\n", encoding="utf-8")
    (folder / "empty.log").write_bytes(b"")
    (folder / "sub").mkdir()
    return folder


def _unreadable(tmp: Path) -> Path:
    """A file the OS refuses to read, even for root: /proc/self/mem fails with EIO at offset 0."""
    link = tmp / "unreadable.log"
    link.symlink_to("/proc/self/mem")
    return link


def _cut_mid_json(base: Clean) -> bytes:
    last = base.records[-1]
    return base.data[: base.start(last.line) + 150]


def _interleaved_ranks() -> bytes:
    zero, one = rank_logs()
    return b"".join(
        b"".join(a) + b"".join(b)
        for a, b in zip(record_blocks(zero), record_blocks(one), strict=False)
    )


def _dropped_payload_line(base: Clean) -> bytes:
    rec = next(r for r in base.records if r.payload_lines > 2)
    return b"".join(base.lines[: rec.line + 1] + base.lines[rec.line + 2 :])


def _garbage_and_nul(base: Clean) -> bytes:
    """Two junk lines put between records (lines 31 and 42 of the result)."""
    lines = list(base.lines)
    assert {31, 42} <= {r.line for r in base.records}
    lines.insert(41, b"\xff\xfe binary junk\n")
    lines.insert(30, b"\x00\x00 not a trace line\n")
    return b"".join(lines)


CLI_CASES: dict[str, CliCase] = {
    "cut_mid_json": CliCase(
        _file("cut.log", _comp_metrics_with(_cut_mid_json)),
        0,
        r"1 line skipped",
        (("bad_json", 65),),
    ),
    "payload_line_dropped": CliCase(
        _file("dropped.log", _comp_metrics_with(_dropped_payload_line)),
        0,
        r"1 payload MD5 mismatch$",
        (("md5_mismatch", 10),),
    ),
    "garbage_and_non_utf8_lines": CliCase(
        _file("junk.log", _comp_metrics_with(_garbage_and_nul)),
        0,
        r"2 lines skipped \(1 bad header, 1 not utf8; first at line 31\)",
        (("bad_header", 31), ("not_utf8", 43)),
    ),
    "crlf": CliCase(
        _file(
            "crlf.log",
            lambda: tlparse_input("comp_metrics.log").read_bytes().replace(b"\n", b"\r\n"),
        ),
        0,
        r"12 records from 65 lines$",
    ),
    "two_ranks_interleaved": CliCase(
        _file("ranks.log", _interleaved_ranks), 0, r"lines skipped \(\d+ other rank;"
    ),
    "10_mb_line": CliCase(
        _file(
            "long.log", lambda: b"y" * (10 * MB) + b"\n" + tlparse_input("links.log").read_bytes()
        ),
        0,
        r"1 line skipped \(1 bad header; first at line 1\)",
        (("bad_header", 1),),
    ),
    # no record read at all: not a trace, whatever the reason (no report that looks clean)
    "nested_too_deep": CliCase(
        _file("deep.log", lambda: (H + '{"a": ' + deep(10_000) + "}\n").encode()),
        1,
        r'deep\.log: not a TORCH_TRACE log: .*; it starts with "V\d{4} ',
    ),
    "binary_file": CliCase(
        _file("model.bin", _binary), 1, r"model\.bin: not a TORCH_TRACE log: .*it starts with"
    ),
    "empty_file": CliCase(_file("empty.log", lambda: b""), 1, r"empty\.log: empty file$"),
    "directory_without_logs": CliCase(
        _directory_without_logs, 1, r"no_logs: no trace logs found \(looked at 3 files"
    ),
    "unreadable_file": CliCase(
        _unreadable, 1, r"unreadable\.log: (input/output error|permission denied)"
    ),
    "corrupt_gzip": CliCase(
        _file("trace.log.gz", lambda: b"\x1f\x8b\x08\x00" + b"\x00" * 64),
        1,
        r"trace\.log\.gz: corrupt gzip data",
    ),
}


class _HealthRows(HTMLParser):
    """The (line, reason) rows of the Parse health page's "Where" table."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def health_rows(site: Path) -> set[tuple[int, str]]:
    parser = _HealthRows()
    parser.feed((site / "health.html").read_text(encoding="utf-8"))
    return {(int(r[0]), r[1]) for r in parser.rows if len(r) == 3 and r[0].isdigit()}


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["build", *args, "--no-browser", "--no-zip"])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_each_kind_of_damage_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    case = CLI_CASES[name]
    given = case.make(tmp_path)
    site = tmp_path / "report"
    code, out, err = run_cli([str(given), "-o", str(site)], capsys)
    assert code == case.code, err
    assert "Traceback" not in out + err
    if code == cli.EXIT_FAILED:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err  # one clear line that names the input and says why
        assert re.search(case.message, lines[0]), lines[0]
        assert not site.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report")]
        return
    summary = [line for line in out.splitlines() if " records from " in line]
    assert len(summary) == 1, out
    assert re.search(case.message, summary[0]), summary[0]
    assert (site / "index.html").is_file()
    rows = health_rows(site)
    reasons = {**SKIP_REASONS, **FINDING_REASONS}
    for reason, line in case.skipped:
        assert (line, reasons[reason]) in rows, (reason, line, sorted(rows)[:10])
    stats_clean = "skipped" not in summary[0] and "mismatch" not in summary[0]
    strict, _, strict_err = run_cli(
        [str(given), "-o", str(site), "--overwrite", "--strict"], capsys
    )
    assert strict == (cli.EXIT_OK if stats_clean else cli.EXIT_STRICT), strict_err
    assert (site / "index.html").is_file()  # --strict still builds the report


def test_an_unreadable_file_is_named_when_permissions_deny_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode")
    log = tmp_path / "secret.log"
    log.write_bytes(tlparse_input("links.log").read_bytes())
    log.chmod(0)
    code, _, err = run_cli([str(log), "-o", str(tmp_path / "out")], capsys)
    assert code == cli.EXIT_FAILED
    assert err.strip() == f"tlsite: error: {log}: permission denied"


def test_the_health_page_lists_each_skipped_line_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Many kinds of damage in one trace: each bad line is listed, in order, with its reason."""
    base = clean(tlparse_input("comp_metrics.log"))
    lines = list(base.lines)
    damage = [
        b"garbage\n",
        b"\xff\xfe\n",
        (H + "[1]\n").encode(),
        (H + '{"str": 5}\n').encode(),
        (H + '{"x": ' + deep(300) + "}\n").encode(),
    ]
    before = [base.records[i].line for i in (1, 4, 7, 9, 11)]  # between records, never in a payload
    for line, bad in sorted(zip(before, damage, strict=True), reverse=True):
        lines.insert(line - 1, bad)
    log = tmp_path / "damaged.log"
    log.write_bytes(b"".join(lines))
    code, out, _ = run_cli([str(log), "-o", str(tmp_path / "site")], capsys)
    assert code == cli.EXIT_OK
    assert "5 lines skipped" in out
    rows = health_rows(tmp_path / "site")
    reasons = ["bad_header", "not_utf8", "not_object", "bad_str", "bad_json"]
    expected = {
        (line + i, SKIP_REASONS[r]) for i, (line, r) in enumerate(zip(before, reasons, strict=True))
    }
    assert expected <= rows

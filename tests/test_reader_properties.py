"""Property tests of the reader: any bytes are read without an exception, every line once.

The reader works on a byte buffer refilled chunk by chunk and finds runs of payload lines with
one regular expression, which is fast but easy to get wrong at a chunk boundary. Three
properties, each checked on arbitrary bytes and on generated near-traces (headers, envelopes,
payload lines, blank lines, junk, CRLF, cut lines):

- reading never raises, and every physical line is accounted for exactly once: the outcomes
  add up to the line count, and they equal those of :func:`reference_outcomes`, a plain
  line-by-line reading of the same rules written independently of the reader's buffer logic;
- the result does not depend on how the input is split into chunks;
- the whole model (handlers, analyses, Markdown pages) is built from any near-trace.

``bench/fuzz_reader.py`` runs the same checks under atheris for longer.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlsite.core.builder import build_trace
from tlsite.core.records import (
    HEADER,
    HEADER_WINDOW,
    RecordReader,
    event_type_of,
    loads_bounded,
    valid_string_id,
)
from tlsite.core.render.pages import render_tree
from tlsite.core.stats import ParseStats

_MAX_HEADER_DIGITS = 20  # records._MAX_HEADER_DIGITS: longer thread ids/line numbers are junk


# -- the reference: one line at a time -------------------------------------------------------------
def physical_lines(data: bytes) -> list[bytes]:
    """The lines as an editor shows them (a last line without a newline is a line)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def reference_outcomes(data: bytes) -> tuple[Counter[str], list[tuple[int, str, int]]]:
    """Line outcomes and (line, event type, payload lines) of each record, read plainly."""
    lines = physical_lines(data)
    outcomes: Counter[str] = Counter()
    records: list[tuple[int, str, int]] = []
    expected_rank: Any = None
    rank_known = False
    i = 0
    while i < len(lines):
        number = i + 1
        raw = lines[i]
        i += 1
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw:
            outcomes["blank"] += 1
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            outcomes["not_utf8"] += 1
            continue
        match = HEADER.search(text, 0, HEADER_WINDOW)
        if match is None:
            outcomes["orphan_payload" if text.startswith("\t") else "bad_header"] += 1
            continue
        if max(len(match["thread"]), len(match["lineno"])) > _MAX_HEADER_DIGITS:
            outcomes["bad_header"] += 1
            continue
        try:
            envelope = loads_bounded(text[match.start("json") :])
        except ValueError:
            outcomes["bad_json"] += 1
            continue
        if not isinstance(envelope, dict):
            outcomes["not_object"] += 1
            continue
        payload = 0
        if "has_payload" in envelope:
            while i < len(lines):
                if lines[i].startswith(b"\t"):
                    part = lines[i][:-1] if lines[i].endswith(b"\r") else lines[i]
                    try:
                        part.decode("utf-8")
                        payload += 1
                    except UnicodeDecodeError:
                        outcomes["not_utf8"] += 1
                elif lines[i] in (b"", b"\r"):
                    outcomes["blank"] += 1
                else:
                    break
                i += 1
        kind = event_type_of(envelope)
        if kind == "str":
            value = envelope["str"]
            ok = valid_string_id(value) and isinstance(value[0], str)
            outcomes["interned" if ok else "bad_str"] += 1
            outcomes["payload"] += payload
            continue
        rank = envelope.get("rank")
        other = rank_known and rank is not None and rank != expected_rank
        if not rank_known and type(rank) is int:
            expected_rank, rank_known = rank, True
        records.append((number, kind, payload))
        if other:
            outcomes["other_rank"] += 1 + payload
        else:
            outcomes["record"] += 1
            outcomes["payload"] += payload
    return +outcomes, records


# -- running the reader ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Reading:
    """Everything the reader reports about an input, comparable between readings."""

    total: int
    outcomes: Counter[str]
    findings: Counter[str]
    records: list[tuple[Any, ...]]
    strings: list[str | None]
    sample_lines: list[int]


def read(chunks: Iterable[bytes]) -> Reading:
    stats = ParseStats(source="fuzz.log")
    reader = RecordReader(chunks, stats)
    records = [
        (r.line, r.event_type, r.payload_lines, r.payload_bytes, r.md5_ok, r.other_rank)
        for r in reader
    ]
    return Reading(
        stats.total_lines,
        +stats.outcomes,
        +stats.findings,
        records,
        reader.strings.as_list(),
        [s.line for s in stats.samples],
    )


def split(data: bytes, sizes: list[int]) -> list[bytes]:
    """``data`` in chunks of the given sizes (cycled), with empty chunks mixed in."""
    chunks: list[bytes] = []
    at = 0
    for n in sizes * (len(data) // max(1, sum(sizes)) + 1) if sizes else []:
        if at >= len(data):
            break
        chunks.append(data[at : at + n])
        chunks.append(b"")
        at += n
    if at < len(data):
        chunks.append(data[at:])
    return chunks


def check_accounting(data: bytes, reading: Reading) -> None:
    total = len(physical_lines(data)) if data else 0
    assert reading.total == total
    assert sum(reading.outcomes.values()) == total, reading.outcomes
    assert all(1 <= line <= max(total, 1) for line in reading.sample_lines)


# -- generated near-traces -------------------------------------------------------------------------
PREFIXES = [
    "V1206 15:18:15.925000 1500233 torch/_dynamo/utils.py:1288] ",
    "[rank1]:I0101 00:00:00.000000 7 a.py:1] ",
    "E1231 23:59:59.999999 0 x:0] ",
    "V1206 15:18:15.92500 1 broken.py:1] ",  # one digit short: not a header
    "I0101 00:00:00.000000 " + "9" * 21 + " long_thread_id.py:1] ",
]
EVENTS = ["artifact", "dynamo_output_graph", "compilation_metrics", "str", "link", "x", ""]
ids = st.one_of(st.none(), st.integers(-2, 3), st.just(2**64), st.sampled_from(["0", 1.5, True]))
texts = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=20)


@st.composite
def envelopes(draw: st.DrawFn, payload: str) -> dict[str, Any]:
    event = draw(st.sampled_from(EVENTS))
    envelope: dict[str, Any] = {}
    if draw(st.booleans()):
        envelope["rank"] = draw(ids)
    if event == "str":
        envelope["str"] = draw(
            st.one_of(st.tuples(texts, st.integers(-1, 3)).map(list), texts, st.just([1, 2]))
        )
    elif event:
        envelope[event] = draw(st.one_of(st.just({}), st.dictionaries(texts, texts, max_size=2)))
    for key in ("frame_id", "frame_compile_id", "attempt"):
        if draw(st.booleans()):
            envelope[key] = draw(ids)
    if draw(st.integers(0, 3)):
        md5 = hashlib.md5(payload.encode()).hexdigest()
        envelope["has_payload"] = draw(st.sampled_from([md5, md5, "0" * 32, 5]))
    return envelope


@st.composite
def near_traces(draw: st.DrawFn) -> bytes:
    """Lines a trace has, and the damage real traces show, in any order."""
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["record", "record", "payload", "blank", "junk", "cut"]))
        if kind == "record":
            payload_lines = draw(st.lists(texts, max_size=4))
            envelope = draw(envelopes("\n".join(payload_lines)))
            line = draw(st.sampled_from(PREFIXES)) + json.dumps(envelope)
            lines.append(line.encode())
            for text in payload_lines:  # writers stutter: blank lines inside a payload
                lines += draw(st.lists(st.sampled_from([b"", b"\r"]), max_size=1))
                lines.append(b"\t" + text.encode())
        elif kind == "payload":
            lines.append(b"\t" + draw(st.binary(max_size=12)).replace(b"\n", b""))
        elif kind == "blank":
            lines.append(draw(st.sampled_from([b"", b"\r", b" "])))
        elif kind == "junk":
            lines.append(draw(st.binary(max_size=30)).replace(b"\n", b""))
        else:
            line = (draw(st.sampled_from(PREFIXES)) + '{"artifact": {"name": "a"}}').encode()
            lines.append(line[: draw(st.integers(0, len(line)))])
    ending = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = ending.join(lines)
    return data + ending if lines and draw(st.booleans()) else data


SETTINGS = settings(deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
chunk_sizes = st.lists(st.integers(1, 64), min_size=1, max_size=8)


def check_against_reference(data: bytes) -> None:
    """Every line accounted for, and the outcomes and records of the line-by-line reference."""
    reading = read([data])
    check_accounting(data, reading)
    outcomes, records = reference_outcomes(data)
    assert reading.outcomes == outcomes
    assert [r[:3] for r in reading.records] == records


@SETTINGS
@given(st.binary(max_size=2000))
def test_any_bytes_are_read_and_every_line_is_accounted_for(data: bytes) -> None:
    check_against_reference(data)


@pytest.mark.slow
@SETTINGS
@given(near_traces())
def test_near_traces_are_read_like_the_line_by_line_reference(data: bytes) -> None:
    check_against_reference(data)


@pytest.mark.slow
@settings(deadline=None, max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(near_traces(), st.binary(max_size=1000)), chunk_sizes)
def test_chunk_boundaries_do_not_change_the_result(data: bytes, sizes: list[int]) -> None:
    assert read(split(data, sizes)) == read([data])


@pytest.mark.slow
@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(near_traces())
def test_the_whole_model_is_built_from_any_near_trace(data: bytes) -> None:
    trace = build_trace([data], "fuzz.log")
    try:
        assert trace.stats.accounted_lines == trace.stats.total_lines
        for view in (trace.graph_breaks, trace.recompiles, trace.failures, trace.compile_times):
            assert isinstance(view, list)
        assert render_tree(trace).pages
    finally:
        trace.close()


def test_the_reference_reads_a_real_trace_like_the_reader() -> None:
    """The reference is only worth its name if it agrees on a real trace."""
    from corpus import tlparse_input

    for name in ("comp_metrics.log", "chromium_events.log", "links.log"):
        data = tlparse_input(name).read_bytes()
        for variant in (data, data.replace(b"\n", b"\r\n"), data[: len(data) // 2]):
            reading = read([variant])
            assert reading.outcomes == reference_outcomes(variant)[0], name

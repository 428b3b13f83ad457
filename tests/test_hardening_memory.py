"""Memory bounded by the largest page, list pages bounded and linear (issue #20, point 9).

A trace with hundreds of thousands of guards, symbols or graph breaks kept every record as an
object and listed every one on a page (one heading each). Past the caps of
:mod:`tlsite.core.limits` records are counted, not kept, and a page lists the first items of a
kind and says how many more there are and where. The tests count what the model keeps and
what a page shows (not wall time), on crafted traces of the size that broke.
"""

from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path

import pytest

from tlsite.core.builder import build_trace
from tlsite.core.limits import (
    ITEMS_PER_SECTION,
    LINKS,
    RECORDS_PER_KIND,
    RECORDS_PER_TRACE,
    ROWS,
    SECTIONS,
)
from tlsite.core.model import Trace
from tlsite.core.render.pages import ReportRenderer

HEAD = "V0101 00:00:00.000000 1 f.py:1] "


def ids(frame: int = 0, attempt: int = 0) -> str:
    return f'"frame_id": {frame}, "frame_compile_id": {attempt}, "attempt": 0'


def with_payload(envelope: str, payload: str) -> str:
    md5 = hashlib.md5(payload.encode()).hexdigest()
    body = payload.replace("\n", "\n\t")
    return f'{HEAD}{envelope[:-1]}, "has_payload": "{md5}"}}\n\t{body}\n'


def load(lines: list[str]) -> Trace:
    return build_trace(["".join(lines).encode()], "hostile.log")


def plain(markdown: str) -> str:
    """Page text with Markdown's escapes, code marks and tags removed (what a reader sees)."""
    text = re.sub(r"<[^>]+>", "", re.sub(r"\\(.)", r"\1", markdown)).replace("`", "")
    return html.unescape(text)


# -- records past RECORDS_PER_KIND ----------------------------------------------------------------
def test_guards_past_the_cap_are_counted_not_kept():
    """Every guard_added record was an object on its compile (a few hundred bytes each: 1 M
    tiny records took 3.3 GB). Past the cap the compile keeps a count and a line span, its page
    says how many are not shown and where, and Parse health counts them."""
    extra = 1_500
    lines = [
        f'{HEAD}{{"guard_added": {{"expr": "s0 > {i}"}}, {ids()}}}\n'
        for i in range(RECORDS_PER_KIND + extra)
    ]
    trace = load(lines)
    try:
        (unit,) = trace.units.values()
        assert len(unit.events) == RECORDS_PER_KIND
        renderer = ReportRenderer(trace)
        page = plain(renderer.unit_page(unit).standalone_markdown())
        first, last = RECORDS_PER_KIND + 1, RECORDS_PER_KIND + extra
        assert (
            f"1,500 more guard_added records not shown: tlsite keeps at most "
            f"{RECORDS_PER_KIND:,} of one type per compile, {RECORDS_PER_TRACE:,} in all; these "
            f"are lines {first:,}–{last:,} of raw.log." in page
        )
        assert page.count("guard s0 > ") == RECORDS_PER_KIND
        assert f"guard s0 > {RECORDS_PER_KIND - 1}" in page
        assert f"guard s0 > {RECORDS_PER_KIND} " not in page
        health = plain(renderer.health_page().markdown)
        finding = r"records past the most kept of one type in a compile, or in all.*\| 1500 \|"
        assert re.search(finding, health)
        assert f"| {first} | records past the most kept" in health
        assert "guard_added records of [0/0] from this one on" in health
        symbolic = plain(renderer.symbolic_shapes_page().markdown)
        assert "1,500 more guard_added records not shown" in symbolic
    finally:
        trace.close()


def test_records_past_the_trace_wide_cap_are_counted_on_their_compile_page(monkeypatch):
    """A storm of compiles, each under the per-compile cap, is bounded too."""
    monkeypatch.setattr("tlsite.core.registry.RECORDS_PER_TRACE", 100)
    lines = [
        f'{HEAD}{{"guard_added": {{"expr": "s0 > {i}"}}, {ids(0, unit)}}}\n'
        for unit in range(3)
        for i in range(40)
    ]
    trace = load(lines)
    try:
        kept = [len(unit.events) for unit in trace.units.values()]
        assert kept == [40, 40, 20]
        last = list(trace.units.values())[-1]
        page = plain(ReportRenderer(trace).unit_page(last).standalone_markdown())
        assert "20 more guard_added records not shown" in page
        assert "these are lines 101–120 of raw.log" in page
    finally:
        trace.close()


def test_unknown_records_past_the_cap_are_counted_on_their_compile_page():
    lines = [f'{HEAD}{{"my_event": {{"n": {i}}}, {ids()}}}\n' for i in range(RECORDS_PER_KIND + 7)]
    trace = load(lines)
    try:
        (unit,) = trace.units.values()
        assert len(unit.events) == RECORDS_PER_KIND
        page = plain(ReportRenderer(trace).unit_page(unit).standalone_markdown())
        assert "7 more my_event records not shown" in page
        assert trace.stats.unknown_events["my_event"] == RECORDS_PER_KIND + 7  # all counted
    finally:
        trace.close()


# -- list pages: graph breaks, failures, recompiles, symbolic shapes ------------------------------
def breaks_trace(count: int) -> list[str]:
    """``count`` distinct graph breaks, one per compile id of frame 0 (a recompile storm)."""
    envelope = '{"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, '
    return [
        with_payload(
            envelope + ids(0, i) + "}",
            f"Graph break in user code at /x/m.py:{i}\nGraph Break Reason: Unsupported {i}",
        )
        for i in range(count)
    ]


def _sections_in_pieces_without_contents(markdown: str) -> None:
    """A page of SECTIONS sections: after the first PIECE_SECTIONS, in boxes that the browser
    lays out when they near the screen, and no table of contents (long_tables)."""
    from tlsite.core.render.long_tables import PIECE_SECTIONS

    boxes = markdown.count('<div class="tlsite-sections-more" markdown>')
    assert boxes == -(-(SECTIONS - PIECE_SECTIONS) // PIECE_SECTIONS)
    assert markdown.split("---", 2)[1].endswith("hide:\n  - toc\n")


@pytest.mark.slow
@pytest.mark.parametrize("count", [20_000, 50_000])
def test_the_graph_breaks_page_lists_a_bounded_number(count: int):
    """One heading per distinct break made the page (and the build) quadratic in their count;
    now the table has ROWS rows, SECTIONS breaks have a section and the page says the rest."""
    trace = load(breaks_trace(count))
    try:
        renderer = ReportRenderer(trace)
        assert len(renderer.graph_breaks) == count
        markdown = renderer.graph_breaks_page().standalone_markdown()  # its table is HTML
        page = plain(markdown)
        assert f"{count:,} distinct graph breaks, most frequent first." in page
        assert len(re.findall(r"^## \d+\. ", page, re.M)) == SECTIONS
        assert len(re.findall(r'<tr>\n<td style="text-align: right;">\d+</td>', markdown)) == ROWS
        _sections_in_pieces_without_contents(markdown)
        assert f"{count - ROWS:,} more distinct graph breaks not shown" in page
        assert f"{count - SECTIONS:,} more graph breaks in detail not shown" in page
        recompiles = plain(renderer.recompiles_page().markdown)
        assert len(re.findall(r"^\[0/\d+\]$", recompiles, re.M)) == ROWS + 1  # + the first
        assert f"{count - 1 - ROWS:,} more recompiles not shown" in recompiles
        (frame,) = renderer.frames
        frame_page = plain(renderer.frame_page(frame).markdown)
        assert len(re.findall(r"^\[0/\d+\]$", frame_page, re.M)) == ROWS
        assert f"{count - ROWS:,} more compile ids not shown" in frame_page
        overview = renderer.overview().markdown
        no_stack = overview[overview.index("Compile ids with no recorded stack:") :]
        no_stack = no_stack[: no_stack.index("\n")]
        assert no_stack.count("](-_0_") == LINKS
        assert f" and {count - LINKS:,} more (see [all compile ids](compile_ids.md))" in no_stack
    finally:
        trace.close()


@pytest.mark.slow
def test_the_failures_page_lists_a_bounded_number():
    count = 20_000
    lines = [
        f'{HEAD}{{"compilation_metrics": {{"co_name": "f", "fail_type": "Unsupported", '
        f'"fail_reason": "reason {i}"}}, {ids(0, i)}}}\n'
        for i in range(count)
    ]
    trace = load(lines)
    try:
        renderer = ReportRenderer(trace)
        assert len(renderer.failures) == count
        markdown = renderer.failures_page().standalone_markdown()  # its table is HTML
        page = plain(markdown)
        assert f"This run had **{count:,} restart(s) and/or compilation failure(s)**" in page
        assert len(re.findall(r'<tr>\n<td><a href="-_0_\d+_0/index\.html">', markdown)) == ROWS
        assert len(re.findall(r"^## \[0/\d+\]: Unsupported$", page, re.M)) == SECTIONS
        _sections_in_pieces_without_contents(markdown)
        assert f"{count - ROWS:,} more restarts and failures not shown" in page
        assert f"{count - SECTIONS:,} more failures in detail not shown" in page
        times_markdown = renderer.compile_time_page().markdown  # its table is HTML
        assert len(re.findall(r'<tr><td><a href="-_0_\d+_0/index\.html">', times_markdown)) == ROWS
        assert f"{count - ROWS:,} more compile ids not shown" in plain(times_markdown)
    finally:
        trace.close()


@pytest.mark.slow
def test_the_symbolic_shapes_page_lists_a_bounded_number_of_compiles():
    count = 20_000
    lines = [
        f'{HEAD}{{"create_symbol": {{"symbol": "s0", "val": {i}, "source": "L[\'x\']"}}, '
        f"{ids(i, 0)}}}\n"
        for i in range(count)
    ]
    trace = load(lines)
    try:
        page = plain(ReportRenderer(trace).symbolic_shapes_page().markdown)
        assert len(re.findall(r"^## \[\[\d+/0\]\]", page, re.M)) == SECTIONS
        assert f"{count - SECTIONS:,} more compile ids with symbolic shapes not shown" in page
    finally:
        trace.close()


# -- a damaged .7z --------------------------------------------------------------------------------
FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def damaged_7z(tmp_path: Path, logs: dict[str, Path], at: float) -> Path:
    """A (solid) 7z of ``logs`` with 64 bytes flipped at fraction ``at`` of the archive."""
    import py7zr

    archive = tmp_path / "trace.7z"
    with py7zr.SevenZipFile(archive, "w") as out:
        for name, log in logs.items():
            out.write(log, name)
    data = bytearray(archive.read_bytes())
    start = int(len(data) * at)
    data[start : start + 64] = bytes(b ^ 0x5A for b in data[start : start + 64])
    archive.write_bytes(data)
    return archive


def test_a_damaged_7z_is_built_from_what_came_before_the_damage(tmp_path: Path):
    """py7zr raised before writing any of a member it could not decode whole, so a damaged
    .7z built nothing. It writes what each block of compressed data decoded: read in small
    blocks, every line before the damage is kept, and Parse health says where it broke."""
    from tlsite.core import load

    log = FIXTURES / "torch-2.15" / "graph_breaks.log"
    archive = damaged_7z(tmp_path, {"graph_breaks.log": log}, at=0.8)
    trace = load(archive)
    try:
        (cut,) = [s for s in trace.stats.samples if s.reason == "input_cut"]
        match = re.search(r"the 7z data is damaged \(.*\) after ([\d,]+) bytes of log", cut.detail)
        assert match, cut.detail
        kept = int(match.group(1).replace(",", ""))
        whole = log.read_bytes()
        assert len(whole) // 2 < kept < len(whole)
        lines = whole[:kept].count(b"\n")
        # every line before the last block decoded is kept. That block, at the damage, may be
        # garbage with more line breaks than the same span of the log (LZMA copies earlier text
        # at wrong distances; where the damage falls depends on the archive's layout), but the
        # log is not read whole
        assert lines - 100 < trace.stats.total_lines < whole.count(b"\n")
        assert trace.stats.records > 0
        assert "the report shows what came before" in trace.stats.summary()
    finally:
        trace.close()


def test_a_7z_damaged_in_its_first_rank_log_keeps_it_and_notes_the_next(tmp_path: Path):
    from tlsite.core import load

    logs = {
        "dedicated_log_torch_trace_rank_0_a.log": FIXTURES / "torch-2.15" / "graph_breaks.log",
        "dedicated_log_torch_trace_rank_1_b.log": FIXTURES / "graph_breaks" / "graph_breaks.log",
    }
    trace = load(damaged_7z(tmp_path, logs, at=0.3))
    try:
        assert trace.stats.records > 0
        assert "the 7z data is damaged" in trace.stats.summary()
        note = "dedicated_log_torch_trace_rank_1_b.log: not read, the archive breaks off before it"
        assert note in trace.notes
    finally:
        trace.close()


def test_a_7z_damaged_at_its_start_is_refused_in_one_line(tmp_path: Path):
    from tlsite.core import load
    from tlsite.core.source import InputError

    log = FIXTURES / "torch-2.15" / "graph_breaks.log"
    archive = damaged_7z(tmp_path, {"graph_breaks.log": log}, at=0.05)
    with pytest.raises(InputError) as refused:
        load(archive)
    message = str(refused.value)
    assert "\n" not in message
    assert "member 'graph_breaks.log' could not be decompressed" in message


def decodable_prefix(data: bytes) -> int:
    """How many bytes of gzip ``data`` decode before its damage (fed a byte at a time)."""
    import zlib

    decoder, out = zlib.decompressobj(wbits=31), 0
    for at in range(len(data)):
        try:
            out += len(decoder.decompress(data[at : at + 1]))
        except zlib.error:
            break
    return out


def test_a_damaged_gz_keeps_every_line_before_the_damage(tmp_path: Path):
    """A decoding error lost the whole 64 KiB step it happened in, and then the few bytes fed
    with the bad one: every byte decoded before the damage is kept now, and the last, cut line
    is noted."""
    import gzip

    from tlsite.core import load

    log = FIXTURES / "torch-2.15" / "graph_breaks.log"
    packed = gzip.compress(log.read_bytes(), mtime=0)
    for tenth in range(30, 60):  # damage that stops decoding, not at a step boundary
        data = bytearray(packed)
        start = len(data) * tenth // 100
        data[start : start + 32] = b"\xff" * 32  # mostly an invalid code
        decodable = decodable_prefix(bytes(data))
        if decodable < len(log.read_bytes()) and decodable % (64 << 10) > 2_000:
            break
    else:
        raise AssertionError("no damage found that stops decoding")
    archive = tmp_path / "trace.log.gz"
    archive.write_bytes(data)
    trace = load(archive)
    try:
        (cut,) = [s for s in trace.stats.samples if s.reason == "input_cut"]
        match = re.search(
            r"the gzip data is damaged \(.*\) after ([\d,]+) bytes of log", cut.detail
        )
        assert match, cut.detail
        # every byte decoded before the bad one (the piece that met it is read a byte at a time)
        assert int(match.group(1).replace(",", "")) == decodable
        lines = log.read_bytes()[:decodable].count(b"\n")
        assert trace.stats.total_lines >= lines
    finally:
        trace.close()


def test_a_graph_break_hit_in_many_compiles_links_a_bounded_number():
    count = LINKS + 250
    envelope = '{"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, '
    text = "Graph break in user code at /x/m.py:7\nGraph Break Reason: Unsupported call"
    trace = load([with_payload(envelope + ids(0, i) + "}", text) for i in range(count)])
    try:
        page = ReportRenderer(trace).graph_breaks_page().markdown
        section = page[page.index("Compile ids: ") :]
        section = section[: section.index("\n")]
        assert section.count("](-_0_") == LINKS
        assert section.endswith(" and 250 more")
    finally:
        trace.close()


def test_a_damaged_zip_member_keeps_the_lines_before_the_damage(tmp_path: Path):
    """The same for a zip member: the step that met the damage is read again in small pieces
    (zipfile decodes a deflated member 4 KiB at a time, so up to 4 KiB are still lost)."""
    import zipfile
    import zlib

    from tlsite.core import load

    log = FIXTURES / "torch-2.15" / "compiled_autograd.log"
    archive = tmp_path / "trace.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        out.write(log, log.name)
    packed = archive.read_bytes()
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(log.name)
        offset = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for tenth in range(30, 60):  # damage that stops decoding, not at a step boundary
        data = bytearray(packed)
        start = len(data) * tenth // 100
        data[start : start + 32] = b"\xff" * 32  # mostly an invalid code
        deflated = bytes(data[offset : offset + info.compress_size])
        decoder, decodable, stopped = zlib.decompressobj(-15), 0, False
        for at in range(len(deflated)):
            try:
                decodable += len(decoder.decompress(deflated[at : at + 1]))
            except zlib.error:
                stopped = True
                break
        if stopped and decodable % (64 << 10) > 2_000:
            break
    else:
        raise AssertionError("no damage found that stops decoding")
    archive.write_bytes(data)
    trace = load(archive)
    try:
        (cut,) = [s for s in trace.stats.samples if s.reason == "input_cut"]
        match = re.search(r"breaks off \(.*\) after ([\d,]+) bytes of log", cut.detail)
        assert match, cut.detail
        assert int(match.group(1).replace(",", "")) > decodable - 4096
    finally:
        trace.close()


@pytest.mark.slow
def test_a_compile_with_tens_of_thousands_of_artifacts_lists_a_bounded_number():
    count = SECTIONS + ROWS + 1_234
    envelope = '{{"artifact": {{"name": "art_{i}", "encoding": "string"}}, ' + ids() + "}}"
    trace = load([with_payload(envelope.format(i=i), f"payload {i}") for i in range(count)])
    try:
        (unit,) = trace.units.values()
        page = ReportRenderer(trace).unit_page(unit).standalone_markdown()
        assert len(re.findall(r'<tr id="artifact-(\d+)">', page)) == ROWS
        assert "1,234 more artifacts not shown: `compile_directory.json` lists every one" in page
    finally:
        trace.close()


@pytest.mark.slow
def test_the_symbolic_shapes_page_lists_a_bounded_number_of_items():
    """Many compiles with many symbolic records each: a few items per compile, a few compiles
    (each compile's page lists its own)."""
    per_unit, units = ITEMS_PER_SECTION + 50, 300
    lines = [
        f'{HEAD}{{"guard_added": {{"expr": "u{i} > 1"}}, {ids(unit, 0)}}}\n'
        for unit in range(units)
        for i in range(per_unit)
    ]
    trace = load(lines)
    try:
        markdown = ReportRenderer(trace).symbolic_shapes_page().markdown
        page = plain(markdown)
        sections = len(re.findall(r"^## \[\[\d+/0\]\]", page, re.M))
        assert sections == -(-ROWS // ITEMS_PER_SECTION)
        assert markdown.count("<li>guard <code>u") == sections * ITEMS_PER_SECTION
        assert "50 more symbolic records not shown: the compile's page lists them" in page
        assert '<a href="-_0_0_0/index.html#symbolic-shapes">the compile' in markdown
        assert f"{units - sections:,} more compile ids with symbolic shapes not shown" in page
    finally:
        trace.close()

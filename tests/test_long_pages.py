"""A graph-break storm's list pages come in pieces the browser lays out lazily.

A model whose every layer breaks the graph logs a break, a frame and a restart per layer: its
Graph breaks, All frames and Failures pages each had a row per one, in Markdown tables that
Material's scripts laid out again and again while the page loaded, and Graph breaks had a
section per break, each in the table of contents, whose every heading Material's scroll
tracking measured each time the page's height changed (seconds before a click was answered,
bench/README.md "Graph-break storms"). Their tables are now cut into pieces like the compile
ids list, their later sections are in boxes of a few, and a page of many sections has no
table of contents. What a user checks: every row and section is there, in order, found by
find in page and search; links into late pieces work; the tables read as one.

The fixtures are a storm in small (12 layers, ``tests/fixtures/scripts/gbstorm.py``, torch
2.13 and 2.15), built with pieces of a few rows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import resize, wait_for_aligned_pieces
from corpus import FIXTURE_TRACES

from tlsite.core.render import long_tables

TRACES = [
    FIXTURE_TRACES / "gbstorm" / "gbstorm.log",
    FIXTURE_TRACES / "torch-2.15" / "gbstorm.log",
]
ROWS, SECTIONS, TOC = 5, 2, 3  # pieces of 5 rows, boxes of 2 sections, no contents past 3
BREAKS = 12  # the fixtures' layers: a graph break, two frames and a restart each


def _build(trace: Path, out: Path, *, small_pieces: bool = True) -> Path:
    from tlsite.cli import build

    with pytest.MonkeyPatch.context() as patch:
        if small_pieces:
            patch.setattr(long_tables, "PIECE_ROWS", ROWS)
            patch.setattr(long_tables, "PIECE_SECTIONS", SECTIONS)
            patch.setattr(long_tables, "TOC_SECTIONS", TOC)
        build(str(trace), out, make_zip=False)
    return out


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.parent.name)
def storm_site(request, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return _build(request.param, tmp_path_factory.mktemp("gbstorm") / "site")


# Each table's rows (the text of their first cells and their links), the columns' left edges
# and widths (from the first row), and whether the browser may skip its box.
TABLES = """(selector) => [...document.querySelectorAll(selector)].map(table => {
  const rows = [...table.tBodies[0].rows];
  const box = table.closest(".tlsite-rows-more");
  return {first: rows.map(r => r.cells[0].textContent.trim()),
          links: rows.map(r => [...r.querySelectorAll("a")].map(a => a.getAttribute("href"))),
          columns: [...rows[0].cells].map(c => {
            const r = c.getBoundingClientRect(); return [Math.round(r.left), Math.round(r.width)];
          }),
          lazy: box ? getComputedStyle(box).contentVisibility : null};
})"""


def _one_table_in_pieces(tables: list[dict]) -> None:
    assert len(tables) >= 2
    assert all(len(t["first"]) == ROWS for t in tables[:-1])
    assert all(t["columns"] == tables[0]["columns"] for t in tables[1:])
    assert [t["lazy"] for t in tables] == [None] + ["auto"] * (len(tables) - 1)


@pytest.mark.browser
@pytest.mark.slow
def test_graph_breaks_lists_every_break_in_order_in_pieces(storm_site, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(storm_site / "graph_breaks.html")
    wait_for_aligned_pieces(page)
    tables = page.evaluate(TABLES, ".md-content table")
    _one_table_in_pieces(tables)
    assert [n for t in tables for n in t["first"]] == [str(n) for n in range(1, BREAKS + 1)]
    # each row links its section, and every section is there, in order, the later ones in
    # boxes the browser may skip
    assert [t["links"][i][0] for t in tables for i in range(len(t["first"]))] == [
        f"#break-{n}" for n in range(1, BREAKS + 1)
    ]
    sections = page.evaluate(
        """() => [...document.querySelectorAll("h2[id^=break-]")].map(h => {
             const box = h.closest(".tlsite-sections-more");
             return [h.id, box ? getComputedStyle(box).contentVisibility : null]; })"""
    )
    assert [s[0] for s in sections] == [f"break-{n}" for n in range(1, BREAKS + 1)]
    assert [s[1] for s in sections] == [None] * SECTIONS + ["auto"] * (BREAKS - SECTIONS)
    # more sections than TOC: no table of contents at all (a hidden one is measured too)
    assert page.evaluate("() => document.querySelectorAll('.md-nav--secondary a').length") == 0
    # the browser's find reaches the last break's text, in a late piece and a late box
    last = page.evaluate("() => document.getElementById('break-12').textContent")
    location = re.search(r"gbstorm_model\.py:\d+", page.evaluate(
        "() => document.querySelector('h2#break-12 ~ p code').textContent"))  # fmt: skip
    assert location and page.evaluate("(s) => window.find(s)", location.group(0))
    assert "12." in last
    assert report.console_errors == [] and report.outside_requests == []


@pytest.mark.browser
@pytest.mark.slow
def test_a_row_of_a_late_piece_leads_to_its_section_in_a_late_box(storm_site, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(storm_site / "graph_breaks.html")
    wait_for_aligned_pieces(page)
    page.click(f'.tlsite-rows-more a[href="#break-{BREAKS}"]')
    page.wait_for_timeout(300)
    top, height = page.evaluate(
        f"""() => [document.getElementById("break-{BREAKS}").getBoundingClientRect().top,
                   innerHeight]"""
    )
    assert 0 <= top < height
    assert report.console_errors == []


@pytest.mark.browser
@pytest.mark.slow
def test_all_frames_and_failures_list_every_row_in_pieces(storm_site, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(storm_site / "frames" / "index.html")
    wait_for_aligned_pieces(page)
    tables = page.evaluate(TABLES, ".md-content table")
    _one_table_in_pieces(tables)
    frames = [link for t in tables for row in t["links"] for link in row]
    pages = sorted(p.name for p in (storm_site / "frames").glob("frame_*.html"))
    assert sorted(frames) == pages and len(frames) == 2 * BREAKS  # each layer and its resume
    page.click(f'.tlsite-rows-more a[href="{frames[-1]}"]')  # a late piece's link opens
    page.wait_for_load_state()
    assert page.url.endswith(f"/frames/{frames[-1]}")

    page, report = open_site(storm_site / "failures.html")
    wait_for_aligned_pieces(page)
    tables = page.evaluate(TABLES, ".md-content table")
    _one_table_in_pieces(tables)
    restarts = [n for t in tables for n in t["first"]]
    assert restarts == [f"[{2 * n}/0_1]" for n in range(BREAKS)]
    assert report.console_errors == []


def _search_docs(site: Path) -> list[dict]:
    text = (site / "search" / "search_index.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("{") : text.rindex("}") + 1])["docs"]


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES[:1], ids=["gbstorm"])
def test_search_finds_what_it_found_before_the_pieces(trace: Path, tmp_path: Path) -> None:
    """The pieces change the markup, not the text: the pages' search entries are those of
    the site built with nothing cut."""
    cut = _search_docs(_build(trace, tmp_path / "cut"))
    whole = _search_docs(_build(trace, tmp_path / "whole", small_pieces=False))
    assert cut == whole
    rows = next(d for d in cut if d["location"] == "graph_breaks.html")["text"]
    assert all(f"[{2 * n}/0]" in rows for n in range(BREAKS))


@pytest.mark.slow
def test_a_page_of_few_sections_keeps_its_table_of_contents(tmp_path: Path) -> None:
    site = _build(TRACES[0], tmp_path / "site", small_pieces=False)  # 12 sections: kept
    page = (site / "graph_breaks.html").read_text(encoding="utf-8")
    contents = page[page.index('class="md-nav md-nav--secondary"') :]
    assert len(re.findall(r'href="#break-\d+"', contents[: contents.index("</nav>")])) == BREAKS
    assert "tlsite-sections-more" not in page  # and its sections are not boxed


# -- frames compiled once, in a report of many frames -------------------------------------------


def _links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    body = text[text.index("<tbody>") : text.rindex("</tbody>")]
    return re.findall(r'<tr>\n<td><a href="([^"]+)">', body)


@pytest.mark.slow
def test_a_storm_s_frames_compiled_once_link_their_compile_instead_of_a_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph-break storm has a frame per break, each compiled once: a page apiece repeated
    its index row (thousands of pages to build and zip). Past the navigation's count the
    index links each such frame's compile page; a recompiled frame keeps its page."""
    from tlsite.core.render import pages

    monkeypatch.setattr(pages, "MAX_FRAMES_IN_NAV", 1)
    storm = _build(TRACES[0], tmp_path / "storm", small_pieces=False)
    recompiled = _build(FIXTURE_TRACES / "recompiles" / "recompiles.log", tmp_path / "rec",
                        small_pieces=False)  # fmt: skip
    for site, paged in ((storm, 0), (recompiled, 1)):
        index = site / "frames" / "index.html"
        frame_pages = sorted(p.name for p in (site / "frames").glob("frame_*.html"))
        assert len(frame_pages) == paged
        links = _links(index)
        assert links and all((index.parent / link).is_file() for link in links)
        assert sum(link.startswith("frame_") for link in links) == paged
        # every page of the site links only pages that exist
        for page in site.rglob("*.html"):
            text = page.read_text(encoding="utf-8", errors="replace")
            for href in re.findall(r'href="(frame_[^"#]+|\.\./frames/[^"#]+)"', text):
                assert (page.parent / href).is_file(), (page, href)
    assert "links to the page of its first compile id" in (
        storm / "frames" / "index.html"
    ).read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_report_of_few_frames_keeps_a_page_per_frame(tmp_path: Path) -> None:
    site = _build(TRACES[0], tmp_path / "site", small_pieces=False)  # 24 frames: in the nav
    links = _links(site / "frames" / "index.html")
    assert len(links) == 2 * BREAKS and all(link.startswith("frame_") for link in links)
    assert all((site / "frames" / link).is_file() for link in links)


@pytest.mark.browser
@pytest.mark.slow
def test_on_a_phone_numbers_do_not_break_between_digits(storm_site, open_site) -> None:  # type: ignore[no-untyped-def]
    """Graph breaks on a phone squeezes its # column: "12" was written "1" over "2"."""
    page, _ = open_site(storm_site / "graph_breaks.html")
    resize(page, 390)
    lines = page.evaluate(
        """() => [...document.querySelectorAll('.md-content td[style*="text-align: right"]')]
             .map(cell => { const range = document.createRange(); range.selectNodeContents(cell);
                            return [cell.textContent, new Set([...range.getClientRects()]
                                    .map(r => Math.round(r.top))).size]; })"""
    )
    assert [text for text, _ in lines][:3] == ["1", "1", "2"]  # the # and Hits of rows 1-2
    assert [text for text, n in lines if n != 1] == []

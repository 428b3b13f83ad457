"""A long table (a storm's list of compile ids) comes in pieces the browser lays out lazily.

Material's scripts measured a page of thousands of rows several times while it loaded, each
time laying out the whole table: a storm's "All compile ids" page took seconds to answer a
click (bench/README.md, "Long list pages"). Past ``PIECE_ROWS`` rows a table is cut into
pieces, each later one in a ``content-visibility: auto`` box. What a user checks: every row
is still there, in order, and found; the pieces line up as one table; a link to a row in a
late piece shows that row. Real traces have at most a few dozen compile ids, so the browser
tests build them with pieces of a few rows.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.browser import resize, wait_for_aligned_pieces
from tests.corpus import FIXTURE_TRACES
from tlsite.core.render import long_tables
from tlsite.core.render.long_tables import PIECE_ROWS, cut_long_tables
from tlsite.core.render.templating import render


def _table(rows: int, cell: str = "x") -> str:
    body = "".join(f'<tr id="r{n}"><td>{n}</td><td>{cell}</td></tr>\n' for n in range(rows))
    head = "<thead><tr><th>N</th><th>Cell</th></tr></thead>"
    return f"<table>\n{head}\n<tbody>\n{body}</tbody>\n</table>"


class _Tables(HTMLParser):
    """The tables of a page: their rows' ids, whether each has a head, and each table's
    nearest ``div`` class."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self._divs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "div":
            self._divs.append(found.get("class") or "")
        elif tag == "table":
            box = self._divs[-1] if self._divs else ""
            self.tables.append({"rows": [], "head": False, "box": box})
        elif tag == "thead":
            self.tables[-1]["head"] = True
        elif tag == "tr" and "id" in found:
            self.tables[-1]["rows"].append(found["id"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            self._divs.pop()


def _parse(html: str) -> list[dict]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def test_a_long_table_is_cut_into_pieces_that_keep_every_row_in_order() -> None:
    rows = 2 * PIECE_ROWS + 7
    tables = _parse(cut_long_tables(f"<p>before</p>\n{_table(rows)}\n<p>after</p>"))
    assert [len(t["rows"]) for t in tables] == [PIECE_ROWS, PIECE_ROWS, 7]
    assert [r for t in tables for r in t["rows"]] == [f"r{n}" for n in range(rows)]
    assert [t["head"] for t in tables] == [True, False, False]
    assert [t["box"] for t in tables] == ["tlsite-rows", "tlsite-rows-more", "tlsite-rows-more"]
    # a skipped piece is given a height from its rows, for the scroll bar
    cut = cut_long_tables(_table(rows))
    heights = re.findall(r"contain-intrinsic-block-size: auto (\d+)px", cut)
    assert [int(h) for h in heights] == [PIECE_ROWS * long_tables.ROW_PX, 7 * long_tables.ROW_PX]


def test_short_tables_and_tables_holding_tables_stay_whole() -> None:
    short = _table(PIECE_ROWS)
    assert cut_long_tables(short) == short
    nested = _table(PIECE_ROWS + 1, cell="<table><tr><td>in</td></tr></table>")
    assert cut_long_tables(nested) == nested


def test_templates_cut_their_long_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cut is where templates render, so the Markdown tree has it too (plain MkDocs)."""
    monkeypatch.setattr(long_tables, "PIECE_ROWS", 2)
    rows = [
        {
            "display": f"[0/{n}]",
            "dirname": f"-_0_{n}_0",
            "href": f"-_0_{n}_0/index.html",
            "status": None,
            "function": "f",
            "seconds": None,
            "artifacts": [],
            "groups": [],
            "more_artifacts": 0,
        }
        for n in range(5)
    ]
    tables = _parse(render("compile_ids_table.html", rows=rows))
    assert [t["rows"] for t in tables] == [
        ["-_0_0_0", "-_0_1_0"],
        ["-_0_2_0", "-_0_3_0"],
        ["-_0_4_0"],
    ]


# -- in the browser, on real traces -----------------------------------------------------------

TRACES = [
    FIXTURE_TRACES / "torch-2.4" / "graph_breaks.log",
    FIXTURE_TRACES / "torch-2.15" / "graph_breaks.log",
]
PIECE = 5

# Each table of the compile ids page: its rows' ids and texts, its columns' left edges and
# widths (from the first row), and whether the browser may skip its box.
TABLES = """() => [...document.querySelectorAll(".tlsite-compile-ids table")].map(table => {
  const row = table.tBodies[0].rows[0];
  const box = table.closest(".tlsite-rows-more");
  return {ids: [...table.tBodies[0].rows].map(r => r.id),
          columns: [...row.cells].map(c => { const r = c.getBoundingClientRect();
                                              return [Math.round(r.left), Math.round(r.width)]; }),
          lazy: box ? getComputedStyle(box).contentVisibility : null};
})"""


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.parent.name)
def pieces_site(request, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """The trace's site, built with tables cut into pieces of ``PIECE`` rows."""
    from tlsite.cli import build

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(long_tables, "PIECE_ROWS", PIECE)
        out = tmp_path_factory.mktemp("pieces") / "site"
        build(str(request.param), out, make_zip=False)
    return out


@pytest.mark.browser
@pytest.mark.slow
def test_the_pieces_read_as_one_table_with_every_compile_id(pieces_site, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(pieces_site / "compile_ids.html")
    wait_for_aligned_pieces(page)
    tables = page.evaluate(TABLES)
    assert len(tables) >= 3
    # every compile id, in the trace's order, each once, as the site's folders have them
    ids = [i for t in tables for i in t["ids"]]
    folders = sorted(p.name for p in pieces_site.glob("-_*") if (p / "index.html").exists())
    assert sorted(ids) == folders and len(set(ids)) == len(ids)
    assert all(len(t["ids"]) == PIECE for t in tables[:-1])
    # the later pieces have the first one's columns, and only they may be skipped
    assert all(t["columns"] == tables[0]["columns"] for t in tables[1:])
    assert [t["lazy"] for t in tables] == [None] + ["auto"] * (len(tables) - 1)
    # the browser's find reaches the last compile id
    last = page.evaluate("(id) => document.getElementById(id).cells[0].textContent", ids[-1])
    assert page.evaluate("(s) => window.find(s)", last)
    assert report.console_errors == [] and report.outside_requests == []


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("late", [0, 300], ids=["aligned-at-once", "aligned-after-load"])
def test_a_link_to_a_row_of_a_late_piece_shows_it(pieces_site, open_site, late) -> None:  # type: ignore[no-untyped-def]
    """Aligning the pieces changes rows' heights. On a slow machine it happens after the page
    has loaded, when the browser no longer follows the link (``late`` ms stands in for that;
    CI once saw the row pushed below the screen)."""
    delay = f"""(() => {{ const Observer = window.ResizeObserver;
      window.ResizeObserver = class extends Observer {{
        constructor(report) {{ super((...a) => setTimeout(() => report(...a), {late})); }} }};
    }})();"""
    last = sorted(pieces_site.glob("-_*"))[-1].name
    page, report = open_site(pieces_site / "compile_ids.html", fragment=last, init_script=delay)
    wait_for_aligned_pieces(page)
    page.wait_for_timeout(100)  # the browser's own scrolling, if any, is done
    top, bottom, height = page.evaluate(
        """(id) => { const r = document.getElementById(id).getBoundingClientRect();
                     return [r.top, r.bottom, innerHeight]; }""",
        last,
    )
    assert 0 <= top < height and bottom > 0
    assert report.console_errors == []


@pytest.mark.browser
@pytest.mark.slow
def test_a_linked_row_scrolled_away_from_does_not_move_the_page(pieces_site, open_site) -> None:  # type: ignore[no-untyped-def]
    """The linked row keeps its place only while it is on the screen: a reader who has
    scrolled it just out of sight keeps the row at the top of the screen where it is when the
    pieces are aligned again (the first piece changed size: fonts, a site that embeds the
    report): aligning itself moves nothing on the screen (the browser's scroll anchoring
    stops when the tables around its anchor change width)."""
    last = sorted(pieces_site.glob("-_*"))[-1].name
    page, report = open_site(pieces_site / "compile_ids.html", fragment=last)
    resize(page, 1280, 400)
    # the linked row just below the screen; the first row that shows, at the screen's top
    shown = page.evaluate(
        """(id) => { const row = document.getElementById(id);
          window.scrollBy(0, row.getBoundingClientRect().top - innerHeight - 30);
          const seen = [...document.querySelectorAll(".tlsite-rows tr")]
            .find(tr => tr.getBoundingClientRect().bottom > 0);
          seen.dataset.seen = ""; return seen.getBoundingClientRect().top; }""",
        last,
    )
    page.evaluate(
        """() => { document.querySelector(".tlsite-rows table").style.fontSize = "1rem"; }"""
    )
    wait_for_aligned_pieces(page, changed=True)
    now = page.evaluate("() => document.querySelector('tr[data-seen]').getBoundingClientRect().top")
    assert abs(now - shown) <= 1
    assert report.console_errors == []


@pytest.mark.browser
@pytest.mark.slow
def test_on_a_phone_the_pieces_follow_the_list_layout(pieces_site, open_site) -> None:  # type: ignore[no-untyped-def]
    """On a phone all compile ids is a list of blocks: no column widths are forced on it."""
    page, _ = open_site(pieces_site / "compile_ids.html")
    page.wait_for_timeout(200)
    resize(page, 390)
    styles = page.evaluate(
        """() => [...document.querySelectorAll(".tlsite-rows-more table")].map(t =>
             [t.style.width, t.style.tableLayout, !!t.querySelector("colgroup")])"""
    )
    assert styles and all(s == ["", "", False] for s in styles)
    overflow = page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
    assert overflow <= 0


@pytest.mark.browser
@pytest.mark.slow
def test_on_a_phone_every_compile_id_fits_the_screen_and_reads_alike(
    pieces_site, open_site
) -> None:  # type: ignore[no-untyped-def]
    """A resume function's name is longer than a phone is wide: it wraps, and no piece is
    wider than the screen (its end scrolled out of sight). Every compile id, the first of a
    later piece too, has a line under its first line and none between its cells."""
    page, report = open_site(pieces_site / "compile_ids.html")
    resize(page, 390)
    rows = page.evaluate(
        """() => {
          document.querySelectorAll(".tlsite-rows-more").forEach(box => {
            box.style.contentVisibility = "visible"; });
          const group = document.querySelector(".tlsite-rows");
          const edge = group.getBoundingClientRect().right;
          const rows = [...group.querySelectorAll("tbody tr")];
          return [group.scrollWidth - group.clientWidth, rows.map(row => {
            const cells = [...row.cells].filter(c => getComputedStyle(c).display !== "none");
            return [row.id, Math.max(...cells.map(c => c.getBoundingClientRect().right)) <= edge,
                    cells.map(c => parseFloat(getComputedStyle(c).borderTopWidth) > 0)];
          })];
        }"""
    )
    overflow, rows = rows
    assert overflow <= 0
    assert rows and all(fits for _, fits, _ in rows), [r for r in rows if not r[1]]
    for row_id, _, lines in rows:
        assert lines[-1] and not any(lines[:-1]), row_id
    assert report.console_errors == []


@pytest.mark.browser
@pytest.mark.slow
def test_on_a_phone_a_table_in_pieces_scrolls_sideways_as_one(pieces_site, open_site) -> None:  # type: ignore[no-untyped-def]
    """Material gives each table a scroll box of its own; the pieces share one."""
    page, report = open_site(pieces_site / "compile_time.html")
    resize(page, 390)
    lefts = page.evaluate(
        """() => {
          const group = document.querySelector(".tlsite-rows");
          const tables = [...group.querySelectorAll("table")];
          tables[1].scrollIntoView();
          const cell = t => t.tBodies[0].rows[0].cells[1];
          const left = () => tables.map(t => cell(t).getBoundingClientRect().left);
          const before = left();
          group.scrollLeft = 100;
          return {before, after: left(), wide: group.scrollWidth > group.clientWidth,
                  page: document.documentElement.scrollWidth - innerWidth};
        }"""
    )
    assert lefts["wide"] and lefts["page"] <= 0  # the table scrolls in its box, not the page
    assert len(set(lefts["before"])) == 1 and len(set(lefts["after"])) == 1
    assert lefts["after"][0] < lefts["before"][0]
    assert report.console_errors == []


@pytest.mark.browser
@pytest.mark.slow
def test_printed_pieces_are_laid_out_at_the_papers_width(pieces_site, open_site) -> None:  # type: ignore[no-untyped-def]
    """On paper no piece is skipped, and none keeps the screen's widths (it would be cut)."""
    page, _ = open_site(pieces_site / "compile_time.html")
    wait_for_aligned_pieces(page)  # the screen's widths are set
    page.emulate_media(media="print")
    page.wait_for_timeout(100)
    pieces = page.evaluate(
        """() => [...document.querySelectorAll(".tlsite-rows")].map(group => {
          const first = group.querySelector("table").getBoundingClientRect().width;
          return [...group.querySelectorAll(".tlsite-rows-more")].map(box => [
            getComputedStyle(box).contentVisibility,
            Math.round(box.querySelector("table").getBoundingClientRect().width - first)]);
        })"""
    )
    assert pieces and all(p == ["visible", 0] for group in pieces for p in group)


@pytest.mark.browser
@pytest.mark.slow
def test_the_pieces_follow_the_first_when_it_changes_size(pieces_site, open_site) -> None:  # type: ignore[no-untyped-def]
    """The first piece changes size without the window doing so (web fonts arriving, a site
    that embeds the report): the later pieces take its new widths."""
    page, _ = open_site(pieces_site / "compile_ids.html")
    wait_for_aligned_pieces(page)
    before = page.evaluate(TABLES)[0]["columns"]
    page.evaluate(
        """() => { document.querySelector(".tlsite-rows table").style.fontSize = "1rem"; }"""
    )
    wait_for_aligned_pieces(page, changed=True)
    tables = page.evaluate(TABLES)
    assert tables[0]["columns"] != before  # the first piece did change
    assert all(t["columns"] == tables[0]["columns"] for t in tables[1:])

"""A trie level of many nodes comes in lists the browser lays out only near the screen.

A graph-break storm's overview has a trie node with a child per compiled function (thousands);
while the page loads, Material's scripts make Chromium recompute the styles of every node
several times, and the page took over a second to answer a click (bench/README.md, "trie10").
Past ``PIECE_NODES`` nodes a level is written as several lists, the later ones with
``content-visibility: auto``. What a user checks: the same trie, every compile id in order and
on screen without a click, the +/- toggle hiding and showing all of a node's lists, a link in
a late list working, the same layout on a phone and on paper. Real traces have a few nodes a
level, so these tests cut their levels into lists of ``PIECE`` nodes.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import FIXTURE_TRACES

from tlsite.core import load
from tlsite.core.analysis.stack_trie import build_trie
from tlsite.core.frames import Frame
from tlsite.core.render import trie_html as trie_module
from tlsite.core.render.long_tables import LINE_PX
from tlsite.core.render.pages import ReportRenderer
from tlsite.core.render.trie_html import trie_html

if TYPE_CHECKING:
    from tests.browser import SiteOpener

# a further list of a level, as the renderer writes it between two nodes
PIECE_START = re.compile(
    r'</ul><ul class="trie-level trie-piece" style="contain-intrinsic-block-size: auto \d+px">'
)


class _Lists(HTMLParser):
    """The lists of a trie: for each, the frame name of the node it belongs to (None at the
    top), its class and style, and its nodes' frame names."""

    def __init__(self) -> None:
        super().__init__()
        self.lists: list[dict] = []
        self._open: list[dict] = []  # lists not yet closed
        self._names: list[str | None] = [None]  # the node each open <li> is
        self._in_name = False
        self._codes = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "ul":
            owner = self._names[-1]
            self.lists.append(
                {"of": owner, "class": found.get("class"), "style": found.get("style"), "nodes": []}
            )
            self._open.append(self.lists[-1])
        elif tag == "li":
            self._names.append("")
            self._codes = 0
        elif tag == "code":
            self._codes += 1
            self._in_name = self._codes == 2 and found.get("class") is None  # "in <code>name"

    def handle_endtag(self, tag: str) -> None:
        if tag == "ul":
            self._open.pop()
        elif tag == "li":
            self._names.pop()
        elif tag == "code" and self._in_name:
            self._in_name = False
            self._open[-1]["nodes"].append(self._names[-1])

    def handle_data(self, data: str) -> None:
        if self._in_name:
            self._names[-1] += data


def _lists(html: str) -> list[dict]:
    parser = _Lists()
    parser.feed(html)
    return parser.lists


def _trie():  # type: ignore[no-untyped-def]
    """Five functions called from one module, the third calling three more (one of them with
    its source line logged); each stack ends with an unknown compile."""
    top = [Frame("model.py", 10 + n, f"f{n}") for n in range(5)]
    below = [Frame("layers.py", 20 + n, f"g{n}", loc="y = x" if n == 0 else None) for n in range(3)]
    stacks = [([frame], None) for frame in top] + [([top[2], frame], None) for frame in below]
    return build_trie(stacks)


def _html(**kwargs) -> str:  # type: ignore[no-untyped-def]
    return trie_html(_trie(), status_of=lambda unit: "ok", href_of=lambda unit: "x.html", **kwargs)


def test_a_long_level_is_cut_into_lists_that_keep_every_node_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole = _html()
    monkeypatch.setattr(trie_module, "PIECE_NODES", 2)
    cut = _html()
    lists = _lists(cut)
    assert [(row["of"], row["nodes"]) for row in lists] == [
        (None, ["f0", "f1"]),
        (None, ["f2", "f3"]),
        ("f2", ["g0", "g1"]),
        ("f2", ["g2"]),
        (None, ["f4"]),
    ]
    first = [row for row in lists if row["class"] == "trie-level"]
    later = [row for row in lists if row["class"] == "trie-level trie-piece"]
    assert len(first) == 2 and len(later) == 3 and not any(row["style"] for row in first)
    # a later list not yet laid out is given a height from the lines its nodes take: a line
    # per node and one per source line shown (g0's): the list [f2, f3] holds f2's children
    heights = [int(re.findall(r"auto (\d+)px", row["style"])[0]) for row in later]
    assert heights == [(1 + 4 + 1) * LINE_PX, 1 * LINE_PX, 1 * LINE_PX]
    # the same trie: without the cuts it is the page as before, byte for byte
    assert PIECE_START.sub("", cut) == whole
    assert "trie-piece" not in whole


def test_a_level_of_piece_nodes_stays_one_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trie_module, "PIECE_NODES", 5)
    assert "trie-piece" not in _html()
    monkeypatch.setattr(trie_module, "PIECE_NODES", 4)
    assert _html().count("trie-piece") == 1


# -- real traces, built with levels of PIECE nodes -------------------------------------------

TRACES = [
    FIXTURE_TRACES / "failures" / "failures.log",
    FIXTURE_TRACES / "torch-2.15" / "graph_breaks.log",
]
PIECE = 1  # every level of more than one node is cut


def test_the_markdown_tree_has_the_cut_trie(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cut is made where the trie is rendered, so ``tlsite markdown`` writes it too and
    plain MkDocs shows the same page."""
    trace = load(TRACES[0])
    whole = ReportRenderer(trace).overview().standalone_markdown()
    monkeypatch.setattr(trie_module, "PIECE_NODES", PIECE)
    cut = ReportRenderer(trace).overview().standalone_markdown()
    assert cut.count("trie-piece") >= 2
    assert PIECE_START.sub("", cut) == whole


def _build(trace: Path, out: Path, piece: int | None) -> Path:
    from tlsite.cli import build

    with pytest.MonkeyPatch.context() as patch:
        if piece is not None:
            patch.setattr(trie_module, "PIECE_NODES", piece)
        build(str(trace), out, make_zip=False)
    return out


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.parent.name)
def sites(request, tmp_path_factory) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """The trace's site with trie levels cut into lists of ``PIECE`` nodes, and as built by
    default (no level of these traces is long enough to be cut)."""
    scratch = tmp_path_factory.mktemp("trie-pieces")
    return _build(request.param, scratch / "cut", PIECE), _build(
        request.param, scratch / "whole", None
    )


@pytest.mark.slow
def test_the_search_index_has_the_same_text(sites) -> None:  # type: ignore[no-untyped-def]
    """Searching finds the same words: the index keeps list tags, and only gains the
    boundaries between a level's lists."""

    def texts(site: Path) -> dict[str, str]:
        docs = json.loads((site / "search" / "search_index.json").read_text())["docs"]
        return {doc["location"]: doc["text"] for doc in docs}

    cut, whole = texts(sites[0]), texts(sites[1])
    assert cut.keys() == whole.keys()
    changed = [where for where in cut if cut[where] != whole[where]]
    assert changed == ["index.html#stack-trie"]
    for where in changed:
        assert cut[where].replace("</ul><ul>", "") == whole[where]


# Each trie list: the node it belongs to (its index among the trie's <li>, -1 at the top),
# whether it is a later list of its level, and its nodes' compile id links.
LISTS = """() => { const nodes = [...document.querySelectorAll(".stack-trie li")];
  return [...document.querySelectorAll(".stack-trie ul")].map(list => ({
    of: nodes.indexOf(list.parentElement.closest("li")),
    later: list.classList.contains("trie-piece"),
    lazy: getComputedStyle(list).contentVisibility}));
}"""
LINKS = (
    """() => [...document.querySelectorAll(".stack-trie a.cid")].map(a => a.getAttribute("href"))"""
)


@pytest.mark.browser
@pytest.mark.slow
def test_every_compile_id_is_in_the_cut_trie_in_order_and_on_screen(
    sites, open_site: SiteOpener
) -> None:  # type: ignore[no-untyped-def]
    cut, whole = sites
    page, report = open_site(cut / "index.html")
    page.wait_for_load_state("networkidle")
    lists = page.evaluate(LISTS)
    later = [row for row in lists if row["later"]]
    assert later and all(row["lazy"] == "auto" for row in later)
    assert all(row["lazy"] == "visible" for row in lists if not row["later"])
    # the browser's find reaches the last one (before any checkVisibility() call on a node of
    # a skipped list: after one, Chromium's window.find no longer looks in skipped lists)
    last = page.evaluate("""() => [...document.querySelectorAll(".stack-trie a.cid")].pop()
                                    .textContent""")
    assert page.evaluate("(s) => window.find(s)", last)
    # none is collapsed away on first load (a failed compile must show without a click)
    hidden = page.evaluate(
        """() => [...document.querySelectorAll(".stack-trie a.cid")]
                   .filter(a => !a.checkVisibility()).map(a => a.textContent)"""
    )
    assert hidden == []
    assert report.console_errors == [] and report.outside_requests == []
    # every compile id, in the same order as the trie in one list per level
    links = page.evaluate(LINKS)
    before, _ = open_site(whole / "index.html")
    assert links == before.evaluate(LINKS) and len(links) == len(set(links)) > PIECE * 2


@pytest.mark.browser
@pytest.mark.slow
def test_the_toggle_hides_and_shows_every_list_of_a_node(sites, open_site: SiteOpener) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(sites[0] / "index.html")
    page.wait_for_load_state("networkidle")
    nodes = page.locator(".stack-trie li.trie-node:has(> ul.trie-piece)")
    assert nodes.count() >= 1
    shown = """(node) => [...node.querySelectorAll(":scope > ul > li")]
                           .map(li => li.checkVisibility())"""
    for n in range(nodes.count()):
        node = nodes.nth(n)
        inside = node.evaluate(shown)
        assert len(inside) > PIECE and all(inside)
        node.locator(":scope > .trie-toggle").click()
        assert "trie-collapsed" in (node.get_attribute("class") or "")
        assert not any(node.evaluate(shown))  # every list of it, the later ones too
        assert node.locator(":scope > .trie-count").is_visible()
        node.locator(":scope > .trie-toggle").press("Enter")
        assert all(node.evaluate(shown))
    assert report.console_errors == []


@pytest.mark.browser
@pytest.mark.slow
def test_a_link_in_a_late_list_opens_its_compile(sites, open_site: SiteOpener) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(sites[0] / "index.html")
    page.set_viewport_size({"width": 390, "height": 300})
    page.wait_for_timeout(300)
    link = page.locator(".stack-trie ul.trie-piece a.cid").last
    # far down a phone's screen, Chromium has not laid its list out yet
    assert (
        page.evaluate("""() => { window.scrollTo(0, 0);
        return [...document.querySelectorAll(".stack-trie ul.trie-piece li")].pop()
                 .checkVisibility({contentVisibilityAuto: true}); }""")
        is False
    )
    href, text = link.get_attribute("href"), link.inner_text()
    link.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(str(href))
    assert text in page.locator("h1").inner_text()
    assert report.console_errors == []


# Where each node of the trie and each piece of its text is (page coordinates, in CSS pixels).
GEOMETRY = """() => { const at = e => { const r = e.getBoundingClientRect();
    return [r.left, r.top + scrollY, r.width, r.height].map(v => Math.round(v * 8) / 8); };
  const trie = document.querySelector(".stack-trie");
  return {parts: [...trie.querySelectorAll("li, a, code, span")].map(at),
          overflow: trie.scrollWidth - trie.clientWidth,
          page: document.documentElement.scrollWidth - innerWidth}; }"""


def _geometry(page) -> dict:  # type: ignore[no-untyped-def]
    """The trie's geometry once every list has been near the screen (a list the browser has
    skipped is as tall as its guess until then)."""
    # tlsite.js has bound every node (opened or closed it) once Material has mounted
    page.wait_for_function("() => !document.querySelector('li.trie-node:not([data-trie-bound])')")
    height = page.viewport_size["height"]
    for _ in range(2):
        y = 0
        while y < page.evaluate("document.documentElement.scrollHeight"):
            page.evaluate(f"window.scrollTo(0, {y})")
            page.wait_for_timeout(20)
            y += height
    page.evaluate("window.scrollTo(0, 0)")
    # on a busy machine a list may have been scrolled past before the browser laid it out
    # (it then keeps its guessed height): every list is laid out here, as once seen
    page.evaluate(
        """() => new Promise(done => {
             const lists = [...document.querySelectorAll(".stack-trie ul.trie-piece")];
             lists.forEach(list => { list.style.contentVisibility = "visible"; });
             requestAnimationFrame(() => requestAnimationFrame(() => done()));
           })"""
    )
    return page.evaluate(GEOMETRY)


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [390, 1280], ids=["phone", "desktop"])
def test_the_lists_of_a_level_are_laid_out_as_one(sites, open_site: SiteOpener, width: int) -> None:  # type: ignore[no-untyped-def]
    """Each node and each piece of its text is where it is in the trie of one list per level:
    no gap between the lists, the same indentation, the same wrapping on a phone."""
    geometry = []
    for site in sites:
        page, _ = open_site(site / "index.html")
        page.set_viewport_size({"width": width, "height": 700})
        page.wait_for_timeout(200)
        geometry.append(_geometry(page))
    assert page.locator(".stack-trie ul.trie-piece").count() == 0  # the whole one
    cut, whole = geometry
    assert len(cut["parts"]) == len(whole["parts"]) > 20
    assert cut["parts"] == whole["parts"]
    # the page does not widen; the trie scrolls sideways as far as before (or, where only a
    # path's trailing padding stood out of the whole one, by the few pixels less)
    assert cut["page"] == whole["page"] <= 0
    assert whole["overflow"] - 4 <= cut["overflow"] <= whole["overflow"]


@pytest.mark.browser
@pytest.mark.slow
def test_on_paper_every_list_is_laid_out(sites, open_site: SiteOpener) -> None:  # type: ignore[no-untyped-def]
    page, _ = open_site(sites[0] / "index.html")
    page.emulate_media(media="print")
    page.wait_for_timeout(100)
    lazy = page.evaluate(
        """() => [...document.querySelectorAll(".stack-trie ul.trie-piece")]
                   .map(list => getComputedStyle(list).contentVisibility)"""
    )
    assert lazy and set(lazy) == {"visible"}


@pytest.mark.browser
@pytest.mark.slow
def test_a_node_whose_compile_ids_are_in_a_later_list_starts_open(
    sites, open_site: SiteOpener, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """tlsite.js collapses a deep node with no compile id below it; one with compile ids only
    in its later lists stays open (no real trace here has one: the trie of one is put in the
    overview of a real one)."""
    cut = sites[0]
    trace = load(TRACES[0])
    quiet = 2  # nodes with no compile id below them, the first list of their level
    units = [unit for unit in trace.units.values() if unit.id is not None][:3]
    deep = [Frame("main.py", 1, "main"), Frame("model.py", 2, "forward")]
    stacks: list = [
        ([*deep, Frame("layer.py", n, f"quiet{n}"), Frame("lib.py", 1, "inner")], None)
        for n in range(quiet)
    ]
    stacks += [([*deep, Frame("layer.py", 9, "loud")], unit) for unit in units]
    monkeypatch.setattr(trie_module, "PIECE_NODES", quiet)
    html = trie_html(build_trie(stacks), status_of=lambda u: "failed", href_of=lambda u: "x.html")
    overview = (cut / "index.html").read_text(encoding="utf-8")
    start = overview.index('<div class="stack-trie">')
    end = overview.index("</ul></div>", start) + len("</ul></div>")
    page_path = cut / "synthetic.html"
    page_path.write_text(overview[:start] + str(html) + overview[end:], encoding="utf-8")
    page, report = open_site(page_path)
    page.wait_for_load_state("networkidle")
    assert page.locator(".stack-trie ul.trie-piece a.cid").count() == len(units)
    hidden = page.evaluate(
        """() => [...document.querySelectorAll(".stack-trie a.cid")]
                   .filter(a => !a.checkVisibility()).length"""
    )
    assert hidden == 0
    assert page.locator(".stack-trie li.trie-collapsed").count() == quiet  # the quiet ones
    assert report.console_errors == []

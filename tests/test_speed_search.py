"""A recompile storm's search: small to load, every compile page still found (issue #19).

A storm's compile pages repeat the same sections (summary, why it recompiled, compile time
breakdown, config) with other numbers in them. Material's worker builds its lunr index on the
page's thread from ``file://``, so each copy delayed the first answer (a 2,500-id storm:
seconds). The search index now holds such a section once and ``search/code_index.js`` names the
other pages that have it; ``search-code.js`` gives each of them its result. These tests build
storms made from the real ``recompiles`` and ``graph_breaks`` fixtures by
``bench/make_trace.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_answers_search import code_index
from test_site import FIXTURE_TRACES, RECOMPILES, _make_trace

from tlsite.mkdocs_plugin.search_index import SHARED_MIN

if TYPE_CHECKING:
    from browser import SiteOpener
    from playwright.sync_api import Page

STORM = 40  # compile ids, above SHARED_MIN
GRAPH_BREAKS = FIXTURE_TRACES / "graph_breaks" / "graph_breaks.log"
SEARCH_TIMEOUT_MS = 15_000
REPEATED = ("summary", "why-it-recompiled", "compile-time-breakdown", "config")


def _storm(tmp_path_factory: pytest.TempPathFactory, base: Path, name: str) -> Path:
    from tlsite.cli import build

    assert STORM > SHARED_MIN
    folder = tmp_path_factory.mktemp(name)
    trace = _make_trace(folder / f"{name}.log", "--storm", str(STORM), "--base", str(base))
    return build(str(trace), folder / "site", make_zip=False).site


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _storm(tmp_path_factory, RECOMPILES, "storm")


@pytest.fixture(scope="module")
def break_storm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _storm(tmp_path_factory, GRAPH_BREAKS, "break_storm")


def compile_pages(site: Path) -> dict[str, str]:
    """``-_0_N_0/index.html`` -> its HTML, for every compile page of the site."""
    return {
        p.relative_to(site).as_posix(): p.read_text(encoding="utf-8")
        for p in site.glob("-_*/index.html")
    }


def docs(site: Path) -> list[dict[str, str]]:
    return json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))["docs"]


def found_locations(site: Path) -> set[str]:
    """Every ``location`` search answers with: the index's, and those it shares them with."""
    found = {d["location"] for d in docs(site)}
    index = code_index(site)
    pages = index.get("sharedPages", [])
    for indexed, members in index.get("shared", {}).items():
        anchor = indexed.partition("#")[2]
        for member in members:
            if isinstance(member, list):
                found.add(f"{pages[member[0]][0]}#{member[1]}")
            else:
                found.add(f"{pages[member][0]}#{anchor}")
    return found


@pytest.mark.slow
def test_a_storm_indexes_each_repeated_section_once_and_finds_it_on_every_page(
    storm: Path,
) -> None:
    pages = compile_pages(storm)
    assert len(pages) >= STORM
    entries = docs(storm)
    found = found_locations(storm)
    for anchor in REPEATED:
        having = {p for p, html in pages.items() if f'id="{anchor}"' in html}
        assert len(having) >= STORM - 1, anchor
        # indexed once (the recompile reason: [0/1]'s names the first compile, then once)
        indexed = [d for d in entries if d["location"].endswith(f"#{anchor}")]
        assert 1 <= len(indexed) <= 2, anchor
        # ... and search still answers with each page's own section
        assert {f"{p}#{anchor}" for p in having} <= found, anchor
    # every compile page keeps an entry of its own: a compile id finds its page
    titles = {d["location"]: d["title"] for d in entries}
    for number in range(STORM):
        assert re.match(rf"\[0/{number}\] ", titles[f"-_0_{number}_0/index.html"])


@pytest.mark.slow
def test_a_storm_table_that_repeats_one_guard_indexes_it_once(storm: Path) -> None:
    """The recompiles table names the same failed guard on each of its rows: search finds
    the table by it, from one copy in the index."""
    guard = "# if mode =="
    html = (storm / "recompiles.html").read_text(encoding="utf-8")
    (table,) = [d for d in docs(storm) if d["location"].startswith("recompiles.html#frame-")]
    assert html.count(guard) >= STORM - 1
    assert table["text"].count(guard) == 1
    for number in (1, 2, STORM - 1):  # every row is still there, by its compile id
        assert f"[0/{number}] ok" in table["text"]


@pytest.mark.slow
def test_a_storm_index_grows_by_little_per_compile_id(
    tmp_path_factory: pytest.TempPathFactory, storm: Path
) -> None:
    """What search loads (index and code index) for one more compile id: a page entry, its
    rows in the report's tables and a few references, not the page's sections again."""
    from tlsite.cli import build

    folder = tmp_path_factory.mktemp("storm2x")
    trace = _make_trace(
        folder / "storm2x.log", "--storm", str(2 * STORM), "--base", str(RECOMPILES)
    )
    bigger = build(str(trace), folder / "site", make_zip=False).site

    def loaded(site: Path) -> int:
        search = site / "search"
        return (search / "search_index.js").stat().st_size + (
            search / "code_index.js"
        ).stat().st_size

    per_compile_id = (loaded(bigger) - loaded(storm)) / STORM
    # what a compile page's own sections weigh in the index: each shared one is there once
    shared = code_index(storm)["shared"]
    entries = docs(storm)
    page_entry = next(d for d in entries if d["location"] == "-_0_5_0/index.html")
    one_page = sum(len(json.dumps(d)) for d in entries if d["location"] in shared)
    one_page += len(json.dumps(page_entry))
    assert per_compile_id < one_page / 2


# -- in the browser ---------------------------------------------------------------------------
def search(open_site: SiteOpener, site: Path, query: str) -> Page:
    page, report = open_site(site / "index.html")
    box = page.locator(".md-search__input")
    box.click()
    box.press_sequentially(query)  # Material reacts to key events, not to fill()
    page.locator(".md-search-result__item").first.wait_for(timeout=SEARCH_TIMEOUT_MS)
    _settle(page)
    assert report.console_errors == [] and report.outside_requests == []
    return page


def _settle(page: Page) -> None:
    """Wait until the results stop changing: the first results may answer a prefix of the
    query typed so far (Material searches as each key is pressed)."""
    state = "document.querySelector('.md-search-result')?.innerText"
    last, same, waited = None, 0, 0
    while same < 3 and waited < SEARCH_TIMEOUT_MS:
        page.wait_for_timeout(200)
        waited += 200
        now = page.evaluate(state)
        same, last = (same + 1, last) if now == last else (0, now)


def matching(page: Page) -> int:
    meta = page.locator(".md-search-result__meta").inner_text()
    match = re.match(r"([\d,]+) matching", meta)
    assert match, meta
    return int(match.group(1).replace(",", ""))


@pytest.mark.slow
@pytest.mark.browser
def test_a_storm_answers_a_compile_id_with_its_page(storm: Path, open_site: SiteOpener) -> None:
    page = search(open_site, storm, "[0/33]")
    first = page.locator(".md-search-result__item a").first
    assert "-_0_33_0/index.html" in (first.get_attribute("href") or "")


@pytest.mark.slow
@pytest.mark.browser
def test_a_storm_answers_a_shared_section_with_every_compile_page(
    storm: Path, open_site: SiteOpener
) -> None:
    """'Shape-env guards' is in every compile page's summary: the index holds it once, and
    the answer still lists every compile page, each linking to its own summary."""
    page = search(open_site, storm, "Shape-env guards")
    assert matching(page) >= STORM
    links = page.locator(".md-search-result__item a[href*='#summary']")
    links.nth(2).wait_for(timeout=SEARCH_TIMEOUT_MS)
    hrefs = {re.sub(r"\?h=[^#]*", "", h) for h in links.evaluate_all("a => a.map(e => e.href)")}
    pages = {h.rsplit("/", 2)[-2] for h in hrefs}
    assert len(pages) == len(hrefs) >= 3  # other pages, not one page's copy


@pytest.mark.slow
@pytest.mark.browser
def test_a_graph_break_storm_answers_graph_break_with_its_compile_pages(
    break_storm: Path, open_site: SiteOpener
) -> None:
    page = search(open_site, break_storm, "graph break")
    assert matching(page) >= STORM  # each compile id's page, restarted by its graph break
    hrefs = page.locator(".md-search-result__item a").evaluate_all("a => a.map(e => e.href)")
    assert any("graph_breaks.html" in h for h in hrefs)

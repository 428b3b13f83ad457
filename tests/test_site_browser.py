"""Real reports in headless Chromium, opened from file:// with every outside request aborted.

The sites are the torch 2.13 corpus traces and our fixtures, built once per run through the
same cache as ``test_site.py``. Checks: nothing is fetched from the network and nothing logs an
error; search finds a graph-break reason and opens the compile id; the stack trie folds; a
code line anchor scrolls its line into view; the light/dark toggle works.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import pytest
from corpus import fixture_traces, trace_id
from test_site import (
    EXAMPLE,
    GRAPH_BREAKS,
    BuiltSite,
    SiteCache,
    artifacts_of,
    site_cache,
    torch_213_site_traces,
)

if TYPE_CHECKING:
    from browser import SiteOpener, SiteReport
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

BROWSER_TRACES = torch_213_site_traces() + fixture_traces()
SEARCH_TIMEOUT_MS = 15_000


@pytest.fixture(scope="session", autouse=True)
def browser_sites(tmp_path_factory: pytest.TempPathFactory) -> SiteCache:
    """Build every site first (before Chromium starts, and outside the timed page checks)."""
    cache = site_cache(tmp_path_factory)
    cache.prebuild([*BROWSER_TRACES, EXAMPLE])
    return cache


def assert_clean(report: SiteReport) -> None:
    assert report.outside_requests == []
    assert report.console_errors == []
    assert report.dialogs == []


def busiest_unit_page(site: BuiltSite) -> str:
    """The compile-id page with the most artifacts (the heaviest page a user opens)."""
    counts: dict[str, int] = {}
    for artifact in artifacts_of(site.trace):
        counts[artifact.page] = counts.get(artifact.page, 0) + 1
    assert counts, f"{trace_id(site.trace)} has no artifacts"
    return max(sorted(counts), key=lambda page: counts[page])


@pytest.mark.parametrize("trace", BROWSER_TRACES, ids=[trace_id(p) for p in BROWSER_TRACES])
def test_pages_stay_offline_without_errors(
    trace: Path, browser_sites: SiteCache, open_site: SiteOpener
) -> None:
    site = browser_sites.get(trace)
    for page_path in ("index.html", busiest_unit_page(site)):
        page, report = open_site(site.site / page_path)
        assert page.locator("article h1").count() == 1
        page.wait_for_load_state("networkidle", timeout=60_000)  # a loaded CI machine
        assert_clean(report)


def test_search_finds_a_graph_break_and_opens_its_compile_id(
    browser_sites: SiteCache, open_site: SiteOpener
) -> None:
    site = browser_sites.get(GRAPH_BREAKS)
    page, report = open_site(site.site / "index.html")
    search = page.locator(".md-search__input")
    search.click()
    search.press_sequentially("Tensor.item")  # Material reacts to key events, not to fill()
    hit = page.locator(".md-search-result__item a[href*='-_4_0_0/index.html']").first
    hit.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    hit.click()
    page.wait_for_url(lambda url: urlparse(url).path.endswith("/-_4_0_0/index.html"))
    assert "[4/0]" in page.locator("article h1").inner_text()
    assert "Tensor.item()" in page.locator("article").inner_text()
    assert_clean(report)


@pytest.mark.parametrize("query", ["0/1", "[0/1]"])
def test_search_finds_a_compile_id_with_or_without_brackets(
    browser_sites: SiteCache, open_site: SiteOpener, query: str
) -> None:
    site = browser_sites.get(EXAMPLE)
    page, report = open_site(site.site / "index.html")
    search = page.locator(".md-search__input")
    search.click()
    search.press_sequentially(query)
    hit = page.locator(".md-search-result__item a[href*='-_0_1_0/index.html']").first
    hit.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    assert_clean(report)


def test_stack_trie_collapses_and_expands_on_click(
    browser_sites: SiteCache, open_site: SiteOpener
) -> None:
    site = browser_sites.get(GRAPH_BREAKS)
    page, report = open_site(site.site / "index.html")
    page.locator("li.trie-node[data-trie-bound]").first.wait_for(state="attached")
    # every node with a compile id below it starts open (test_answers_overview.py)
    assert page.locator("li.trie-node.trie-collapsed").count() == 0
    node = page.locator("li.trie-node:has(> .trie-toggle)").first.element_handle()
    toggle = node.query_selector(":scope > .trie-toggle")
    children = node.query_selector(":scope > ul")
    assert toggle is not None and children is not None
    assert toggle.get_attribute("aria-expanded") == "true"
    assert children.is_visible()
    toggle.click()
    assert not children.is_visible()
    assert toggle.get_attribute("aria-expanded") == "false"
    toggle.press("Enter")
    assert children.is_visible()
    assert children.query_selector_all("a.cid"), "the compile ids below it are not reachable"
    assert_clean(report)


def _line_anchors(page_html: str, line: int) -> list[str]:
    """Links to ``line`` of the page's artifact code blocks that have it, in page order."""
    blocks = re.findall(
        r'data-block="(artifact-\d+)"><pre><span></span><code>(.*?)</code>', page_html, re.S
    )
    anchors = [f"{name}-L{line}" for name, code in blocks if code.count("\n</span>") >= line]
    assert anchors, f"no code block with {line} lines"
    return anchors


def _line_anchor(page_html: str, line: int) -> str:
    """The anchor of ``line`` in the last code block on the page that has that many lines."""
    return _line_anchors(page_html, line)[-1]


def _line_in_view(page: Page, anchor: str) -> bool:
    """The line's span is shown, with its top inside the viewport."""
    if not page.locator(f"[id='{anchor}']").is_visible():
        return False
    return page.evaluate(
        """(id) => {
            const r = document.getElementById(id).getBoundingClientRect();
            return r.top >= 0 && r.top < window.innerHeight;
        }""",
        anchor,
    )


def test_code_line_anchor_scrolls_to_the_line(
    browser_sites: SiteCache, open_site: SiteOpener
) -> None:
    site = browser_sites.get(EXAMPLE)
    unit_page = busiest_unit_page(site)
    anchor = _line_anchor(site.page(unit_page), 5)
    page, report = open_site(site.site / unit_page, fragment=anchor)
    assert page.evaluate("window.scrollY") > 0  # far down the page: the browser scrolled
    assert _line_in_view(page, anchor)
    assert page.locator(f"[id='{anchor}']").inner_text().strip() != ""
    assert_clean(report)


def test_code_line_anchor_in_the_first_block(
    browser_sites: SiteCache, open_site: SiteOpener
) -> None:
    """The line anchors of the first code block on the page work too."""
    site = browser_sites.get(EXAMPLE)
    unit_page = busiest_unit_page(site)
    anchors = _line_anchors(site.page(unit_page), 5)
    page, report = open_site(site.site / unit_page, fragment=anchors[0])
    assert page.evaluate("window.scrollY") > 0
    assert _line_in_view(page, anchors[0])
    assert_clean(report)


def test_light_dark_toggle(browser_sites: SiteCache, open_site: SiteOpener) -> None:
    site = browser_sites.get(GRAPH_BREAKS)
    page, report = open_site(site.site / "index.html")
    scheme = "document.body.getAttribute('data-md-color-scheme')"
    assert page.evaluate(scheme) == "default"
    page.locator("form[data-md-component='palette'] label:visible").first.click()
    page.wait_for_function(f"{scheme} === 'slate'")
    page.locator("form[data-md-component='palette'] label:visible").first.click()
    page.wait_for_function(f"{scheme} === 'default'")
    assert_clean(report)

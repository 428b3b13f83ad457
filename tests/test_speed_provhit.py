"""Provenance pages of FX graph cache hits (issue #19: pages that add nothing).

On a cache hit, torch logs the cached compile's post-grad graph, output code, node mapping and
kernel stack traces again, byte for byte; a recompile storm then built one identical page per
compile. The report builds the page once and links every later compile to it, saying so.

The trace is ``provhit`` (torch 2.15, provenance tracking on): [0/0] and [0/1] miss the FX
graph cache, [0/2] .. [0/5] hit it, alternating between the two keys. What a page should show
for a compile comes from that compile's own artifacts (``provenances``), never from the page.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tlsite.core import Trace, load
from tlsite.core.analysis.provenance import provenances
from tlsite.core.render.extra_pages import kernel_names, pane_text

FIXTURES = Path(__file__).parent / "fixtures"
PROVHIT = FIXTURES / "traces" / "provhit" / "provhit.log"
LINK = re.compile(r'<a href="([^"]*)">((?:Provenance|Kernel stack traces)[^<]*)</a>')
LINE_MAPPINGS = re.compile(
    r'<script id="lineMappings" type="application/json">(.*?)</script>', re.S
)
PANE = r'(?s)<section class="tlsite-prov-pane" id="{}".*?<pre class="tlsite-prov-src">\n(.*?)</pre>'


@pytest.fixture(scope="module")
def trace() -> Trace:
    return load(PROVHIT)


@pytest.fixture(scope="module")
def site(site_of: Any) -> Path:
    return site_of(PROVHIT)


def units(trace: Trace) -> dict[str, Any]:
    return {unit.display: unit for unit in trace.units.values()}


def cache_hits(trace: Trace) -> list[Any]:
    return [
        u for u in trace.units.values() if any(a.name == "fx_graph_cache_hit" for a in u.artifacts)
    ]


def unit_links(site: Path, unit: Any) -> list[tuple[Path, str]]:
    page = site / unit.dirname / "index.html"
    found = LINK.findall(page.read_text(encoding="utf-8"))
    return [((page.parent / href).resolve(), html.unescape(text)) for href, text in found]


def test_fixture_has_cache_hits_with_provenance(trace: Trace) -> None:
    hits = cache_hits(trace)
    assert [u.display for u in hits] == ["[0/2]", "[0/3]", "[0/4]", "[0/5]"]
    assert all(provenances(trace, u, any_folder=True) for u in hits)


def test_cache_hit_link_shows_its_own_graphs_code_and_mapping(trace: Trace, site: Path) -> None:
    """Every cache hit's Provenance link leads to a page showing that compile's post-grad
    graph, its kernels and its line maps; where the page is another compile's, the link says so.
    """
    for unit in cache_hits(trace):
        (view,) = provenances(trace, unit, any_folder=True)
        links = [(target, text) for target, text in unit_links(site, unit) if "Provenance" in text]
        assert len(links) == 1, (unit.display, links)
        target, text = links[0]
        page = target.read_text(encoding="utf-8")
        _, post, code = pane_text(view)
        assert html.unescape(re.search(PANE.format("postGradGraph"), page).group(1)) == post
        shown_code = html.unescape(re.search(PANE.format("generatedCode"), page).group(1))
        kernels = kernel_names(code)
        assert kernels and kernel_names(shown_code) == kernels
        mappings = json.loads(LINE_MAPPINGS.search(page).group(1))
        assert mappings == view.mappings and mappings["pyCodeToPost"]
        owner = re.search(r"<h1[^>]*>Provenance (\[\d+/\d+\])", page).group(1)
        if owner != unit.display:
            assert f"same page as {owner}'s: FX graph cache hit" in text, text


def test_identical_cache_hits_share_one_page(trace: Trace, site: Path) -> None:
    """[0/4] and [0/5] repeat [0/2] and [0/3]: no second full page, a link to the first."""
    by_name = units(trace)
    full = sorted(
        p.name
        for p in site.glob("provenance_tracking_*.html")
        if "lineMappings" in p.read_text("utf-8")
    )
    assert full == [
        f"provenance_tracking_{by_name[d].dirname}.html"
        for d in ("[0/0]", "[0/1]", "[0/2]", "[0/3]")
    ]
    for later, first in (("[0/4]", "[0/2]"), ("[0/5]", "[0/3]")):
        targets = {t.name for t, _ in unit_links(site, by_name[later])}
        assert targets == {
            f"provenance_tracking_{by_name[first].dirname}.html",
            "kernel_stack_traces.html",
        }
        assert not (site / by_name[later].dirname / "kernel_stack_traces.html").exists()
        # the shared page names the compiles it also serves
        shared = (site / f"provenance_tracking_{by_name[first].dirname}.html").read_text("utf-8")
        assert f'href="{by_name[later].dirname}/index.html">{later}</a>' in shared


def test_tlparse_file_name_of_a_shared_page_is_a_small_note(trace: Trace, site: Path) -> None:
    """tlparse writes ``provenance_tracking_<D>.html`` for every compile: keep the name, as a
    small page with the report's CSP and no script that links to the shared page."""
    later, first = units(trace)["[0/4]"], units(trace)["[0/2]"]
    note = (site / f"provenance_tracking_{later.dirname}.html").read_text(encoding="utf-8")
    assert len(note) < 3000
    assert "<script" not in note and 'http-equiv="Content-Security-Policy"' in note
    assert f'href="provenance_tracking_{first.dirname}.html"' in note
    assert "FX graph cache hit, key fye2wowkgxfw2jipu4qr6pmaegowgraijw5n5ifh2hlsowt4vdfb" in note


def test_provenance_index_links_hits_to_the_first_page(trace: Trace, site: Path) -> None:
    index = html.unescape((site / "provenance.html").read_text(encoding="utf-8"))
    for later, first in (("[0/4]", "[0/2]"), ("[0/5]", "[0/3]")):
        page = f"provenance_tracking_{units(trace)[first].dirname}.html"
        row = index.split(f">{later}</a>", 1)[1].split("</tr>", 1)[0]
        assert f'<a href="{page}">same as {first}\'s</a>' in row, row


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize(
    ("scheme", "width"), [("default", 1280), ("slate", 1280), ("default", 390)]
)
def test_cache_hit_provenance_link_in_chromium(
    trace: Trace, site: Path, open_site: Any, scheme: str, width: int, tmp_path: Path
) -> None:
    """From [0/4]'s compile page, the Provenance link opens [0/2]'s page with the kernel."""
    later = units(trace)["[0/4]"]
    page, report = open_site(site / later.dirname / "index.html")
    page.set_viewport_size({"width": width, "height": 900})
    first = units(trace)["[0/2]"].dirname
    link = page.locator(f'a[href="../provenance_tracking_{first}.html"]', has_text="same page")
    assert link.count() == 1 and link.is_visible()
    assert link.inner_text().startswith("Provenance (same page as [0/2]'s: FX graph cache hit")
    link.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"provenance_tracking_{first}.html")
    kernel = kernel_names(pane_text(provenances(trace, later, any_folder=True)[0])[2])[0]
    assert kernel in page.locator("#generatedCode").inner_text()
    page.evaluate(f"document.body.setAttribute('data-md-color-scheme', '{scheme}')")
    page.screenshot(path=str(tmp_path / f"provhit_{scheme}_{width}.png"), full_page=False)
    assert not report.console_errors and not report.outside_requests


def test_empty_node_mapping_of_a_cache_hit_is_called_empty(site_of: Any) -> None:
    """With provenance tracking off, torch 2.15 logs an empty node mapping on every FX graph
    cache hit (the 2.15 storm's 301 pages): the page says it is empty, not invalid JSON."""
    log = PROVHIT.with_name("provhit_off.log")
    trace = load(log)
    (hit,) = cache_hits(trace)
    mapping = [a for a in hit.artifacts if a.name.startswith("inductor_provenance_tracking_node")]
    assert mapping and (mapping[0].payload is None or mapping[0].payload.size == 0)
    (target, _), *_ = unit_links(site_of(log), hit)
    page = target.read_text(encoding="utf-8")
    assert "The node mapping is empty" in page and "torch does so on an FX graph cache hit" in page
    assert "not valid JSON" not in page

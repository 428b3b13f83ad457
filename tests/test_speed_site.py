"""What the site build leaves out and how it indexes search (issue #19, site output).

A report copied every file of Material's theme, so each zip carried source maps and lunr's
language files that an English report never loads; Material's search plugin re-parsed every
page's HTML with Python's ``HTMLParser``. These tests check, on real traces, that the report
leaves those files out and still works from ``file://`` with search, and that tlsite's own
indexer gives the sections Material's parser gives.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import TORCH_213
from material.plugins.search.plugin import Parser
from test_answers_search import code_index
from test_answers_search import sections as sections_in_code_index
from test_site import RECOMPILES, BuiltSite, site_cache

from tlsite.mkdocs_plugin.search_index import sections

if TYPE_CHECKING:
    from browser import SiteOpener

TRAINING = next(iter(sorted(TORCH_213.glob("training/*.log"))), None)
needs_training = pytest.mark.skipif(TRAINING is None, reason="no torch 2.13 training trace")
#: Files of Material's theme a report with English search never loads.
UNREAD = (".map", "/lunr/")


@pytest.fixture(scope="module")
def recompiles(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    return site_cache(tmp_path_factory).get(RECOMPILES)


def search_docs(site: Path) -> list[dict[str, str]]:
    return json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))["docs"]


# -- theme files -------------------------------------------------------------------------------
def test_the_site_and_zip_leave_out_theme_files_no_page_loads(recompiles: BuiltSite) -> None:
    site = [p.relative_to(recompiles.site).as_posix() for p in recompiles.site.rglob("*")]
    with zipfile.ZipFile(recompiles.bundle) as bundle:
        zipped = bundle.namelist()
    for files in (site, zipped):
        assert [f for f in files if any(part in f for part in UNREAD)] == []
        # what the pages do load is there
        assert any(f.endswith(".min.js") and "/workers/search." in f for f in files)
        assert any(f.endswith(".min.js") and "/javascripts/bundle." in f for f in files)
        assert any(f.endswith(".min.css") and "/stylesheets/main." in f for f in files)


@pytest.mark.slow
@pytest.mark.browser
def test_every_page_opens_without_errors_and_search_answers(
    recompiles: BuiltSite, open_site: SiteOpener
) -> None:
    pages = sorted(recompiles.site.rglob("*.html"))
    assert len(pages) > 10
    for path in pages:
        page, report = open_site(path)
        page.wait_for_load_state("load")
        assert report.console_errors == [], path
        assert report.outside_requests == [], path
        page.close()
    page, report = open_site(recompiles.site / "-_0_3_0" / "index.html")
    box = page.locator(".md-search__input")
    box.click()
    box.press_sequentially("dtype mismatch")
    hit = page.locator(
        ".md-search-result__item a[href*='-_0_3_0/index.html'][href$='#why-it-recompiled']"
    )
    hit.first.wait_for(state="visible", timeout=15_000)
    assert report.console_errors == [] and report.outside_requests == []


# -- search index -------------------------------------------------------------------------------
def materials(html: str) -> list[tuple[str | None, str, str]]:
    """``(id, title, text)`` of each section as Material's search parser reads ``html``."""
    parser = Parser()
    parser.feed(html)
    parser.close()
    return [
        (s.id, "".join(s.title).strip(), "".join(s.text).strip())
        for s in parser.data
        if not s.is_excluded()
    ]


def ours(html: str) -> list[tuple[str | None, str, str]]:
    return [
        (s.id, "".join(s.title).strip(), "".join(s.text).strip())
        for s in sections(html)
        if not s.excluded
    ]


#: HTML that takes each of Material's rules: text before a heading, a heading's permalink,
#: whitespace kept in <pre> only, entities, void and self-closed tags, excluded elements
#: nested in elements of the same tag, headings nested in an element, empty kept elements.
TRICKY = [
    '<p>Before &amp; <code>x &lt; y</code></p>\n<h2 id="a">A <a class="headerlink" href="#a">¶</a>'
    "</h2>\n<p>one\ntwo</p><pre><code>  keep\n\n  this</code></pre><br><img src=x>",
    "<div><div data-search-exclude><div>hidden</div> still hidden</div> shown</div><p> </p>"
    '<h3 id="b" data-search-exclude>excluded</h3><p>after</p>',
    '<details><summary>s</summary><h2 id="c">Inside</h2><p>in</p></details><p>out</p>'
    '<svg><path d="M0"/></svg><ul><li><code>it&#39;s</code></li><li></li></ul>',
    '<h1 id="top">Top</h1><p>x<sub>2</sub></p><table><tr><th>k</th><td>v</td></tr></table>'
    '<!-- comment <p>no</p> --><p class="linenodiv">1 2</p><p>"quoted" \'q\'</p>',
]


@pytest.mark.parametrize("html", TRICKY)
def test_sections_are_material_sections(html: str) -> None:
    assert ours(html) == materials(html)


@pytest.mark.parametrize("page", ["index.html", "-_0_3_0/index.html", "recompiles.html"])
def test_report_pages_index_as_material_would(recompiles: BuiltSite, page: str) -> None:
    html = recompiles.page(page)
    article = html[html.index("<article") : html.index("</article>")]
    assert len(ours(article)) > 1
    assert ours(article) == materials(article)


def test_the_compile_time_note_is_not_searched_on_every_compile_page(
    recompiles: BuiltSite,
) -> None:
    note = "Each timer"
    assert note in recompiles.page("-_0_3_0/index.html")
    breakdowns = [
        d for d in search_docs(recompiles.site) if "#compile-time-breakdown" in d["location"]
    ]
    assert len(breakdowns) >= 5
    assert [d["location"] for d in breakdowns if note in d["text"]] == []
    assert all("Largest self time" in d["text"] for d in breakdowns)


@pytest.mark.slow
@pytest.mark.parametrize("trace", [RECOMPILES, TRAINING], ids=["recompiles", "training"])
def test_the_search_index_is_materials_without_what_the_code_index_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace: Path | None
) -> None:
    """Every other file as Material makes it; every entry of Material's index but the
    headings with no text that the code index lists (search finds them there by title)."""
    if trace is None:
        pytest.skip("no torch 2.13 training trace")
    from tlsite.cli import build
    from tlsite.mkdocs_plugin.report import OwnSite

    build(str(trace), tmp_path / "ours", make_zip=False)
    monkeypatch.setattr(OwnSite, "_index_search", lambda self, config: None)
    build(str(trace), tmp_path / "material", make_zip=False)
    ours_files, materials_files = (
        {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        for root in (tmp_path / "ours", tmp_path / "material")
    )
    # manifest.json lists every file with its size
    index = ("search/search_index.json", "search/search_index.js", "manifest.json")
    assert ours_files.keys() == materials_files.keys()
    differ = [n for n in ours_files if ours_files[n] != materials_files[n] and n not in index]
    assert differ == []

    listed = set(sections_in_code_index(tmp_path / "ours"))
    theirs, mine = search_docs(tmp_path / "material"), search_docs(tmp_path / "ours")
    left_out = [d for d in theirs if not d["text"] and d["location"] in listed]
    assert len(left_out) > 5
    assert mine == [d for d in theirs if d not in left_out]
    titles = {d["title"].rsplit(" (", 1)[0] for d in left_out}
    assert titles <= set(code_index(tmp_path / "ours")["titles"])


@pytest.mark.slow
@pytest.mark.browser
def test_an_artifact_is_found_by_its_name_through_the_code_index(
    recompiles: BuiltSite, open_site: SiteOpener
) -> None:
    """Material's index has no entry for an artifact heading any more: its name, or a part
    of it from a word start (which Material's prefix search did not find), finds each one."""
    page, report = open_site(recompiles.site / "index.html")
    box = page.locator(".md-search__input")
    box.click()
    box.press_sequentially("output_graph")
    hit = page.locator(
        ".md-search-result__item a[href*='-_0_3_0/index.html'][href$='#artifact-25']"
    )
    hit.first.wait_for(state="visible", timeout=15_000)
    # results for a prefix typed so far may show first: wait for those of the whole query
    marked = "dynamo_<mark>output_graph</mark> (25)"
    page.wait_for_function(
        """marked => [...document.querySelectorAll(
            ".md-search-result__item a[href$='#artifact-25'] h2, "
            + ".md-search-result__item a[href$='#artifact-25'] h1")]
            .some(h => h.innerHTML === marked)""",
        arg=marked,
        timeout=15_000,
    )
    assert hit.first.locator("h2, h1").first.inner_html() == marked
    linked = page.locator(".md-search-result__item a[href*='#artifact-']")
    assert linked.count() >= 5  # one per compile id with a Dynamo graph
    assert report.console_errors == []

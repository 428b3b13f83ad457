"""Guards found by what they print, and each rank's PyTorch version (issue #16).

A user who copies ``L['idx']`` or ``L['self'].training`` out of a recompile reason into the
search box must land on the guards that check it, not on pages that merely contain "idx"; and
the multi-rank landing page must say which PyTorch each rank ran, since ranks that ran
different versions compile differently.
"""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import CORPUS
from test_answers_search import SEARCH_TIMEOUT_MS, needs_training, search, sections, training
from test_multirank_core import to_html

from tlsite.core import resolve_input
from tlsite.core.multirank import load_ranks
from tlsite.core.render.landing import render_landing
from tlsite.mkdocs_plugin.multirank_build import build_multirank

if TYPE_CHECKING:
    from browser import SiteOpener
    from test_site import BuiltSite

__all__ = ["training"]  # the fixture, used by name

TWO_RANKS = CORPUS / "torch-2.13" / "multi_rank"
needs_two_ranks = pytest.mark.skipif(not TWO_RANKS.is_dir(), reason="no two-rank trace")
PAGE = "-_0_0_0/index.html"
GUARDS = "#artifact-21"  # [0/0]'s dynamo_cpp_guards_str


# -- guards -------------------------------------------------------------------------------------
@needs_training
def test_attributes_guarded_through_a_variable_are_search_terms(training: BuiltSite) -> None:
    terms = sections(training.site)[PAGE + GUARDS]
    assert "L['idx']" in terms
    assert "L['self']._modules['blocks']._modules['0']._modules['attn'].training" in terms


@pytest.mark.slow
@pytest.mark.browser
@needs_training
@pytest.mark.parametrize("query", ["L['idx']", "L['self'].training"])
def test_guard_text_finds_the_guards_first(
    training: BuiltSite, open_site: SiteOpener, query: str
) -> None:
    page, report = search(open_site, training.site, query)
    hit = page.locator(f".md-search-result__item a[href*='{PAGE}'][href$='{GUARDS}']")
    hit.first.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    results = page.locator(".md-search-result__item a")
    hrefs = [results.nth(i).get_attribute("href") or "" for i in range(2)]
    # the first result is the compile id's page, and its first section the guards
    assert PAGE in hrefs[0] and "#" not in hrefs[0], hrefs
    assert PAGE in hrefs[1] and hrefs[1].endswith(GUARDS), hrefs
    assert report.console_errors == []


# -- PyTorch version per rank ------------------------------------------------------------------
@pytest.mark.slow
@needs_two_ranks
def test_the_ranks_table_shows_each_ranks_pytorch(tmp_path: Path) -> None:
    with resolve_input(str(TWO_RANKS)) as resolved:
        build_multirank(resolved, tmp_path / "site", jobs=1)
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    table = page[page.index('id="ranks"') : page.index('id="chromium"')]
    assert "<th>PyTorch</th>" in table
    rows = re.findall(r"<tr>\s*<td><a href=\"rank_(\d)/index.html\">.*?</tr>", table, re.S)
    assert rows == ["0", "1"]
    for row in re.findall(r"<tr>\s*<td><a href=\"rank_\d/index.html\">.*?</tr>", table, re.S):
        assert "<td><code>2.13.0+cpu</code></td>" in row
    assert "different PyTorch versions" not in page


@pytest.mark.slow
@needs_two_ranks
def test_ranks_that_ran_different_pytorch_are_warned_about() -> None:
    with resolve_input(str(TWO_RANKS)) as resolved, load_ranks(resolved, jobs=1) as ranks:
        summaries = list(ranks.ranks)
    assert {r.torch_version for r in summaries} == {"2.13.0+cpu"}
    summaries[1] = dataclasses.replace(summaries[1], torch_version="2.12.1+cu126")
    page = to_html(render_landing(summaries))
    warning = html.unescape(re.sub(r"<[^>]+>", "", page[: page.index('id="ranks"')]))
    assert "different PyTorch versions: 2.13.0+cpu on rank 0; 2.12.1+cu126 on rank 1" in warning

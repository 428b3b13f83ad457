"""Search finds code: ops, kernel names, graph nodes, guards and metrics (issue #16, point 4).

A report's code blocks are put into its pages after Material's search indexed them, so before
``search/code_index.js`` a user who typed ``aten.mm`` (145 times in the training trace's graphs)
read "No matching documents" and concluded the op was not in the model. These tests check the
code index against the artifacts' own text on the real torch 2.13 training trace, and type the
queries into the search box of the report opened from ``file://`` in Chromium.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import pytest
import yaml
from corpus import TORCH_213, TRAINING_TRACE_GLOB
from test_site import (
    RECOMPILES,
    BuiltSite,
    _make_trace,
    artifacts_of,
    inductor_kernels,
    site_cache,
)

from tlsite.cli import example_trace

if TYPE_CHECKING:
    from browser import SiteOpener, SiteReport
    from playwright.sync_api import Page

TRAINING = next(iter(sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))), None)
needs_training = pytest.mark.skipif(TRAINING is None, reason="no torch 2.13 training trace")
SEARCH_TIMEOUT_MS = 15_000
#: The search index Material loads and the code index, together (issue #16's budget).
INDEX_BUDGET = 5 * 2**20


@pytest.fixture(scope="module")
def training(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    assert TRAINING is not None
    return site_cache(tmp_path_factory).get(TRAINING)


def code_index(site: Path) -> dict:
    text = (site / "search" / "code_index.js").read_text(encoding="utf-8")
    prefix = "var __tlsite_code = "
    assert text.startswith(prefix)
    return json.loads(text[len(prefix) :].rstrip().rstrip(";"))


def sections(site: Path) -> dict[str, set[str]]:
    """``page#anchor`` -> the terms search finds there."""
    index = code_index(site)
    found: dict[str, set[str]] = {}
    for location, _title, entries in index["pages"]:
        for heading, _title_id, terms_id in zip(*[iter(entries)] * 3, strict=True):
            anchor = f"artifact-{heading}" if isinstance(heading, int) else heading
            found[f"{location}#{anchor}"] = set(index["terms"][terms_id].split(" "))
    return found


def artifact_text(site: BuiltSite, page: str, number: int) -> str:
    """An artifact's text as the report's raw file has it."""
    (info,) = [a for a in artifacts_of(site.trace) if a.page == page and a.number == number]
    assert info.path is not None
    return (site.site / (info.raw_file or info.path)).read_text(encoding="utf-8")


@pytest.mark.slow
@needs_training
def test_every_graph_that_calls_an_op_is_found_by_it(training: BuiltSite) -> None:
    found = sections(training.site)
    with_mm = with_addmm = 0
    for artifact in artifacts_of(training.trace):
        if not artifact.path or not artifact.path.endswith(".txt"):
            continue
        text = artifact_text(training, artifact.page, artifact.number)
        terms = found.get(f"{artifact.page}#artifact-{artifact.number}", set())
        if "torch.ops.aten.mm.default(" in text:
            with_mm += 1
            assert "aten.mm.default" in terms, (artifact.page, artifact.name)
        if "torch.ops.aten.addmm.default(" in text:
            with_addmm += 1
            assert "aten.addmm.default" in terms, (artifact.page, artifact.name)
        if "torch.nn.functional.layer_norm(" in text:
            assert "torch.nn.functional.layer_norm" in terms, (artifact.page, artifact.name)
    assert with_mm >= 5 and with_addmm >= 5  # the joint, forward, backward, post-grad graphs...


@pytest.mark.slow
@needs_training
def test_graph_node_names_are_found_without_their_number(training: BuiltSite) -> None:
    found = sections(training.site)
    graphs = [a for a in artifacts_of(training.trace) if a.name == "dynamo_output_graph"]
    assert graphs
    for artifact in graphs:
        text = artifact_text(training, artifact.page, artifact.number)
        nodes = {re.sub(r"_\d+$", "", n) for n in re.findall(r"(?m)^ {8}(\w+): \"", text)}
        terms = found[f"{artifact.page}#artifact-{artifact.number}"]
        assert nodes and nodes <= terms, sorted(nodes - terms)


@pytest.mark.slow
@needs_training
def test_kernels_guards_and_metrics_are_found(training: BuiltSite) -> None:
    found = sections(training.site)
    every_term = set().union(*found.values())
    kernels = inductor_kernels(training.trace)
    assert kernels and kernels <= every_term
    guards = [a for a in artifacts_of(training.trace) if a.name == "dynamo_cpp_guards_str"]
    assert guards
    for artifact in guards:
        text = artifact_text(training, artifact.page, artifact.number)
        terms = found[f"{artifact.page}#artifact-{artifact.number}"]
        if "TENSOR_MATCH:" in text:
            assert "TENSOR_MATCH" in terms
        for guarded in set(re.findall(r"source=(L\['\w+'\])", text)):
            assert guarded in terms, guarded
    page = "-_0_0_0/index.html"
    assert "inductor_compile_time_s" in found[f"{page}#metrics-0"]
    assert 'id="metrics-0"' in training.page(page)


@pytest.mark.slow
@needs_training
def test_every_code_section_links_to_an_anchor_of_its_page(training: BuiltSite) -> None:
    pages: dict[str, str] = {}
    for location in sections(training.site):
        page, anchor = location.split("#")
        html = pages.setdefault(page, training.page(page))
        assert f'id="{anchor}"' in html, location


@pytest.mark.slow
def test_a_recompile_storm_keeps_each_list_of_terms_once(tmp_path: Path) -> None:
    from tlsite.cli import build

    trace = _make_trace(tmp_path / "storm.log", "--storm", "60", "--base", str(RECOMPILES))
    outcome = build(str(trace), tmp_path / "site", make_zip=False)
    index = code_index(outcome.site)
    assert len(index["pages"]) >= 60
    size = (outcome.site / "search" / "code_index.js").stat().st_size
    indexed = (outcome.site / "search" / "search_index.js").stat().st_size
    # the same code 60 times: each page adds its anchors and references, not its terms
    assert len(index["terms"]) <= 20 and len(index["titles"]) <= 20
    assert size < indexed / 2
    assert size + indexed < INDEX_BUDGET


# -- in the browser ---------------------------------------------------------------------------
def search(open_site: SiteOpener, site: Path, query: str) -> tuple[Page, SiteReport]:
    page, report = open_site(site / "index.html")
    box = page.locator(".md-search__input")
    box.click()
    box.press_sequentially(query)  # Material reacts to key events, not to fill()
    return page, report


@pytest.mark.slow
@pytest.mark.browser
@needs_training
@pytest.mark.parametrize(
    ("query", "anchor", "shown"),
    [
        ("aten.mm", "#artifact-", "aten.mm.default"),
        ("addmm", "#artifact-", "aten.addmm.default"),
        ("layer_norm", "#artifact-", "torch.nn.functional.layer_norm"),
        ("attn_output", "#artifact-1", "attn_output"),  # a node of the Dynamo graph
        ("cpp_fused_gelu_view_3", "#artifact-13", "cpp_fused_gelu_view_3"),
        ("TENSOR_MATCH", "#artifact-21", "TENSOR_MATCH"),
        ("L['idx']", "#artifact-21", "L['idx']"),
        ("inductor_compile_time_s", "#metrics-0", "inductor_compile_time_s"),
    ],
)
def test_search_box_finds_code_and_links_to_its_artifact(
    training: BuiltSite, open_site: SiteOpener, query: str, anchor: str, shown: str
) -> None:
    page, report = search(open_site, training.site, query)
    hit = page.locator(f".md-search-result__item a[href*='-_0_0_0/index.html'][href*='{anchor}']")
    hit.first.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    # the first results may answer a prefix of the query typed so far: wait for the last one
    waited, text = 0, hit.first.inner_text()
    while shown not in text and waited < SEARCH_TIMEOUT_MS:
        page.wait_for_timeout(200)
        waited += 200
        text = hit.first.inner_text()
    assert shown in text
    assert report.console_errors == [] and report.outside_requests == []


@pytest.mark.slow
@pytest.mark.browser
@needs_training
def test_a_code_result_opens_the_artifact(training: BuiltSite, open_site: SiteOpener) -> None:
    page, report = search(open_site, training.site, "aten.mm")
    hit = page.locator(".md-search-result__item a[href*='#artifact-5']").first
    hit.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    assert "aot_joint_graph" in hit.inner_text()
    hit.click()
    page.wait_for_url(lambda url: urlparse(url).fragment == "artifact-5")
    # the graph's code is opened and its first "aten.mm" shown, marked
    code = page.locator("#artifact-5 ~ details.tlsite-artifact").first
    mark = code.locator("mark").first
    mark.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    assert code.get_attribute("open") is not None
    assert mark.inner_text() == "aten.mm"
    box = mark.bounding_box()
    assert box is not None and 0 <= box["y"] <= page.viewport_size["height"]
    assert report.console_errors == []


@pytest.mark.slow
@pytest.mark.browser
@needs_training
def test_code_matches_are_escaped(training: BuiltSite, open_site: SiteOpener) -> None:
    """A guarded name is trace text: its quotes arrive as text, not as markup."""
    page, report = search(open_site, training.site, "L['idx']")
    hit = page.locator(".md-search-result__item a[href*='#artifact-21'] code").first
    hit.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    assert hit.inner_text() == "L['idx']"
    assert report.dialogs == []


# -- other MkDocs sites -----------------------------------------------------------------------
@pytest.mark.slow
def test_a_site_that_embeds_the_report_searches_its_code(tmp_path: Path) -> None:
    """The report under ``report/`` of another site: its code index names the report's pages
    where that site's search finds them, and the pages load the script that reads it."""
    from test_embed import PROJECT, run

    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    config = yaml.safe_load((project / "mkdocs.yml").read_text(encoding="utf-8"))
    config["plugins"][1]["tlsite"]["trace"] = str(example_trace())
    (project / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    site = tmp_path / "site"
    done = run("mkdocs", "build", "--strict", "-d", str(site), cwd=project)
    assert done.returncode == 0, done.stderr
    found = sections(site)
    assert found and all(location.startswith("report/-_") for location in found)
    assert any("aten.addmm.default" in terms for terms in found.values())
    page = (site / "report" / "-_0_0_0" / "index.html").read_text(encoding="utf-8")
    assert "assets/tlsite/search-code.js" in page


@pytest.mark.slow
def test_the_markdown_tree_does_not_ask_for_a_code_index(tmp_path: Path) -> None:
    """Built by plain ``mkdocs build``, the tree's search indexes its code fences itself: its
    pages must not load a script that would look for a file no one wrote."""
    from test_embed import run

    out = tmp_path / "md"
    done = run("tlsite", "markdown", str(example_trace()), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((out / "mkdocs.yml").read_text(encoding="utf-8"))
    assert not any("search-code" in script for script in config["extra"]["polyfills"])


@pytest.mark.slow
@pytest.mark.browser
def test_a_hostile_page_title_in_a_code_result_is_text(
    tmp_path: Path, open_site: SiteOpener
) -> None:
    """A page found only through the code index gets its title from the index: trace text
    (here a function name full of markup) that must show as text and run nothing."""
    from test_hostile_trace import hostile, hostile_trace

    from tlsite.cli import build

    log = tmp_path / "hostile.log"
    log.write_text(hostile_trace(), encoding="utf-8")
    outcome = build(str(log), tmp_path / "site", make_zip=False)
    assert "fail_reason" in set().union(*sections(outcome.site).values())
    page, report = search(open_site, outcome.site, "fail_reason")
    hit = page.locator(".md-search-result__item a[href*='#metrics-0']").first
    hit.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    titles = page.locator(".md-search-result__article h1").all_inner_texts()
    assert any(hostile("coname")[:100] in title for title in titles), titles
    page.wait_for_timeout(500)  # anything injected would have run by now
    assert report.dialogs == [] and report.console_errors == []

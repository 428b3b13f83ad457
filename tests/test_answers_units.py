"""Compile ids and what they produced: the "All compile ids" page (tlparse's index) with graph
sizes, compiled-autograd ids reachable from the overview and the frames, forward / backward /
inference labels on inductor's artifacts, the guard diff shown open, and resume frames that
read differently in the navigation.

Traces: the torch 2.13 ``training`` corpus trace (forward + lazily compiled backward, and an
inference compile of the optimizer), ``tests/fixtures/traces/units`` (compiled autograd),
``graph_breaks`` (resume frames), ``recompiles`` (guard diffs) and ``cache_hits``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import CORPUS, FIXTURE_TRACES, TORCH_213
from test_site import (
    CACHE_HITS,
    EXAMPLE,
    GRAPH_BREAKS,
    RECOMPILES,
    SiteCache,
    article,
    article_text,
    compile_directory,
    site_cache,
    visible_text,
)

from tlsite.cli import build
from tlsite.core import load
from tlsite.core.analysis.graph_size import fx_node_count
from tlsite.core.compile_id import CompileId
from tlsite.core.model import Trace

if TYPE_CHECKING:
    from browser import SiteOpener

TRAINING = TORCH_213 / "training"
UNITS = FIXTURE_TRACES / "units" / "units.log"
GRAPH_TRACES = (TRAINING, UNITS, GRAPH_BREAKS, RECOMPILES, EXAMPLE)


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> SiteCache:
    return site_cache(tmp_path_factory)


def _load(path: Path) -> Trace:
    return load(str(path))


def _anchors(page_html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page_html))


def _nav_labels(page_html: str) -> list[str]:
    nav = page_html[page_html.index("md-nav--primary") : page_html.index("<article")]
    link = r'<a href="[^"#]+" class="md-nav__link[^"]*"[^>]*>\s*'
    link += r'<span class="md-ellipsis">(.*?)</span>'
    return [visible_text(text) for text in re.findall("(?s)" + link, nav)]


def _first_seen_ids(path: Path) -> list[str]:
    """Compile ids in the order the log first names them (tlparse's index order)."""
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(("V", "I", "W", "E")) and "] {" in line:
            envelope = json.loads(line.split("] ", 1)[1])
            cid = CompileId.from_envelope(envelope)
            if cid is not None and not cid.is_empty:
                seen.setdefault(cid.directory_key().display, None)
            elif cid is not None:
                seen.setdefault("[-/-]", None)
    return list(seen)


# -- forward / backward / inference -------------------------------------------------------------
def test_training_inductor_artifacts_say_forward_backward_inference() -> None:
    """[0/0] logs two inductor_output_code (its forward, then the backward compiled lazily on
    the first backward call); [3/0] (the optimizer, under no_grad) an inference one."""
    trace = _load(TRAINING)
    try:
        codes = {
            unit.display: [a.graph_role for a in unit.artifacts if a.kind == "inductor_output_code"]
            for unit in trace.units.values()
        }
        assert codes["[0/0]"] == ["forward", "backward"]
        assert codes["[3/0]"] == ["inference"]
        unit = trace.unit("[0/0]")
        runnable = [a.graph_role for a in unit.artifacts if a.name == "fx_graph_runnable"]
        assert runnable == ["forward", "backward"]
        # what was logged before inductor started is not inductor's: no label
        before = [a for a in unit.artifacts if a.kind in ("dynamo_output_graph", "aot_joint_graph")]
        assert before and all(a.graph_role is None for a in before)
    finally:
        trace.close()


def test_a_cache_hit_without_an_inductor_compile_is_not_labelled() -> None:
    """The second compile of cache_hits is an FX-graph-cache hit that logs no inductor_compile
    span: nothing in the trace says which graph its output code is for, so no label."""
    trace = _load(CACHE_HITS)
    try:
        codes = [a for a in trace.unit("[0/0]").artifacts if a.kind == "inductor_output_code"]
        assert [a.graph_role for a in codes] == ["inference", None]
    finally:
        trace.close()


def test_compile_page_tells_forward_from_backward_output_code(sites: SiteCache) -> None:
    site = sites.get(TRAINING)
    page = site.page("-_0_0_0/index.html")
    headings = [visible_text(h) for h in re.findall(r"(?s)<h3\b[^>]*>(.*?)</h3>", page)]
    codes = [h for h in headings if h.startswith("inductor_output_code")]
    assert len(codes) == 2
    assert "(forward)" in codes[0] and "(backward)" in codes[1]


# -- graph sizes --------------------------------------------------------------------------------
@pytest.mark.parametrize("path", GRAPH_TRACES, ids=lambda p: p.stem)
def test_node_count_of_dynamo_graph_is_torchs_graph_node_count(path: Path) -> None:
    """Counted from the printed graph, it equals the graph_node_count torch logged."""
    trace = _load(path)
    try:
        checked = 0
        for unit in trace.units.values():
            graphs = [a for a in unit.artifacts if a.kind == "dynamo_output_graph"]
            expected = unit.metric("graph_node_count")
            if len(graphs) != 1 or not expected:
                continue
            assert graphs[0].payload is not None
            text = trace.read_payload(graphs[0].payload)
            assert fx_node_count(text) == expected, unit.display
            checked += 1
        assert checked
    finally:
        trace.close()


def test_aot_graph_and_the_graph_inductor_receives_have_the_same_node_count() -> None:
    """aot_forward_graph / aot_backward_graph are printed with one argument per line, the
    before_post_grad_graph inductor receives on one line: two prints of one graph."""
    trace = _load(TRAINING)
    try:
        unit = trace.unit("[0/0]")

        def count(artifact_kind: str, role: str | None = None) -> int | None:
            for a in unit.artifacts:
                if (a.kind == artifact_kind or a.name == artifact_kind) and (
                    role is None or a.graph_role == role
                ):
                    assert a.payload is not None
                    return fx_node_count(trace.read_payload(a.payload))
            raise AssertionError(artifact_kind)

        assert count("aot_forward_graph") == count("before_post_grad_graph", "forward")
        assert count("aot_backward_graph") == count("before_post_grad_graph", "backward")
    finally:
        trace.close()


# -- the All compile ids page -------------------------------------------------------------------
def test_compile_ids_page_lists_every_compile_id_with_its_artifacts(sites: SiteCache) -> None:
    """One row per compile_directory.json key, in its order, linking the compile id's page;
    each artifact links its section there; graphs show their node count."""
    site = sites.get(UNITS)
    page = site.page("compile_ids.html")
    rows = re.findall(r'(?s)<tr id="([^"]+)">(.*?)</tr>', article(page))
    shown = [re.search(r">(\[[^<]*\]|\(unknown\))</a>", row).group(1) for _, row in rows]
    assert shown == _first_seen_ids(UNITS)
    directory = compile_directory(site)
    assert sorted(shown) == sorted(directory)
    for (dirname, row), key in zip(rows, shown, strict=True):
        entry = directory[key]
        unit_page = site.page(f"{dirname}/index.html")
        assert key in unit_page
        links = re.findall(r'href="([^"#]+)#(artifact-\d+)"', row)
        assert len(links) == len(entry["artifacts"]), key
        for href, anchor in links:
            assert href == f"{dirname}/index.html"
            assert anchor in _anchors(unit_page)
    ca_row = dict(rows)["0_-_-_0"]
    assert re.search(r">compiled_autograd_graph</a>.*?· 51 nodes", ca_row)


def test_compile_ids_page_is_second_in_the_navigation(sites: SiteCache) -> None:
    site = sites.get(UNITS)
    labels = _nav_labels(site.page("index.html"))
    assert labels[:2] == ["Overview", "All compile ids"]


def test_compiled_autograd_graph_is_reachable_from_overview_and_frames(sites: SiteCache) -> None:
    """[!0/-/-] (compiled autograd's captured backward graph) is in no frame: the overview and
    the frames index link it, not only the Symbolic shapes page."""
    site = sites.get(UNITS)
    overview = article(site.page("index.html"))
    assert 'href="0_-_-_0/index.html"' in overview
    assert "Compiled autograd" in visible_text(overview)
    frames = article(site.page("frames/index.html"))
    assert 'href="../0_-_-_0/index.html"' in frames
    assert 'href="frame_ca0_1.html"' in frames  # its compiled frame [!0/1/0]


# -- recompiles and resume frames ---------------------------------------------------------------
def test_guard_diff_is_open(sites: SiteCache) -> None:
    site = sites.get(RECOMPILES)
    page = site.page("-_0_2_0/index.html")
    match = re.search(r"<details([^>]*)>\s*<summary>Guard changes since", page)
    assert match is not None
    assert re.search(r"\bopen\b", match.group(1))


def test_resume_frames_have_distinct_readable_titles(sites: SiteCache) -> None:
    site = sites.get(GRAPH_BREAKS)
    labels = [label for label in _nav_labels(site.page("index.html")) if "resume" in label]
    assert labels == [
        "Frame 2: forward (resume at line 22)",
        "Frame 3: forward (resume at line 32)",
        "Frame 4: forward (resume at line 33)",
        "Frame 5: forward (resume at line 34)",
        "Frame 6: forward (resume at line 38)",
        "Frame 8: post (resume at line 45)",
    ]
    text = article_text(site.page("frames/frame_2.html"))
    assert "torch_dynamo_resume_in_forward_at_22" in text  # the code name is still there


@pytest.mark.browser
def test_resume_frames_read_differently_in_the_sidebar(
    sites: SiteCache, open_site: SiteOpener
) -> None:
    """At desktop width each resume frame's navigation label is shown whole (not cut to
    "Frame 2: torch_dynamo_resume_in_forward_at…"), so the five forward ones differ."""
    site = sites.get(GRAPH_BREAKS)
    page, _report = open_site(site.site / "index.html")
    page.set_viewport_size({"width": 1400, "height": 900})
    shown = page.evaluate(
        """() => [...document.querySelectorAll('.md-sidebar--primary a.md-nav__link')]
        .filter(a => a.textContent.includes('resume'))
        .map(a => { const e = a.querySelector('.md-ellipsis') || a;
                    return [a.innerText.trim(), e.scrollWidth <= e.clientWidth + 1]; })"""
    )
    assert len(shown) == 6
    assert all(whole for _, whole in shown), shown
    assert len({text for text, _ in shown}) == 6


def test_sizes_read_as_english(tmp_path: Path) -> None:
    """A one-line artifact is "1 line", not "1 lines", on the list and on its compile page."""
    site = tmp_path / "site"
    build(str(CORPUS / "tlparse-0.4.8" / "inputs" / "subgraph_name.log"), site, make_zip=False)
    pages = [
        p.read_text(encoding="utf-8")
        for p in [site / "compile_ids.html", *site.glob("*/index.html")]
    ]
    text = " ".join(pages)
    assert "· 1 line<" in text or "· 1 line " in text
    assert not re.search(r"\b1 (?:lines|nodes)\b", text)

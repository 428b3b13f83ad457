"""Every compile id of a trace is in the overview's stack trie on first load, even one the log
has no stack for (no ``dynamo_start`` record: a restart, or the compile that hit the recompile
limit).

Expected compile ids come from the log's record envelopes, never from tlsite's own output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import FIXTURE_TRACES, TORCH_213, trace_id
from test_site import RECOMPILES, SiteCache, site_cache

from tlsite.core import load
from tlsite.core.render.pages import ReportRenderer

if TYPE_CHECKING:
    from browser import SiteOpener

TRACES = sorted([*FIXTURE_TRACES.glob("*/*.log"), *TORCH_213.glob("*/*.log")])


def framed_compile_ids(path: Path) -> set[str]:
    """The compile ids (``[x/y]``, ``[x/y_z]``, ``[!a/x/y]``) of the log's records that name a
    frame, read from each record's JSON envelope."""
    ids = set()
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        if line.startswith("\t") or "] {" not in line:
            continue
        try:
            envelope = json.loads(line.split("] ", 1)[1])
        except ValueError:
            continue
        if not isinstance(envelope, dict) or envelope.get("frame_id") is None:
            continue
        ca = envelope.get("compiled_autograd_id")
        fcid = envelope.get("frame_compile_id")
        attempt = envelope.get("attempt")
        prefix = "" if ca is None else f"!{ca}/"
        suffix = f"_{attempt}" if attempt else ""
        ids.add(f"[{prefix}{envelope['frame_id']}/{'-' if fcid is None else fcid}{suffix}]")
    return ids


def trie_section_links(markdown: str) -> list[str]:
    """The ``a.cid`` links of the overview's "Stack trie" section (none if it has none)."""
    return cid_links(markdown.partition("## Stack trie")[2].split("\n## ", 1)[0])


def cid_links(section: str) -> list[str]:
    """The ``a.cid`` links of Markdown: raw HTML ones (the trie) and attr_list ones
    (``{ .cid ... }``, the line under it)."""
    html = re.findall(r'<a class="cid [^"]*"[^>]*>([^<]*)</a>', section)
    md = re.findall(r"\[\\\[([^\]]*)\\\]\]\([^)]*\)\{ \.cid ", section)
    return html + [f"[{text}]" for text in md]


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=[trace_id(p) for p in TRACES])
def test_every_compile_id_is_a_link_in_the_trie_section(trace: Path) -> None:
    expected = framed_compile_ids(trace)
    links = trie_section_links(ReportRenderer(load(trace)).overview().standalone_markdown())
    assert expected - set(links) == set()
    assert set(links) <= expected


def test_the_compile_that_hit_the_recompile_limit_hangs_with_its_frame() -> None:
    # [0/5] has no dynamo_start record; [0/0]..[0/4] of the same frame do
    log = RECOMPILES.read_text(encoding="utf-8")
    assert log.count('"dynamo_start"') == 5
    assert '"frame_compile_id": 5' in log
    markdown = ReportRenderer(load(RECOMPILES)).overview().standalone_markdown()
    node = next(li for li in re.findall(r"<li[^>]*>.*?</li>", markdown) if ">[0/5]</a>" in li)
    assert ">[0/4]</a>" in node  # at the node of its frame's other compiles
    assert "(no stack logged)" in node
    assert "Compile ids with no recorded stack" not in markdown


def test_a_frame_with_no_stack_is_listed_under_the_trie() -> None:
    trace = FIXTURE_TRACES / "torch-2.15" / "export.log"
    assert '"dynamo_start"' not in trace.read_text(encoding="utf-8")
    markdown = ReportRenderer(load(trace)).overview().standalone_markdown()
    section = markdown.split("## Stack trie", 1)[1].split("\n## ", 1)[0]
    line = next(s for s in section.splitlines() if s.startswith("Compile ids with no recorded"))
    # the export calls whose records log the Python stack that called torch.export hang in
    # the trie there; the data-dependent call's records log none
    assert cid_links(line) == ["[1/0]"]
    assert sorted(cid_links(section)) == sorted(framed_compile_ids(trace))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SiteCache:
    return site_cache(tmp_path_factory)


@pytest.mark.browser
@pytest.mark.slow
def test_the_recompile_limit_compile_is_visible_in_the_trie_without_a_click(
    built: SiteCache, open_site: SiteOpener
) -> None:
    site = built.get(RECOMPILES)
    page, report = open_site(site.site / "index.html")
    page.wait_for_load_state("networkidle")
    links = page.locator(".stack-trie a.cid")
    texts = [links.nth(i).inner_text() for i in range(links.count())]
    assert sorted(texts) == sorted(framed_compile_ids(RECOMPILES))
    limit = page.locator(".stack-trie a.cid", has_text="[0/5]")
    assert limit.is_visible()
    assert "No stack was logged" in (limit.get_attribute("title") or "")
    assert page.locator(".stack-trie .trie-unlogged").first.is_visible()
    assert report.console_errors == []


@pytest.mark.slow
def test_a_storm_node_links_the_rest_of_its_compile_ids(tmp_path: Path) -> None:
    """A frame recompiled more times than a node lists: the rest are one click away."""
    from test_site import RECOMPILES, _make_trace

    from tlsite.cli import build
    from tlsite.core.render.trie_html import MAX_LINKS_PER_NODE

    trace = _make_trace(
        tmp_path / "storm.log", "--storm", str(MAX_LINKS_PER_NODE + 30), "--base", str(RECOMPILES)
    )
    build(str(trace), tmp_path / "site", make_zip=False)
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    trie = page.split('class="stack-trie"', 1)[1]
    more = re.search(r'<a class="trie-more" href="([^"]+)">and (\d+) more', trie)
    assert more is not None
    assert (tmp_path / "site" / more[1]).is_file()
    listed = len(re.findall(r'class="cid status-', trie))
    assert listed + int(more[2]) >= MAX_LINKS_PER_NODE + 30

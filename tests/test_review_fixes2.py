"""What a second read of the storm work found (each failed before its fix)."""

from __future__ import annotations

import re

import pytest
from corpus import FIXTURE_TRACES
from markdown.extensions import toc
from test_speed_fasthtml import python_markdown

from tlsite.core import load
from tlsite.core.render import fast_markdown
from tlsite.core.render.pages import render_tree


def test_compile_pages_convert_with_the_two_argument_unique_of_older_markdown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Python-Markdown before 3.11.3 has ``unique(id, ids)``: a third argument crashed every
    build with a compile page there."""

    def unique(anchor: str, ids: set[str]) -> str:  # the older signature, same rule
        return toc.unique(anchor, ids)

    monkeypatch.setattr(fast_markdown, "unique", unique)
    body = "## Config\n\n<p>a</p>\n\n## Config\n\n<p>b</p>\n\n## Config"
    converted = fast_markdown.convert(body)
    assert converted is not None
    assert converted == python_markdown(body)
    assert re.findall(r'<h2 id="([^"]+)"', converted[0]) == ["config", "config_1", "config_2"]


@pytest.mark.parametrize("title", ["k\xa0", "\xa0k", "x\x85", "a\u3000"])
def test_headings_with_unicode_whitespace_at_an_edge_convert_as_python_markdown(
    title: str,
) -> None:
    body = f"# {title}\n\n<p>text</p>\n\n### {title} (3) {{ #artifact-3 }}"
    converted = fast_markdown.convert(body)
    assert converted is None or converted == python_markdown(body)


@pytest.mark.parametrize("version", ["2.6", "2.10", "2.15"])
def test_symbolic_records_heading_shows_no_markdown_escapes(version: str) -> None:
    """The symbol list's lead sentence is raw HTML now: Markdown escapes stayed visible."""
    trace = FIXTURE_TRACES / f"torch-{version}" / "export_draft.log"
    if not trace.is_file():
        pytest.skip(f"{trace} is not here")
    loaded = load(str(trace))
    try:
        pages = {page.path: page.markdown for page in render_tree(loaded).pages}
    finally:
        loaded.close()
    shown = [text for text in pages.values() if "Other symbolic records" in text]
    assert shown, "the trace has symbolic records on symbols created outside it"
    for text in shown:
        assert "Other symbolic records (on symbols created outside this trace" in text
        assert "records \\(" not in text


def _provenance_text(trace_name: str) -> dict[str, str]:
    trace = FIXTURE_TRACES / "provhit" / trace_name
    loaded = load(str(trace))
    try:
        return {
            page.path: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.markdown))
            for page in render_tree(loaded).pages
            if page.path.startswith("provenance_tracking_")
        }
    finally:
        loaded.close()


def test_a_cache_hits_provenance_page_does_not_claim_a_pre_grad_graph() -> None:
    """A compile that hit the FX graph cache logs no pre-grad graph: its page said how
    Inductor turned the pre-grad graph into the post-grad graph all the same."""
    pages = _provenance_text("provhit.log")
    without = [text for text in pages.values() if "Not logged for this compile" in text]
    with_pre = [text for text in pages.values() if "Not logged for this compile" not in text]
    assert without and with_pre
    for text in without:
        assert "turned the pre-grad graph" not in text
        assert "torch logged no pre-grad graph for this compile" in text
    for text in with_pre:
        assert "turned the pre-grad graph into the post-grad graph" in text


def test_a_page_whose_mapping_links_nothing_does_not_say_bold_lines_are_linked() -> None:
    pages = _provenance_text("provhit_off.log")
    assert pages
    for text in pages.values():
        assert "The node mapping is empty" in text
        assert "Bold lines are linked" not in text
        assert "No line is linked" in text

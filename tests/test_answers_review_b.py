"""Findings of the issue-16 browser review (part b): what a person sees on the report's pages.

Each test opens or reads a site built from a real trace (the shared torch 2.13 corpus or the
fixtures under tests/fixtures/traces) and checks what is shown, not how it is produced.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_answers_compile_time import training_trace

from tlsite.core.render.escape import md_reason

if TYPE_CHECKING:
    from browser import SiteOpener

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def fixture_trace(name: str) -> Path:
    return FIXTURES / name / f"{name}.log"


# -- torch's `backtick` code spans in reasons -------------------------------------------------
def test_reason_backticks_become_escaped_code() -> None:
    """A backtick pair is inline code; what is inside and around it stays text, never HTML."""
    shown = md_reason("Call to `<b>torch.f()</b>` in `x` and a lone ` tick <i>")
    assert "<code>&lt;b&gt;torch\\.f\\(\\)&lt;/b&gt;</code>" in shown
    assert "<code>x</code>" in shown
    assert "<b>" not in shown and "<i>" not in shown
    assert "\\` tick &lt;i&gt;" in shown


SHOWN_REASONS = """(selector) => [...document.querySelectorAll(selector)]
  .filter(e => e.innerText.includes('graph_break()'))
  .map(e => ({text: e.innerText, code: [...e.querySelectorAll('code')].map(c => c.innerText)}))"""


@pytest.mark.browser
@pytest.mark.slow
def test_graph_break_reasons_show_code_not_backticks(
    site_of: Callable[[Path], Path], open_site: SiteOpener
) -> None:
    """Training trace: 'Call to `torch._dynamo.graph_break()`' is shown with the name as code,
    without literal backticks, on the overview, the failures table and a compile id's page."""
    site = site_of(training_trace())
    for page_path, selector in (
        ("index.html", ".md-content li"),
        ("failures.html", ".md-content td"),
        ("graph_breaks.html", ".md-content td, .md-content h2"),
        ("-_1_0_0/index.html", ".admonition-title"),
    ):
        page, _ = open_site(site / page_path)
        shown = page.evaluate(SHOWN_REASONS, selector)
        assert shown, (page_path, "no graph-break reason shown")
        for item in shown:
            assert "`" not in item["text"], (page_path, item)
            assert "torch._dynamo.graph_break()" in item["code"], (page_path, item)
        page.close()


# -- a failure says what failed ----------------------------------------------------------------
FAILURE_LINES = """(selector) => [...document.querySelectorAll(selector)]
  .filter(e => e.innerText.includes('Failed to trace builtin operator'))
  .map(e => ({text: e.innerText, code: [...e.querySelectorAll('code')].map(c => c.innerText)}))"""


@pytest.mark.browser
@pytest.mark.slow
def test_failure_summary_names_what_failed(
    site_of: Callable[[Path], Path], open_site: SiteOpener
) -> None:
    """compile_error fixture: [6/0] failed on `print` (its explanation says "builtin operator
    `print`"); the overview's failure line and the failures table name it, as code."""
    site = site_of(fixture_trace("compile_error"))
    for page_path, selector in (("index.html", ".md-content li"), ("failures.html", "td")):
        page, _ = open_site(site / page_path)
        shown = page.evaluate(FAILURE_LINES, selector)
        assert shown, page_path
        for item in shown:
            assert "print" in item["code"], (page_path, item)
        page.close()


# -- long tokens on a phone --------------------------------------------------------------------
PATHS_SPLIT = """() => [...document.querySelectorAll('.stack-trie code')]
  .filter(c => c.offsetParent).flatMap(code => {
    // each line the location is drawn on must start right after a '/' (or be its first)
    const text = code.textContent, range = document.createRange(), breaks = [];
    let top = null;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let offset = 0;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getBoundingClientRect();
        if (top !== null && rect.top > top + 2) breaks.push(offset + i);
        top = rect.top;
      }
      offset += node.length;
    }
    return breaks.filter(i => !code.classList.contains('loc') && text[i - 1] !== '/')
      .map(i => text.slice(0, i) + ' | ' + text.slice(i));
  })"""


@pytest.mark.browser
@pytest.mark.slow
def test_trie_locations_break_only_at_slashes_on_a_phone(
    site_of: Callable[[Path], Path], open_site: SiteOpener
) -> None:
    """Training trace, 390 px: a frame's 'folder/file.py:NNN' wraps only after a '/', so
    'eval_frame.py:511' is never split into 'eval_frame.py:51' and '1'."""
    page, _ = open_site(site_of(training_trace()) / "index.html")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.locator(".stack-trie code").count() > 10
    assert page.evaluate(PATHS_SPLIT) == []
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")


WORDS_SPLIT = """() => [...document.querySelectorAll('.tlsite-fit td')].flatMap(td => {
  const range = document.createRange(), split = [];
  const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const m of node.data.matchAll(/[A-Za-z]{6,}/g)) {
      range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      if (range.getClientRects().length > 1) split.push(m[0]);
    }
  }
  return split;
})"""


@pytest.mark.browser
@pytest.mark.slow
def test_failures_table_keeps_words_whole_on_a_phone(
    site_of: Callable[[Path], Path], open_site: SiteOpener
) -> None:
    """compile_error fixture, 390 px: 'BackendCompilerFailed' and 'RuntimeError' are not split
    mid-word; the table scrolls in its own box and the page does not overflow."""
    page, _ = open_site(site_of(fixture_trace("compile_error")) / "failures.html")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.get_by_text("BackendCompilerFailed").count() > 0
    assert page.evaluate(WORDS_SPLIT) == []
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")


# -- status badges -----------------------------------------------------------------------------
BROKEN_BADGES = """() => [...document.querySelectorAll('.md-content .tlsite-badge')]
  .filter(b => b.getClientRects().length > 1).map(b => b.textContent)"""


@pytest.mark.browser
@pytest.mark.slow
def test_status_badges_stay_on_one_line(
    site_of: Callable[[Path], Path], open_site: SiteOpener
) -> None:
    """failures fixture, All compile ids, wide and at 390 px: no badge is split over lines
    ('Empty / graph'), and the page does not overflow."""
    page, _ = open_site(site_of(fixture_trace("failures")) / "compile_ids.html")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.locator(".md-content .tlsite-badge").count() > 5
        assert page.evaluate(BROKEN_BADGES) == [], width
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), width


# -- frames that resume one function at one line -----------------------------------------------
@pytest.mark.browser
@pytest.mark.slow
def test_two_resume_frames_at_one_line_read_differently(
    site_of: Callable[[Path], Path], open_site: SiteOpener
) -> None:
    """failures fixture: `print(len(globals()) > 0)` breaks twice on line 42, so frames 7 and 8
    both resume `one_line` at line 42; the navigation and page titles tell them apart."""
    site = site_of(fixture_trace("failures"))
    page, _ = open_site(site / "index.html")
    shown = page.evaluate(
        """() => [...document.querySelectorAll('.md-nav__link')].map(a => a.innerText.trim())
             .filter(t => /^Frame \\d+: /.test(t))"""
    )
    labels = sorted({t.split(": ", 1)[1] for t in shown})
    resumes = [t for t in labels if t.startswith("one_line (")]
    assert len(resumes) == 2, shown
    assert len({t.split(": ", 1)[1] for t in shown}) == len(set(shown)), shown
    page.goto((site / "frames" / "frame_8.html").as_uri())
    assert "2nd resume at line" in page.locator("h1").inner_text()


# -- a recompile pattern with a tie ------------------------------------------------------------
def test_recompile_pattern_says_ties_and_values() -> None:
    """recompiles fixture: frame `f` recompiled on `mode == 'relu'`, then 'gelu' (2×), on the
    dtype twice (2×, a tie) and on a size once; the overview says all three with their counts,
    and which values the masked `mode == …` guard had."""
    from test_answers_overview import problems

    log = fixture_trace("recompiles")
    raw = log.read_text(encoding="utf-8")
    assert "mode == 'relu'" in raw and "mode == 'gelu'" in raw  # what the trace says
    (line,) = [p for p in problems(log) if p.startswith("Recompiled")]
    assert "most often" not in line, line  # a tie has no single "most often"
    assert "mode == … 2× ('relu' → 'gelu')" in line, line
    assert "tensor 'x' dtype mismatch. expected …, actual … 2×" in line, line
    assert "tensor 'x' size mismatch at index 0. expected …, actual … 1×" in line, line


# -- compiled autograd's compile time ---------------------------------------------------------
def test_compiled_autograd_time_is_not_called_forward() -> None:
    """units fixture: [!0/1/0] compiles compiled autograd's graph (the backward pass), timed by
    one whole-frame `compilation_metrics` record. Its row keeps that total but says what it is,
    and neither the table nor the chart calls it forward time."""
    from test_answers_compile_time import pages_of, raw_metrics, text_tables

    log = fixture_trace("units")
    # the envelope's own figures (raw_metrics keys leave out the compiled-autograd id)
    seconds = raw_metrics(log)[("compilation_metrics", "[1/0]")]
    markdown = pages_of(log)["compile_time.md"]
    table = next(t for t in text_tables(markdown) if t[0][0] == "Compile id")
    header = table[0]
    (row,) = [r for r in table if r[0] == "[!0/1/0]"]
    assert "compiled autograd" in row[header.index("Function")], row
    assert row[header.index("Forward (s)")] == "—" and row[header.index("Backward (s)")] == "—"
    assert "(forward)" not in row[header.index("Largest self time")], row
    total = float(row[header.index("Total (s)")])
    assert abs(total - seconds["entire_frame_compile_time_s"]) < 0.002, (row, seconds)
    chart = markdown.split('<figure class="tlsite-chart">', 1)[1].split("</figure>", 1)[0]
    bar = chart.split("[!0/1/0]</a>", 1)[1].split("</li>", 1)[0]
    assert "chart-forward" not in bar and "compiled autograd" in bar, bar


# -- tlparse-compatible pages on a phone -------------------------------------------------------
@pytest.mark.browser
@pytest.mark.slow
def test_compat_pages_fit_a_phone(site_of: Callable[[Path], Path], open_site: SiteOpener) -> None:
    """training trace's inductor_output_code_*.html (a long hashed title and payload link) and
    the export_draft fixture's symbolic_guard_information_*.html do not scroll sideways at
    390 px; their code blocks scroll inside themselves."""
    found = sorted(site_of(training_trace()).glob("*/inductor_output_code_*.html"))
    found += sorted(
        site_of(fixture_trace("export_draft")).glob("*/symbolic_guard_information_*.html")
    )
    assert len(found) >= 2
    for path in found[:3] + found[-2:]:
        page, _ = open_site(path)
        page.set_viewport_size({"width": 390, "height": 844})
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, (path.name, width)
        page.close()

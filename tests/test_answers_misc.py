"""Issue #16, points 13, 14, 18 and 19: symbolic shapes per symbol, provenance pages, the
draft-export overview, the 404 page and two-column tables, checked on real traces."""

from __future__ import annotations

import html
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from corpus import FIXTURE_TRACES, TLPARSE_INPUTS, TORCH_213

DYNAMIC = FIXTURE_TRACES / "dynamic_shapes" / "dynamic_shapes.log"
EXPORT_DRAFT = FIXTURE_TRACES / "export_draft" / "export_draft.log"


def text_of(fragment: str) -> str:
    fragment = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", fragment)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def inline_text(fragment: str) -> str:
    """The text of inline HTML, as read: tags dropped without adding spaces."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def section(page_html: str, heading_text: str) -> str:
    """From the h2 whose text contains ``heading_text`` to the next h2."""
    for match in re.finditer(r"(?s)<h2\b.*?</h2>", page_html):
        if heading_text in text_of(match.group(0)):
            end = page_html.find("<h2", match.end())
            return page_html[match.start() : end if end >= 0 else len(page_html)]
    raise AssertionError(f"no section {heading_text!r}")


# -- 13. symbolic shapes ------------------------------------------------------------------------
def symbol_entries(fragment: str) -> dict[str, tuple[str, list[str]]]:
    """The page's symbol list: name → (its line, the lines listed under it)."""
    entries: dict[str, tuple[str, list[str]]] = {}
    for item in re.findall(r"(?s)<li>(<code>.*?)(?=<li><code>|</ul>\s*$|</ul>\s*<)", fragment):
        head, _, rest = item.partition("<ul>")
        under = [inline_text(li) for li in re.findall(r"(?s)<li>(.*?)</li>", rest)]
        text = inline_text(head)
        entries[text.split(" ", 1)[0]] = (text, under)
    return entries


def test_symbolic_shapes_one_entry_per_symbol_with_source_range_and_user_line(
    site_of: Any,
) -> None:
    """dynamic_shapes.log: compile 0/0 creates s77 = L['x'].size()[0] (value 4, range
    [2, int_oo]) at dynamic_shapes.py:19 and guards s77 > 2 at line 21; s27 is specialized."""
    page = (site_of(DYNAMIC) / "symbolic_shapes.html").read_text(encoding="utf-8")
    first = symbol_entries(section(page, "[0/0]"))
    assert sorted(first) == ["s27", "s77"]  # one entry per symbol, not one per record
    line, under = first["s77"]
    assert line.startswith(
        "s77 = L['x'].size()[0], value 4, range [2, int_oo], created at dynamic_shapes.py:19:"
        " if x.shape[1] == 8:"
    )
    assert under == [
        "guard s77 > 2 at dynamic_shapes.py:21: if x.shape[0] > 2: # guard s0 > 2 (stays symbolic)"
    ]
    assert any(
        u.startswith("specialization s27 = 8 (range_refined_to_singleton)") for u in first["s27"][1]
    )
    # symbols belong to one compile: 1/0 has its own s77, created at line 30 with value 5
    later = symbol_entries(section(page, "[1/0]"))
    assert "value 5" in later["s77"][0] and "dynamic_shapes.py:30" in later["s77"][0]
    assert later["u0"][0].startswith("u0 (unbacked), range [-int_oo, int_oo]")
    # torch logs `user_stack: []` on these guards: the user's frame of `stack` says where
    assert (
        "guard u0 >= 1 at dynamic_shapes.py:38: take_positive(a, torch.tensor(2))" in later["u0"][1]
    )


def test_export_guard_names_its_symbol_source(site_of: Any) -> None:
    """tlparse's export.log: s0 is never created in the trace, but its guards say its source."""
    page = (site_of(TLPARSE_INPUTS / "export.log") / "symbolic_shapes.html").read_text("utf-8")
    line, under = symbol_entries(page)["s0"]
    assert line == "s0 = L['args'][0][1].size()[0] (its creation is not in this trace)"
    # no user stack: the user's frame of the Python stack, with the line of code torch logged
    assert (
        "guard (((-u0)//3)) + 5 < 2*s0 at test_draft_export.py:277: torch._check(a < z.shape[0])"
        in under
    )


# -- 14. provenance -----------------------------------------------------------------------------
def provenance_trace() -> Path:
    """torch 2.13's provenance run (tests/fixtures/README.md): a training compile [0/1] with a
    forward mapping and an empty backward one (``{"version": 2.0}``) though its code has
    kernels."""
    logs = sorted((TORCH_213 / "provenance").glob("*.log"))
    assert logs, "corpus trace missing: torch-2.13/provenance"
    return logs[0]


def test_backward_provenance_page_does_not_deny_its_kernels(site_of: Any) -> None:
    page = (site_of(provenance_trace()) / "provenance_tracking_-_0_1_0.html").read_text("utf-8")
    match = re.search(r"(?s)<article\b.*?</article>", page)
    assert match is not None
    intro = text_of(match.group(0).split('class="tlsite-prov-wrap"')[0])
    assert "no kernels" not in intro
    code = text_of(page.split('id="generatedCode"')[1])
    kernels = re.findall(r"(cpp_fused_\w+) = async_compile", code)
    assert len(kernels) == 3
    assert "defines 3 kernels" in intro and all(k in intro for k in kernels)
    # the introduction names the backward graph, and does not claim it came from the pre-grad one
    assert "backward graph" in intro
    assert "turned the pre-grad graph into the post-grad graph" not in intro
    forward = (site_of(provenance_trace()) / "provenance_tracking_-_0_1_0.1.html").read_text(
        "utf-8"
    )
    assert "forward graph: how Inductor turned the pre-grad graph" in text_of(forward)


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize(("width", "stacked"), [(390, True), (1280, False)])
def test_provenance_panes_stack_on_a_phone(
    site_of: Any, open_site: Any, width: int, stacked: bool
) -> None:
    page, report = open_site(site_of(provenance_trace()) / "provenance_tracking_-_0_1_0.1.html")
    page.set_viewport_size({"width": width, "height": 844})
    boxes = [
        page.locator(f"#{pane}").bounding_box()
        for pane in ("preGradGraph", "postGradGraph", "generatedCode")
    ]
    assert all(box is not None for box in boxes)
    if stacked:  # one above the other, each the width of the content and a readable height
        for upper, lower in itertools.pairwise(boxes):
            assert lower["y"] >= upper["y"] + upper["height"] - 1
            assert lower["width"] == pytest.approx(upper["width"], abs=1)
        assert all(box["width"] > 0.8 * width and box["height"] > 300 for box in boxes)
        assert not page.locator(".tlsite-prov-divider").first.is_visible()
    else:  # side by side
        assert boxes[1]["x"] > boxes[0]["x"] + boxes[0]["width"] - 1
        assert boxes[0]["y"] == pytest.approx(boxes[1]["y"], abs=1)
    assert report.console_errors == []


# -- 18. the draft-export overview --------------------------------------------------------------
def glance_rows(page_html: str) -> dict[str, str]:
    """The overview's "At a glance" facts: label → value."""
    part = section(page_html, "At a glance")
    return {
        text_of(label): text_of(value)
        for label, value in re.findall(r'(?s)<th scope="row">(.*?)</th>\s*<td>(.*?)</td>', part)
    }


def test_draft_export_overview_is_titled_and_summarised_as_an_export(site_of: Any) -> None:
    site = site_of(EXPORT_DRAFT)
    page = (site / "index.html").read_text(encoding="utf-8")
    h1 = re.search(r"(?s)<h1\b[^>]*>(.*?)</h1>", page)
    assert h1 is not None
    assert text_of(h1.group(1)).startswith("Draft-export report: export_draft.log")
    facts = glance_rows(page)
    assert facts["Draft export"] == "3 issues found"  # torch's own report says 3
    assert facts["Issues by kind"] == (
        "1 × Data Dependent Error, 1 × Missing Fake Kernel, 1 × Mismatched Fake Kernel"
    )
    assert facts["Exported program"] == "logged"
    # nothing of torch.compile's, which compiled nothing here: no table of zeros
    for label in ("Frames compiled", "Compile ids", "Graph breaks", "Total compile time"):
        assert label not in facts
    # an ordinary trace keeps its torch.compile title and summary
    other = (site_of(DYNAMIC) / "index.html").read_text(encoding="utf-8")
    assert "torch.compile report: dynamic_shapes.log" in text_of(other)
    assert glance_rows(other)["Compile ids"] == "2"


# -- 19. two-column tables and the 404 page ------------------------------------------------------
@pytest.mark.parametrize("trace", [DYNAMIC, EXPORT_DRAFT], ids=lambda p: p.stem)
def test_no_table_has_an_empty_header_row(site_of: Any, trace: Path) -> None:
    """Label/value tables (overview, compile-id summary, export issues) label their rows."""
    site = site_of(trace)
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 5
    labelled = 0
    for path in pages:
        page = path.read_text(encoding="utf-8")
        for head in re.findall(r"(?s)<thead>(.*?)</thead>", page):
            assert text_of(head), f"{path.relative_to(site)}: a table with an empty header row"
        labelled += page.count('<th scope="row">')
    assert labelled > 10


def _loaded_stylesheets(page: Any) -> list[str]:
    return page.evaluate(
        "[...document.styleSheets].filter(s => { try { return s.cssRules.length > 0 }"
        " catch (e) { return true } }).map(s => s.href || '')"
    )


@pytest.mark.browser
def test_404_page_works_from_disk(site_of: Any, open_site: Any) -> None:
    site = site_of(DYNAMIC)
    page, report = open_site(site / "404.html")
    sheets = _loaded_stylesheets(page)
    assert any(s.endswith("/assets/tlsite/tlsite.css") for s in sheets), sheets
    assert any("/assets/stylesheets/main." in s for s in sheets), sheets
    assert report.console_errors == [] and report.outside_requests == []
    page.get_by_role("link", name="Go to the report's overview").click()
    page.wait_for_load_state()
    assert page.url == (site / "index.html").resolve().as_uri()


@pytest.mark.browser
def test_404_page_works_under_a_sub_path(site_of: Any, browser: Any, tmp_path: Path) -> None:
    """Served as http://host/reports/404.html (a GitHub Pages project site, a folder of a
    web server): its styles, scripts and links stay under /reports/."""
    import shutil
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    shutil.copytree(site_of(DYNAMIC), tmp_path / "reports")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    context = browser.new_context(service_workers="block")
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/reports/"
        page = context.new_page()
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.goto(base + "404.html", wait_until="load")
        sheets = _loaded_stylesheets(page)
        assert base + "assets/tlsite/tlsite.css" in sheets
        assert failed == []
        page.get_by_role("link", name="Go to the report's overview").click()
        page.wait_for_load_state()
        assert page.url == base + "index.html"
    finally:
        context.close()
        server.shutdown()
        server.server_close()

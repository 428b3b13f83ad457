"""The provenance pages and the readable kernel stack traces of a built site (issue #4).

Sites are built once per trace per test session with ``tlsite.cli.build``. Expected lines come
from the line maps tlsite computes for the same unit (``provenances``), never from the page
itself, and the browser tests check them against the text: a highlighted line names the node
(or kernel) the node-mapping artifact says it should.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from browser import SiteOpener
from corpus import TORCH_213, tlparse_input, trace_lines
from test_provenance import EXPECTED, INPUTS

from tlsite.cli import build, main
from tlsite.core import Trace, load
from tlsite.core.analysis.provenance import MAP_NAMES, Provenance, node_name, provenances
from tlsite.core.render.extra_pages import mappings_json
from tlsite.core.render.pages import render_tree

TORCH_213_PROVENANCE = sorted((TORCH_213 / "provenance").glob("*.log"))
AOT_DEBUG_HANDLE = "inductor_provenance_aot_debug_handle_log.txt"
EXTENDED = "inductor_provenance_extended_log.txt"
LINE_MAPPINGS = re.compile(
    r'<script id="lineMappings" type="application/json">(.*?)</script>', re.S
)
PANE_TEXT = re.compile(
    r'(?s)<section class="tlsite-prov-pane" id="(\w+)".*?<pre class="tlsite-prov-src">\n(.*?)</pre>'
)
HOSTILE = '<img src=x onerror="alert(1)"></pre><script>alert(2)</script>'


# -- building ------------------------------------------------------------------------------------


def torch_213_log() -> Path:
    if not TORCH_213_PROVENANCE:
        pytest.fail(f"corpus file missing: {TORCH_213 / 'provenance'}/*.log")
    return TORCH_213_PROVENANCE[0]


@pytest.fixture(scope="module")
def torch_213() -> Trace:
    return load(torch_213_log())


@pytest.fixture(scope="module")
def torch_213_site(site_of: Any) -> Path:
    return site_of(torch_213_log())


def page_mappings(page: Path) -> dict[str, Any]:
    match = LINE_MAPPINGS.search(page.read_text(encoding="utf-8"))
    assert match is not None, f"{page.name} has no lineMappings script"
    return json.loads(match.group(1))


def text_of(page_html: str) -> str:
    """Visible text of a page's article, tags removed (newlines kept)."""
    article = re.search(r"(?s)<article\b.*?</article>", page_html)
    assert article is not None
    body = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", article.group(0))
    return html.unescape(re.sub(r"<[^>]+>", "", body))


# -- the pages -----------------------------------------------------------------------------------
def test_each_node_mapping_of_a_torch_213_compile_gets_a_page_with_its_line_maps(
    torch_213: Trace, torch_213_site: Path
) -> None:
    expected = {
        "provenance_tracking_-_0_0_0.html": ("[0/0]", 0),
        "provenance_tracking_-_0_1_0.1.html": ("[0/1]", 0),  # forward
        "provenance_tracking_-_0_1_0.html": ("[0/1]", 1),  # backward: the one tlparse shows
    }
    found = sorted(p.name for p in torch_213_site.glob("provenance_tracking_*.html"))
    assert found == sorted(expected)
    for name, (display, index) in expected.items():
        view = provenances(torch_213, torch_213.unit(display), any_folder=True)[index]
        mappings = page_mappings(torch_213_site / name)
        assert set(mappings) == set(MAP_NAMES)
        assert mappings == view.mappings, name
    forward = (torch_213_site / "provenance_tracking_-_0_1_0.1.html").read_text(encoding="utf-8")
    backward = (torch_213_site / "provenance_tracking_-_0_1_0.html").read_text(encoding="utf-8")
    assert "Provenance [0/1] forward" in forward and "Provenance [0/1] backward" in backward
    assert "This node mapping links no lines" in backward  # torch logs {"version": 2.0}
    assert 'href="provenance_tracking_-_0_1_0.html"' in forward  # the views link each other


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_page_at_tlparses_path_carries_tlparses_line_maps(name: str, site_of: Any) -> None:
    """tlparse tests 10-16 (old and new artifact names, JIT and AOT, debug handles)."""
    display, *_ = INPUTS[name]
    dirname = "-_-_-_-" if display == "[-/-]" else "-_0_0_0"
    page = site_of(tlparse_input(name)) / f"provenance_tracking_{dirname}.html"
    assert page_mappings(page) == json.loads(EXPECTED[name])
    text = page.read_text(encoding="utf-8")
    code_lang = "cpp" if "_aot_" in name else "python"
    assert f'data-code-lang="{code_lang}"' in text
    for pane in ("preGradGraph", "postGradGraph", "generatedCode"):
        assert f'id="{pane}"' in text


def test_provenance_is_linked_from_the_compile_id_page_the_nav_and_the_index(
    torch_213_site: Path,
) -> None:
    unit_page = (torch_213_site / "-_0_1_0" / "index.html").read_text(encoding="utf-8")
    assert 'href="../provenance_tracking_-_0_1_0.1.html"' in unit_page
    assert 'href="../provenance_tracking_-_0_1_0.html"' in unit_page
    assert 'href="kernel_stack_traces.html"' in unit_page
    overview = (torch_213_site / "index.html").read_text(encoding="utf-8")
    nav = overview[overview.index("md-nav--primary") : overview.index("<article")]
    assert re.search(r">\s*Provenance\s*<", nav)  # the section's label
    assert 'href="provenance.html"' in nav and 'href="provenance_tracking_-_0_0_0.html"' in nav
    index = (torch_213_site / "provenance.html").read_text(encoding="utf-8")
    for target in (
        "provenance_tracking_-_0_0_0.html",
        "provenance_tracking_-_0_1_0.1.html",
        "-_0_0_0/kernel_stack_traces.html",
    ):
        assert f'href="{target}"' in index


def test_panes_hold_the_texts_exactly_as_the_maps_number_them(
    torch_213: Trace, torch_213_site: Path
) -> None:
    view = provenances(torch_213, torch_213.unit("[0/0]"), any_folder=True)[0]
    page = (torch_213_site / "provenance_tracking_-_0_0_0.html").read_text(encoding="utf-8")
    panes = {pane: html.unescape(text) for pane, text in PANE_TEXT.findall(page)}
    assert panes["preGradGraph"] == view.pre_text.rstrip("\n")
    assert panes["postGradGraph"] == view.post_text.rstrip("\n")
    code = panes["generatedCode"].split("\n")
    assert code[0].startswith("# AOT ID:")  # Python lines are numbered from here
    for line in view.mappings["pyCodeToPost"]:
        assert "(" in code[int(line) - 1]  # a launch or an extern call


def test_line_maps_json_cannot_close_its_script() -> None:
    text = str(mappings_json({"preToPost": {"1": [2]}, "odd": "</script><b>&"}))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text)["odd"] == "</script><b>&"


# -- kernel stack traces (tlparse test 18) -------------------------------------------------------
def test_kernel_stack_traces_page_has_real_newlines_and_kernel_headings(site_of: Any) -> None:
    site = site_of(tlparse_input(EXTENDED))
    page = (site / "-_-_-_-" / "kernel_stack_traces.html").read_text(encoding="utf-8")
    text = text_of(page)
    assert "line 1\n  foo()" in text
    assert "\\n" not in text
    headings = [
        html.unescape(re.sub(r"<[^>]+>", "", h))
        for h in re.findall(r"(?s)<h2\b[^>]*>(.*?)</h2>", page)
    ]
    kernels = [h.rstrip("¶").strip() for h in headings]
    assert kernels == sorted(kernels) and "triton_kernel" in kernels
    unit_page = (site / "-_-_-_-" / "index.html").read_text(encoding="utf-8")
    assert 'href="kernel_stack_traces.html"' in unit_page
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    titles = {
        html.unescape(re.sub(r"<[^>]+>", "", doc["title"]))
        for doc in index["docs"]
        if doc["location"].startswith("-_-_-_-/kernel_stack_traces.html#")
    }
    assert set(kernels) <= titles  # each kernel is a search hit of its own


def test_torch_213_kernel_pages_merge_forward_and_backward(torch_213_site: Path) -> None:
    page = (torch_213_site / "-_0_1_0" / "kernel_stack_traces.html").read_text(encoding="utf-8")
    text = text_of(page)
    assert "examples/provenance.py" in text
    assert 'href="../provenance_tracking_-_0_1_0.1.html"' in page


# -- hostile traces ------------------------------------------------------------------------------
def hostile_provenance_trace(tmp_path: Path) -> Path:
    ids = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    mapping = {
        "preToPost": {"x": ["y"]},
        "postToPre": {"y": ["x"]},
        "cppCodeToPost": {"triton_k_0": ["y"]},
        "postToCppCode": {"y": ["triton_k_0"]},
    }
    text = trace_lines({"dynamo_start": {"stack": []}, **ids})
    for name, payload in (
        ("before_pre_grad_graph", f"x = f(a)  # {HOSTILE}"),
        ("after_post_grad_graph", f"\ny = g(a)  # {HOSTILE}"),
    ):
        text += trace_lines({"artifact": {"name": name, "encoding": "string"}, **ids}, payload)
    code = f"# AOT ID: ['0_inference']\n# {HOSTILE}\ndef call(args):\n    triton_k_0.run(buf0)\n"
    text += trace_lines({"inductor_output_code": {"filename": "/tmp/x.py"}, **ids}, code)
    text += trace_lines(
        {
            "artifact": {"name": "inductor_provenance_tracking_node_mappings", "encoding": "json"},
            **ids,
        },
        json.dumps(mapping),
    )
    log = tmp_path / "hostile.log"
    log.write_text(text, encoding="utf-8")
    return log


def test_trace_text_is_escaped_in_the_panes(tmp_path: Path, open_site: SiteOpener) -> None:
    log = hostile_provenance_trace(tmp_path)
    site = tmp_path / "site"
    build(str(log), site, make_zip=False)
    page_path = site / "provenance_tracking_-_0_0_0.html"
    page_html = page_path.read_text(encoding="utf-8")
    assert "<img src=x" not in page_html and "<script>alert" not in page_html
    # the post-grad graph starts with an empty line: it must survive (the maps count it)
    assert page_mappings(page_path)["preToPost"] == {"1": [2]}
    page, report = open_site(page_path)
    page.wait_for_selector("#postGradGraph .tlsite-prov-line")
    post = page.locator("#postGradGraph .tlsite-prov-text")
    assert post.nth(0).text_content() == ""
    assert HOSTILE in (post.nth(1).text_content() or "")
    page.hover('#preGradGraph .tlsite-prov-line[data-line="1"] .tlsite-prov-ln')
    assert highlighted(page) == {
        "preGradGraph": {1},
        "postGradGraph": {2},
        "generatedCode": {4},
    }
    assert report.dialogs == [] and report.console_errors == []
    assert report.outside_requests == []


# -- in the browser ------------------------------------------------------------------------------
def highlighted(page: Any) -> dict[str, set[int]]:
    """Pane id → highlighted line numbers (the hovered line and its counterparts)."""
    rows = page.evaluate(
        """() => Array.from(document.querySelectorAll('.tlsite-prov-hl, .tlsite-prov-active'))
            .map(r => [r.closest('section').id, Number(r.dataset.line)])"""
    )
    found: dict[str, set[int]] = {}
    for pane, line in rows:
        found.setdefault(pane, set()).add(line)
    return found


def row_text(page: Any, pane: str, line: int) -> str:
    selector = f'#{pane} .tlsite-prov-line[data-line="{line}"] .tlsite-prov-text'
    return page.locator(selector).text_content() or ""


def node_mapping(trace: Trace, view: Provenance) -> dict[str, Any]:
    assert view.inputs.node_mappings is not None and view.inputs.node_mappings.payload
    return json.loads(trace.read_payload(view.inputs.node_mappings.payload))


def wait_until_visible(page: Any, pane: str, line: int) -> None:
    """The pane scrolls smoothly: wait until the row is inside the pane's visible area."""
    page.wait_for_function(
        """([pane, line]) => {
            const body = document.querySelector('#' + pane + ' .tlsite-prov-body');
            const row = body.querySelector('.tlsite-prov-line[data-line="' + line + '"]');
            const b = body.getBoundingClientRect(), r = row.getBoundingClientRect();
            return r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
        }""",
        arg=[pane, line],
        timeout=5000,
    )


def test_hovering_a_post_grad_line_highlights_its_pre_grad_and_code_lines(
    torch_213: Trace, torch_213_site: Path, open_site: SiteOpener
) -> None:
    view = provenances(torch_213, torch_213.unit("[0/0]"), any_folder=True)[0]
    maps = view.mappings
    both = sorted(set(maps["postToPre"]) & set(maps["postToPyCode"]), key=int)
    assert both, "the torch 2.13 trace should link post-grad lines to both sides"
    post_line = both[len(both) // 2]
    pre_lines = set(maps["postToPre"][post_line])
    code_lines = set(maps["postToPyCode"][post_line])

    page, report = open_site(torch_213_site / "provenance_tracking_-_0_0_0.html")
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.wait_for_selector("#postGradGraph .tlsite-prov-line")
    page.hover(f'#postGradGraph .tlsite-prov-line[data-line="{post_line}"] .tlsite-prov-ln')
    assert highlighted(page) == {
        "postGradGraph": {int(post_line)},
        "preGradGraph": pre_lines,
        "generatedCode": code_lines,
    }
    # the highlighted lines say the same as the node-mapping artifact
    nodes = node_mapping(torch_213, view)
    post_node = node_name(row_text(page, "postGradGraph", int(post_line)))
    assert post_node is not None
    pre_nodes = {node_name(row_text(page, "preGradGraph", n)) for n in pre_lines}
    assert pre_nodes <= set(nodes["postToPre"][post_node]), (post_node, pre_nodes)
    kernels = {k.split(":", 1)[0] for k in nodes["postToCppCode"][post_node]}
    for n in code_lines:
        assert any(k in row_text(page, "generatedCode", n) for k in kernels), n
    # the other panes scroll to their counterparts; the mapped lines are bold
    wait_until_visible(page, "generatedCode", sorted(code_lines)[(len(code_lines) - 1) // 2])
    wait_until_visible(page, "preGradGraph", sorted(pre_lines)[(len(pre_lines) - 1) // 2])
    bold = page.locator("#preGradGraph .tlsite-prov-line.has-match").count()
    assert bold == len(maps["preToPost"])
    # leaving the panes clears the highlight
    page.hover("h1")
    assert highlighted(page) == {}
    assert report.outside_requests == []
    assert report.console_errors == []


def test_hovering_a_code_line_and_clicking_to_pin_it(
    torch_213: Trace, torch_213_site: Path, open_site: SiteOpener
) -> None:
    maps = provenances(torch_213, torch_213.unit("[0/0]"), any_folder=True)[0].mappings
    code_line = min(maps["pyCodeToPost"], key=int)
    post_lines = set(maps["pyCodeToPost"][code_line])
    pre_lines = {p for q in post_lines for p in maps["postToPre"].get(str(q), [])}
    page, report = open_site(torch_213_site / "provenance_tracking_-_0_0_0.html")
    page.set_viewport_size({"width": 1600, "height": 1000})
    selector = f'#generatedCode .tlsite-prov-line[data-line="{code_line}"] .tlsite-prov-ln'
    page.click(selector)
    expected = {"generatedCode": {int(code_line)}, "postGradGraph": post_lines}
    if pre_lines:
        expected["preGradGraph"] = pre_lines
    assert highlighted(page) == expected
    page.hover("h1")
    assert highlighted(page) == expected  # pinned by the click
    assert page.text_content(".tlsite-prov-status").startswith(f"Generated code line {code_line}")
    page.keyboard.press("Escape")
    assert highlighted(page) == {}
    assert report.console_errors == [] and report.outside_requests == []


def test_dividers_resize_the_panes(torch_213_site: Path, open_site: SiteOpener) -> None:
    page, report = open_site(torch_213_site / "provenance_tracking_-_0_0_0.html")
    page.set_viewport_size({"width": 1600, "height": 1000})
    pre = page.locator("#preGradGraph")
    post = page.locator("#postGradGraph")
    before = (pre.bounding_box(), post.bounding_box())
    divider = page.locator(".tlsite-prov-divider").first
    box = divider.bounding_box()
    assert box is not None and before[0] is not None and before[1] is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 150, y, steps=5)
    page.mouse.up()
    after = (pre.bounding_box(), post.bounding_box())
    assert after[0] is not None and after[1] is not None
    assert after[0]["width"] == pytest.approx(before[0]["width"] + 150, abs=4)
    assert after[1]["width"] == pytest.approx(before[1]["width"] - 150, abs=4)
    divider.focus()
    page.keyboard.press("ArrowLeft")
    assert pre.bounding_box()["width"] < after[0]["width"]  # type: ignore[index]
    assert report.console_errors == []


def test_aot_page_starts_at_run_impl_and_follows_debug_handles(
    site_of: Any, open_site: SiteOpener
) -> None:
    maps = json.loads(EXPECTED[AOT_DEBUG_HANDLE])
    site = site_of(tlparse_input(AOT_DEBUG_HANDLE))
    # default viewport: Material's rem grows with the width, so a resize would move the rows
    page, report = open_site(site / "provenance_tracking_-_-_-_-.html")
    page.wait_for_selector("#generatedCode .tlsite-prov-line")
    top_row = page.evaluate(
        """() => {
            const body = document.querySelector('#generatedCode .tlsite-prov-body');
            const top = body.getBoundingClientRect().top;
            const rows = Array.from(body.querySelectorAll('.tlsite-prov-line'));
            return rows.find(r => r.getBoundingClientRect().bottom > top + 2).textContent;
        }"""
    )
    assert "AOTInductorModel::run_impl(" in top_row
    # debug handle "triton_poi_fused_addmm_relu_sigmoid_0:1" points at its one launch, 1079
    assert "[Provenance debug handles]" in row_text(page, "generatedCode", 1078)
    page.hover('#generatedCode .tlsite-prov-line[data-line="1079"] .tlsite-prov-ln')
    post = set(maps["cppCodeToPost"]["1079"])
    pre = {p for q in post for p in maps["postToPre"].get(str(q), [])}
    assert highlighted(page) == {
        "generatedCode": {1079},
        "postGradGraph": post,
        "preGradGraph": pre,
    }
    assert report.console_errors == [] and report.outside_requests == []


# -- tlparse's flag ------------------------------------------------------------------------------
def test_cli_accepts_tlparses_provenance_flag(tmp_path: Path) -> None:
    out = tmp_path / "site"
    args = ["build", str(tlparse_input("inductor_provenance_jit_log.txt")), "-i", "-o", str(out)]
    assert main([*args, "--no-zip", "--no-browser", "--quiet"]) == 0
    assert (out / "provenance_tracking_-_0_0_0.html").is_file()


def test_pages_under_a_prefix_find_the_theme_assets_at_the_site_root() -> None:
    """Embedded in another site (``prefix``), the page's own script and CSS paths go up."""
    trace = load(tlparse_input("inductor_provenance_jit_log.txt"))
    tree = render_tree(trace, prefix="report/")
    page = next(p for p in tree.pages if p.path == "provenance_tracking_-_0_0_0.md")
    assert '<script src="../assets/tlsite/provenance.js">' in page.markdown
    assert 'href="../assets/tlsite/provenance.css"' in page.markdown
    section = next(entry["Provenance"] for entry in tree.nav if "Provenance" in entry)
    assert {"[0/0]": "report/provenance_tracking_-_0_0_0.md"} in section

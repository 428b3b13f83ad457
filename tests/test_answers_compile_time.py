""" "Which phase is slow?" answered from self times, and a compile-time chart a person can read.

torch's compile timers nest (whole frame ⊃ backend/AOTAutograd ⊃ Inductor ⊃ code generation ⊃
kernel compilation), and a backward compile is timed in its own ``bwd_compilation_metrics``
record. The expected figures here are read straight from the trace's raw metrics lines, not
from tlsite's analysis.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from corpus import TORCH_213, TRAINING_TRACE_GLOB, tlparse_input, trace_lines
from test_site import site_cache

from tlsite.core import load
from tlsite.core.render.page import insert_parts
from tlsite.core.render.pages import render_tree

if TYPE_CHECKING:
    from browser import SiteOpener
    from playwright.sync_api import Page

ENVELOPE = re.compile(r"^[IWEV]\d{4} [\d:.]+ +\d+ [^\]]+\] (\{.*\})\s*$")
NUMBER = re.compile(r"^-?\d+\.\d+$")
MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>~])")


def training_trace() -> Path:
    found = sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))
    if not found:
        pytest.fail(f"no training trace in {TORCH_213}")
    return found[0]


def raw_metrics(log: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``(record type, compile id) → metrics`` read from the log's envelope lines."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        match = ENVELOPE.match(line)
        if not match or "compilation_metrics" not in line:
            continue
        envelope = json.loads(match.group(1))
        cid = f"[{envelope['frame_id']}/{envelope['frame_compile_id']}"
        cid += f"_{envelope['attempt']}]" if envelope.get("attempt") else "]"
        for kind in ("compilation_metrics", "bwd_compilation_metrics"):
            if kind in envelope:
                found[(kind, cid)] = envelope[kind]
    return found


def pages_of(log: Path) -> dict[str, str]:
    """The report's Markdown pages by path, with the parts of their text that are HTML put in
    (a compile page's summary, timers, stack) and Markdown's backslash escapes removed."""
    return {
        page.path: MD_ESCAPE.sub(r"\1", insert_parts(page.markdown, page.blocks))
        for page in render_tree(load(log)).pages
    }


def html_tables(text: str) -> list[list[list[str]]]:
    """Every HTML table of a page as rows of raw cell text (header row first)."""
    return [
        [
            re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)
            for row in re.findall(r"(?s)<tr>(.*?)</tr>", t)
        ]
        for t in re.findall(r"(?s)<table>(.*?)</table>", text)
    ]


def text_tables(text: str) -> list[list[list[str]]]:
    """Every HTML table of a page as rows of the text a reader sees in each cell."""
    return [
        [[html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in row] for row in table]
        for table in html_tables(text)
    ]


def phase_table(markdown: str, direction: str) -> list[tuple[int, str, float, str]]:
    """``(depth, label, total, self text)`` rows of a unit page's forward/backward table (HTML,
    in the page's Markdown)."""
    for table in html_tables(markdown):
        if table[0][0] == f"{direction.capitalize()} phase":
            rows = []
            for label, total, own in table[1:]:
                depth = label.count("&emsp;")
                rows.append((depth, label.replace("&emsp;", ""), float(total), own))
            return rows
    raise AssertionError(f"no {direction} phase table")


def check_tree(rows: list[tuple[int, str, float, str]]) -> None:
    """Each timer holds the timers under it; self times are non-negative and add up to the
    first row (one table has one root here)."""
    assert [d for d, *_ in rows].count(0) == 1, rows
    for i, (depth, label, total, _own) in enumerate(rows):
        children = []
        for d, _, t, _ in rows[i + 1 :]:
            if d <= depth:
                break
            if d == depth + 1:
                children.append(t)
        assert sum(children) <= total + 0.0015 * len(children), (label, total, children)
    selves = [float(own) for *_, own in rows]
    assert all(s >= 0 for s in selves)
    assert sum(selves) == pytest.approx(rows[0][2], abs=0.0005 * len(rows))


# -- the analysis on real traces ---------------------------------------------------------------
@pytest.mark.slow
def test_training_compile_breaks_down_into_self_times_forward_and_backward() -> None:
    """[0/0] of the training run: forward 36.1 s whole frame and a 9.2 s backward compile. The
    forward table's rows never exceed the whole frame (the backward compile is not added into
    its Inductor row) and its self times add up to the whole frame."""
    log = training_trace()
    raw = raw_metrics(log)
    fwd = raw[("compilation_metrics", "[0/0]")]
    bwd = raw[("bwd_compilation_metrics", "[0/0]")]
    page = pages_of(log)["-_0_0_0/index.md"]

    forward = phase_table(page, "forward")
    check_tree(forward)
    assert forward[0][1] == "Dynamo (whole frame)"
    assert forward[0][2] == round(fwd["dynamo_cumulative_compile_time_us"] / 1e6, 3)
    totals = {label: total for _, label, total, _ in forward}
    assert totals["Inductor"] == round(fwd["inductor_cumulative_compile_time_us"] / 1e6, 3)
    assert totals["Joint-graph passes"] == round(fwd["joint_graph_pass_time_us"] / 1e6, 3)
    assert max(totals.values()) == forward[0][2]

    backward = phase_table(page, "backward")
    check_tree(backward)
    assert backward[0][2] == round(bwd["backward_cumulative_compile_time_us"] / 1e6, 3)
    assert {label for _, label, _, _ in backward} >= {"Inductor", "Inductor code generation"}

    code_gen_alone = (
        fwd["inductor_code_gen_cumulative_compile_time_us"] - fwd["triton_compile_time_us"]
    ) / 1e6
    assert (
        "Largest self time: <strong>Inductor code generation alone (forward)</strong>, "
        f"{code_gen_alone:.3f} s." in page
    )


def test_slowest_phase_column_names_a_self_time_not_the_whole_frame() -> None:
    """The compile-time page names, per compile id, the phase with the largest self time: for
    [0/0] code generation without kernel compilation, never the containing whole frame."""
    log = training_trace()
    raw = raw_metrics(log)
    pages = pages_of(log)
    page = pages["compile_time.md"]
    table = next(t for t in text_tables(page) if t[0][0] == "Compile id")
    header = table[0]
    column = header.index("Largest self time")
    rows = {row[0]: row for row in table[1:]}
    assert all("whole frame" not in row[column] for row in rows.values())
    fwd = raw[("compilation_metrics", "[0/0]")]
    code_gen_alone = (
        fwd["inductor_code_gen_cumulative_compile_time_us"] - fwd["triton_compile_time_us"]
    ) / 1e6
    assert rows["[0/0]"][column] == (
        f"Inductor code generation alone (forward) {code_gen_alone:.3f}"
    )
    # the overview's slowest compile is still the whole compile, forward plus backward
    total = (fwd["duration_us"] + raw[("bwd_compilation_metrics", "[0/0]")]["duration_us"]) / 1e6
    slowest = re.search(
        r'<th scope="row">Slowest compile</th><td markdown="span">(.*)</td>', pages["index.md"]
    )
    assert slowest is not None
    assert "[0/0]" in slowest.group(1) and slowest.group(1).endswith(f": {total:.2f} s")


def test_phase_totals_over_all_compile_ids_split_forward_and_backward() -> None:
    log = training_trace()
    raw = raw_metrics(log)
    page = pages_of(log)["compile_time.md"]
    table = next(t for t in text_tables(page) if t[0][0].startswith("Phase (self time"))
    by_phase = {row[0]: row[1:] for row in table[1:]}
    kernels = sum(
        m.get("triton_compile_time_us") or 0
        for (kind, _), m in raw.items()
        if kind == "compilation_metrics"
    )
    bwd_kernels = sum(
        m.get("triton_compile_time_us") or 0
        for (kind, _), m in raw.items()
        if kind == "bwd_compilation_metrics"
    )
    assert by_phase["Kernel compilation (async_compile)"] == [
        f"{kernels / 1e6:.3f}",
        f"{bwd_kernels / 1e6:.3f}",
    ]
    assert by_phase["Dynamo alone (tracing, guards)"][1] == ""  # no Dynamo in a backward
    # all self times together are all compile time
    seconds = [float(c) for row in table[1:] for c in row[1:] if c]
    total = sum(m["duration_us"] for m in raw.values()) / 1e6
    assert sum(seconds) == pytest.approx(total, abs=0.0005 * len(seconds))


def test_older_torch_seconds_keys_nest_the_same_way() -> None:
    """tlparse's links.log (older torch: only the ``*_s`` keys)."""
    log = tlparse_input("links.log")
    meta = raw_metrics(log)[("compilation_metrics", "[0/0]")]
    forward = phase_table(pages_of(log)["-_0_0_0/index.md"], "forward")
    check_tree(forward)
    expected = [
        (0, "Dynamo (whole frame)", "entire_frame_compile_time_s"),
        (1, "Backend compile (AOTAutograd)", "backend_compile_time_s"),
        (2, "Inductor", "inductor_compile_time_s"),
        (3, "Inductor code generation", "code_gen_time_s"),
    ]
    assert [(d, label, total) for d, label, total, _ in forward] == [
        (d, label, round(meta[key], 3)) for d, label, key in expected
    ]


def test_autotuning_is_shown_beside_the_tree_not_subtracted() -> None:
    """Compile-time autotuning is not nested in one phase: in this trace it took longer than
    all of Inductor. It is listed apart, and the tree stays consistent."""
    log = tlparse_input("inductor_provenance_jit_debug_handle_log.txt")
    meta = raw_metrics(log)[("compilation_metrics", "[0/0]")]
    assert meta["compile_time_autotune_time_us"] > meta["inductor_cumulative_compile_time_us"]
    page = pages_of(log)["-_0_0_0/index.md"]
    forward = phase_table(page, "forward")
    check_tree(forward)
    assert all("utotun" not in label for _, label, _, _ in forward)
    autotune = meta["compile_time_autotune_time_us"] / 1e6
    also = re.search(r"\n\n<ul>\n((?:<li>.*</li>\n)+)</ul>", page[page.index("Also measured") :])
    assert also is not None  # a list of its own, after a blank line
    assert f"<li>Autotuning at compile time: {autotune:.3f} s</li>\n" in also.group(1)
    assert "Inconsistent timers" not in page


def test_inconsistent_timers_are_reported_not_invented(tmp_path: Path) -> None:
    """Inductor logged as longer than the backend that contains it: no negative self time, a
    warning instead; a negative timer counts as not logged."""
    cid = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    metrics = {
        "dynamo_cumulative_compile_time_us": 3_000_000,
        "aot_autograd_cumulative_compile_time_us": 1_000_000,
        "inductor_cumulative_compile_time_us": 2_000_000,
        "gc_time_us": -5,
    }
    log = tmp_path / "odd.log"
    log.write_text(trace_lines({**cid, "compilation_metrics": metrics}), encoding="utf-8")
    page = pages_of(log)["-_0_0_0/index.md"]
    forward = phase_table(page, "forward")
    assert [label for _, label, _, _ in forward] == [
        "Dynamo (whole frame)",
        "Backend compile (AOTAutograd)",
        "Inductor",
    ]
    owns = {label: own for _, label, _, own in forward}
    assert not NUMBER.match(owns["Backend compile (AOTAutograd)"])
    assert all(float(own) >= 0 for own in owns.values() if NUMBER.match(own))
    assert "Inconsistent timers" in page


# -- the chart in a browser --------------------------------------------------------------------
def _rgb(css: str) -> tuple[float, float, float]:
    match = re.match(r"rgba?\((\d+), (\d+), (\d+)", css)
    assert match, css
    return tuple(int(v) / 255 for v in match.groups())  # type: ignore[return-value]


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two computed CSS colours."""

    def luminance(colour: str) -> float:
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in _rgb(colour)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


CHART_COLOURS = """() => {
  const style = (sel) => getComputedStyle(document.querySelector(sel));
  let el = document.querySelector('.tlsite-chart'), bg = 'rgba(0, 0, 0, 0)';
  while (el && /rgba\\(.*, 0\\)$|transparent/.test(bg)) {
    bg = getComputedStyle(el).backgroundColor; el = el.parentElement;
  }
  return {
    forward: style('.tlsite-chart .chart-bars .chart-forward').backgroundColor,
    backward: style('.tlsite-chart .chart-bars .chart-backward').backgroundColor,
    background: bg,
    label: style('.tlsite-chart a.chart-label').color,
    labelLine: style('.tlsite-chart a.chart-label').textDecorationLine,
    value: style('.tlsite-chart .chart-value').color,
    link: style('.md-content table a').color,
  };
}"""


CHART_EXTENT = """() => {
  const column = document.querySelector('.md-content__inner').getBoundingClientRect();
  const chart = document.querySelector('.tlsite-chart');
  const parts = [...chart.querySelectorAll(
    'li .chart-label, li .chart-forward, li .chart-backward, li .chart-value')];
  const root = document.documentElement;
  return {
    pageScroll: root.scrollWidth, pageWidth: root.clientWidth,
    rows: chart.querySelectorAll('li').length,
    outside: parts.filter(e => {
      const r = e.getBoundingClientRect();
      return r.right > Math.min(column.right, root.clientWidth) + 0.5 || r.left < column.left - 0.5;
    }).map(e => e.className + ' ' + e.textContent),
    scrolls: [chart, ...chart.querySelectorAll('*')]
      .filter(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0).map(e => e.className),
    fontPx: Math.min(...parts.filter(e => e.textContent).map(
      e => parseFloat(getComputedStyle(e).fontSize))),
  };
}"""


def chart_colours(page: Page) -> dict[str, str]:
    return page.evaluate(CHART_COLOURS)


@pytest.fixture(scope="module")
def training_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return site_cache(tmp_path_factory).get(training_trace()).site


@pytest.mark.browser
@pytest.mark.slow
def test_chart_bars_are_visible_and_distinct_in_light_and_dark(
    training_site: Path, open_site: SiteOpener
) -> None:
    page, report = open_site(training_site / "compile_time.html")
    scheme = "document.body.getAttribute('data-md-color-scheme')"
    for expected in ("default", "slate"):
        if page.evaluate(scheme) != expected:
            page.locator("form[data-md-component='palette'] label:visible").first.click()
            page.wait_for_function(f"{scheme} === '{expected}'")
        colours = chart_colours(page)
        assert contrast(colours["forward"], colours["backward"]) >= 2.5, (expected, colours)
        for bar in ("forward", "backward"):
            assert contrast(colours[bar], colours["background"]) >= 3, (expected, bar, colours)
        # compile-id labels look like the page's links; the values are plain text
        assert colours["label"] == colours["link"], (expected, colours)
        assert colours["labelLine"] == "underline"
        assert contrast(colours["value"], colours["background"]) >= 4.5, (expected, colours)
    assert report.console_errors == [] and report.outside_requests == []


@pytest.mark.browser
@pytest.mark.slow
def test_chart_is_not_cut_off(training_site: Path, open_site: SiteOpener) -> None:
    """Wide and on a phone (390 px): every label, bar and value lies inside the content column,
    nothing scrolls sideways, and the text keeps a readable size."""
    page, _ = open_site(training_site / "compile_time.html")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        seen = page.evaluate(CHART_EXTENT)
        assert seen["pageScroll"] <= seen["pageWidth"], (width, seen)
        assert seen["rows"] >= 2 and seen["outside"] == [], (width, seen)
        assert seen["scrolls"] == [], (width, seen)
        assert seen["fontPx"] >= 11, (width, seen)

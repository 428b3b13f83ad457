"""Failures and graph breaks say what went wrong, and each row says what sets it apart.

Real traces: ``failures`` (a backend raising ``MyBackendError("boom")``; the builtins `open`,
`print`, `dir` on three lines and `globals`, `print` on one line), ``compile_error``,
``recompiles`` and ``graph_breaks``. Expected lines and names come from the scripts that made
them (``tests/fixtures/scripts``), never from tlsite's output. The sites are built once per
run through ``test_site``'s cache; the layout checks open them in Chromium.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import FIXTURE_TRACES, fixture_traces, torch_213_traces, trace_id
from test_site import (
    COMPILE_ERROR,
    GRAPH_BREAKS,
    RECOMPILES,
    BuiltSite,
    Cell,
    SiteCache,
    article_text,
    site_cache,
    tables,
    visible_text,
)

from tlsite.core import load
from tlsite.core.analysis.views import graph_breaks, parse_graph_break

if TYPE_CHECKING:
    from browser import SiteOpener

FAILURES = FIXTURE_TRACES / "failures" / "failures.log"
SCRIPTS = Path(__file__).parent / "fixtures" / "scripts"


def script_line(script: str, text: str) -> str:
    """``script.py:N`` for the line of ``script`` that contains ``text``."""
    lines = (SCRIPTS / script).read_text(encoding="utf-8").splitlines()
    numbers = [n for n, line in enumerate(lines, 1) if text in line]
    assert len(numbers) == 1, f"{text!r} is on lines {numbers} of {script}"
    return f"{script}:{numbers[0]}"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> SiteCache:
    return site_cache(tmp_path_factory)


def failure_rows(site: BuiltSite) -> dict[str, list[Cell]]:
    """The Failures table: compile id → its cells (id, type, description, source)."""
    header, *rows = tables(site.page("failures.html"))[0]
    assert [c.text.lower() for c in header][2:] == ["failure description", "failure source"]
    return {row[0].text: row for row in rows}


def break_rows(site: BuiltSite) -> list[tuple[str, str, int]]:
    """The Graph breaks table: (reason, user code, hits) per row."""
    rows = [r for r in tables(site.page("graph_breaks.html"))[0] if r[0].text != "#"]
    return [(r[1].text, r[2].text, int(r[3].text)) for r in rows]


# -- failure summaries -------------------------------------------------------------------------
@pytest.mark.slow
def test_backend_failure_says_which_exception_the_backend_raised(sites: SiteCache) -> None:
    """fail_reason is "backend='my_backend' raised:\\nMyBackendError: boom": the row says both
    halves, on the Failures page and in the overview's worst problems."""
    site = sites.get(FAILURES)
    row = failure_rows(site)["[0/0]"]
    assert row[1].text == "BackendCompilerFailed"
    assert row[2].text == "backend 'my_backend' raised MyBackendError: boom"
    overview = article_text(site.page("index.html"))
    assert "Failure in [0/0]: BackendCompilerFailed backend 'my_backend' raised" in overview
    assert "MyBackendError: boom" in overview
    # the same on compile_error's backend, whose message is longer
    row = failure_rows(sites.get(COMPILE_ERROR))["[0/0]"]
    assert row[2].text == (
        "backend 'broken_backend' raised RuntimeError: "
        "broken_backend: refusing to compile this graph"
    )


def test_fake_tensor_failure_says_the_error_it_got(sites: SiteCache) -> None:
    """bad_matmul's message starts "RuntimeError when making fake tensor call"; the error
    itself (from the script: the shapes do not match) is quoted in its explanation."""
    row = failure_rows(sites.get(COMPILE_ERROR))["[1/0]"]
    assert row[2].text.startswith("RuntimeError when making fake tensor call")
    assert "a and b must have same reduction dim, but got [4, 8] X [4, 8]" in row[2].text


def test_no_failure_summary_ends_with_a_colon(sites: SiteCache) -> None:
    for trace in (FAILURES, COMPILE_ERROR, RECOMPILES, GRAPH_BREAKS):
        for compile_id, row in failure_rows(sites.get(trace)).items():
            assert row[2].text and not row[2].text.endswith(":"), (trace.name, compile_id)


# -- failure source ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trace", "compile_id", "function_start"),
    [
        (FAILURES, "[0/0]", script_line("failures.py", "def scaled(x):")),
        (COMPILE_ERROR, "[0/0]", script_line("compile_error.py", "def scaled(x):")),
    ],
    ids=["failures", "compile_error"],
)
def test_unrecorded_failure_source_says_so_and_where_the_function_starts(
    sites: SiteCache, trace: Path, compile_id: str, function_start: str
) -> None:
    """A backend error has no user frame in the trace (fail_user_frame_* null): the source
    says it is not recorded and points at the compiled function, never "N/A:0"."""
    site = sites.get(trace)
    source = failure_rows(site)[compile_id][3].text
    assert source == f"not recorded; the function starts at {function_start}"
    for page in ("failures.html", "-_0_0_0/index.html"):
        text = article_text(site.page(page))
        assert "N/A:0" not in text
        assert "does not record the line that failed" in text


def test_recompile_limit_failure_points_at_its_frame(sites: SiteCache) -> None:
    """[0/5] (recompile limit) has no dynamo_start or co_filename; frame 0's other compiles
    say where ``f`` starts (README: recompiles.py:21, the line of its decorator)."""
    row = failure_rows(sites.get(RECOMPILES))["[0/5]"]
    assert row[3].text == "not recorded; the function starts at recompiles.py:21"


def test_recorded_failure_source_is_kept(sites: SiteCache) -> None:
    rows = failure_rows(sites.get(COMPILE_ERROR))
    assert rows["[1/0]"][3].text == script_line("compile_error.py", "return h @ w")
    assert rows["[6/0]"][3].text == script_line("compile_error.py", "fullgraph cannot contain")


def test_error_page_shows_the_python_traceback_open(sites: SiteCache) -> None:
    page = sites.get(FAILURES).page("-_0_0_0/index.html")
    block = (
        r'(?s)<details class="tlsite-artifact"([^>]*)>\s*'
        r"<summary>dynamo_error</summary>(.*?)</details>"
    )
    details = re.search(block, page)
    assert details is not None, "the error page has no dynamo_error block"
    assert "open" in details.group(1)
    traceback = visible_text(details.group(2))
    assert 'raise MyBackendError("boom")' in traceback and "MyBackendError: boom" in traceback
    # the failure box says where to find it
    assert re.search(r'<a href="#artifact-\d+">Python traceback</a>', page)


# -- graph breaks ------------------------------------------------------------------------------
def test_breaks_with_one_title_say_which_builtin(sites: SiteCache) -> None:
    """torch titles all five "Failed to trace builtin operator"; each row names its builtin,
    and `globals` and `print` on one line are two rows, not one row hit twice."""
    rows = break_rows(sites.get(FAILURES))
    builtin = [(reason, where, hits) for reason, where, hits in rows if "builtin" in reason]
    one_line = script_line("failures.py", "print(len(globals()) > 0)")
    expected = {
        ("open", script_line("failures.py", "fh = open(__file__)"), 1),
        ("print", script_line("failures.py", 'print("tracing builtins")'), 1),
        ("dir", script_line("failures.py", "names = dir(fh)"), 1),
        ("globals", one_line, 1),
        ("print", one_line, 1),
    }
    got = {(reason.rsplit(": ", 1)[-1], where, hits) for reason, where, hits in builtin}
    assert got == expected
    assert all(r.startswith("Failed to trace builtin operator: ") for r, _, _ in builtin)
    assert len({(reason, where) for reason, where, _ in rows}) == len(rows)  # no two alike


def test_restarts_with_one_title_say_which_builtin(sites: SiteCache) -> None:
    rows = failure_rows(sites.get(FAILURES))
    described = {cid: row[2].text for cid, row in rows.items() if row[1].text == "RestartAnalysis"}
    names = sorted(d.rsplit(": ", 1)[-1] for d in described.values() if "builtin" in d)
    assert names == ["dir", "globals", "open", "print", "print"]


def test_a_lone_title_is_left_alone(sites: SiteCache) -> None:
    """graph_breaks: one `print` location, hit 4 times (README), and titles all differ: the
    rows are torch's titles as they are."""
    rows = break_rows(sites.get(GRAPH_BREAKS))
    assert (
        "Failed to trace builtin operator",
        script_line("graph_breaks.py", 'print("block output"'),
        4,
    ) in rows


REAL_BREAK_TRACES = [
    t
    for t in torch_213_traces() + fixture_traces()
    if b"dynamo_graph_break_reason" in t.read_bytes()
]


@pytest.mark.parametrize("trace", REAL_BREAK_TRACES, ids=[trace_id(t) for t in REAL_BREAK_TRACES])
def test_real_break_reasons_are_titles(trace: Path) -> None:
    for gb in graph_breaks(load(trace)):
        title = gb.reason
        assert title and not re.match(r"(Explanation|Hint|Developer debug context)\b", title)
        assert not title.startswith("Encountered graph break"), title


def test_reason_on_the_reason_line_is_the_title() -> None:
    """Later torch (2.15) puts the title on the "Graph Break Reason:" line; the next line,
    "Explanation: ...", is detail. (torch 2.15 is not installed: a payload in its shape.)"""
    payload = (
        "Graph break in user code at /home/user/model.py:21\n"
        "Graph Break Reason: Data-dependent branching\n"
        "  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). "
        "Dynamo does not support tracing dynamic control flow.\n"
        "  Hint: Use `torch.cond` to express dynamic control flow.\n"
        "\n"
        "  Developer debug context: attempted to jump with TensorVariable()\n"
        "\n"
        "User code traceback:\n"
        '  File "/home/user/model.py", line 21, in forward\n'
        "    if x.sum() > 0:\n"
    )
    info = parse_graph_break(payload)
    assert info["reason"] == "Data-dependent branching"
    assert info["location"] == "/home/user/model.py:21"
    assert "Explanation: Detected data-dependent branching" in info["detail"]


# -- what a person sees ------------------------------------------------------------------------
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def _overflowing_blocks(page, selector: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Shown code blocks that scroll sideways (text hidden past their edge)."""
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)]
            .filter(c => c.checkVisibility() && c.scrollWidth > c.clientWidth + 1)
            .map(c => c.textContent.slice(0, 60))""",
        selector,
    )


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(
    ("trace", "page_path", "blocks"),
    [
        (COMPILE_ERROR, "failures.html", "article pre > code"),
        (COMPILE_ERROR, "-_1_0_0/index.html", "article .admonition pre > code"),
        (FAILURES, "graph_breaks.html", "article pre > code"),
    ],
    ids=["failures", "error-page", "graph-breaks"],
)
def test_long_messages_wrap_inside_the_page(
    sites: SiteCache,
    open_site: SiteOpener,
    trace: Path,
    page_path: str,
    blocks: str,
    viewport: dict[str, int],
    scheme: str,
) -> None:
    """Failure messages and break explanations (the explanation of bad_matmul's failure is
    one 300-character line) wrap: nothing is hidden past a block's or the page's edge."""
    page, _ = open_site(sites.get(trace).site / page_path)
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size(viewport)
    assert page.locator(blocks).count() > 0
    assert _overflowing_blocks(page, blocks) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
@pytest.mark.parametrize("trace", [FAILURES, GRAPH_BREAKS], ids=["failures", "graph_breaks"])
def test_user_code_cells_stay_on_one_line(
    sites: SiteCache, open_site: SiteOpener, trace: Path, viewport: dict[str, int]
) -> None:
    """``failures.py:34`` is one token: it never breaks across lines in its table cell."""
    page, _ = open_site(sites.get(trace).site / "graph_breaks.html")
    page.set_viewport_size(viewport)
    lines = page.evaluate(
        """() => [...document.querySelectorAll("article table td:nth-child(3) code")]
            .map(c => [c.textContent, c.getClientRects().length])"""
    )
    assert lines and all(re.fullmatch(r"[\w.-]+\.py:\d+", text) for text, _ in lines)
    assert [text for text, boxes in lines if boxes != 1] == []


@pytest.mark.browser
@pytest.mark.parametrize(
    ("trace", "page_path"),
    [
        (COMPILE_ERROR, "failures.html"),
        (FAILURES, "failures.html"),
        (FAILURES, "graph_breaks.html"),
        (GRAPH_BREAKS, "graph_breaks.html"),
    ],
    ids=["compile_error-failures", "failures-failures", "failures-breaks", "breaks-breaks"],
)
def test_tables_fit_a_phone(
    sites: SiteCache, open_site: SiteOpener, trace: Path, page_path: str
) -> None:
    """On a phone the whole row is on screen: no column hides past the table's edge. The
    failures table keeps its words whole instead (review of issue 16): the page itself does not
    overflow and the table's own box scrolls to show every column."""
    page, _ = open_site(sites.get(trace).site / page_path)
    page.set_viewport_size(PHONE)
    if page_path == "failures.html":
        box = page.evaluate(
            """() => {
              const table = document.querySelector("article table");
              const box = table.closest(".md-typeset__scrollwrap");
              return [document.documentElement.scrollWidth <= innerWidth,
                      getComputedStyle(box).overflowX, box.scrollWidth >= table.scrollWidth];
            }"""
        )
        assert box == [True, "auto", True]
        return
    hidden = page.evaluate(
        """() => {
          const table = document.querySelector("article table");
          const right = document.documentElement.clientWidth;
          return [table.scrollWidth - table.clientWidth,
                  ...[...table.querySelectorAll("td")]
                    .filter(td => td.getBoundingClientRect().right > right)
                    .map(td => td.textContent.trim())];
        }"""
    )
    assert hidden == [0]


def test_overview_names_each_builtin_as_code(sites: SiteCache) -> None:
    """ "Worst problems first" tells the builtins apart the way the graph-breaks page does: the
    name as code, never Markdown's backticks shown as text."""
    page = sites.get(FAILURES).page("index.html")
    items = [visible_text(li) for li in re.findall(r"(?s)<li>.*?</li>", article_text_html(page))]
    builtin = [item for item in items if item.startswith("Graph break") and "builtin" in item]
    assert len(builtin) >= 4 and not any("`" in item for item in builtin)
    assert "Failed to trace builtin operator: <code>open</code>" in page


def article_text_html(page: str) -> str:
    """The "Worst problems first" section of the overview, as HTML."""
    return page.split('id="worst-problems-first"', 1)[1].split("<h2", 1)[0]

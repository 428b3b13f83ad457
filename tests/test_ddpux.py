"""What a person sees on the landing page of a real 16-rank DDP job (``ddp16.7z``).

The ranks' logs are unpacked from the archive and read here for the expected values (compile
ids, cache lookups, recompile reasons); the pages are checked as built, and in Chromium where
what matters is how the page looks (a table that fits, a name not wrapped).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from test_speed_ddp16 import JOB, compile_ids, rank_logs, reasons, text_of

from tlsite.core import resolve_input
from tlsite.mkdocs_plugin.multirank_build import build_multirank

_ROW = re.compile(r"<tr>(.*?)</tr>", re.DOTALL)
_CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.DOTALL)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    return rank_logs(tmp_path_factory.mktemp("ddpux_logs"))


@pytest.fixture
def site(job_site_of: Callable[[Path], Path]) -> Path:
    return job_site_of(JOB)


def section(page: str, anchor: str) -> str:
    """The HTML of a landing section, from its heading to the end of its first table."""
    part = page[page.index(f'id="{anchor}"') :]
    return part[: part.index("</table>")]


# -- 1. the Ranks table -------------------------------------------------------------------------
@pytest.mark.slow
def test_the_ranks_table_shows_what_tells_each_log_apart_and_the_whole_name(logs, site):
    page = (site / "index.html").read_text(encoding="utf-8")
    table = section(page, "ranks")
    intro = text_of(table[: table.index("<table")])
    names = {}
    for row in _ROW.findall(table)[1:]:
        cells = _CELL.findall(row)
        rank = int(text_of(cells[0]).split()[1])
        title = html.unescape(re.search(r'class="tlsite-log" title="([^"]*)"', cells[1])[1])
        shown = text_of(cells[1])
        names[rank] = (title, shown)
    assert sorted(names) == sorted(logs)
    for rank, (title, shown) in names.items():
        # the whole name, as torch wrote it, is the cell's tooltip
        assert re.search(rf"/dedicated_log_torch_trace_rank_{rank}_[^/]*\.log$", title), title
        assert shown.startswith(f"{rank}_") and len(shown) < 16, shown
        prefix, suffix = title.split(shown)
        assert f"Each rank's log is {prefix} … {suffix}" in intro, intro


def _ranks_table_geometry(page) -> dict:  # type: ignore[no-untyped-def]
    return page.evaluate(
        """() => {
            let el = document.getElementById('ranks').nextElementSibling;
            while (!el.querySelector('table')) el = el.nextElementSibling;
            const box = el.querySelector('.md-typeset__scrollwrap') || el;
            const rows = [...box.querySelectorAll('tbody tr')];
            const cell = rows[0].querySelector('td');
            const style = getComputedStyle(cell);
            const line = parseFloat(style.lineHeight);
            const pad = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom);
            return {
                box: [box.scrollWidth, box.clientWidth],
                page: [document.documentElement.scrollWidth, window.innerWidth],
                rows: rows.length,
                tallest: Math.max(...rows.map(r => r.getBoundingClientRect().height)),
                one_line: line + pad,
            };
        }"""
    )


@pytest.mark.slow
@pytest.mark.browser
def test_the_ranks_table_fits_at_1280_px_one_line_per_rank(site, open_site):
    page, report = open_site(site / "index.html")
    page.set_viewport_size({"width": 1280, "height": 900})
    got = _ranks_table_geometry(page)
    assert got["rows"] == 16
    scroll, client = got["box"]
    assert scroll <= client, got  # every column, Parse health too, without scrolling sideways
    assert got["tallest"] < 1.5 * got["one_line"], got  # no name wrapped onto more lines
    assert not report.console_errors and not report.outside_requests


@pytest.mark.slow
@pytest.mark.browser
def test_on_a_phone_the_ranks_table_scrolls_in_its_box_not_the_page(site, open_site):
    page, report = open_site(site / "index.html")
    page.set_viewport_size({"width": 390, "height": 844})
    got = _ranks_table_geometry(page)
    page_width, viewport = got["page"]
    assert page_width <= viewport, got
    scroll, client = got["box"]
    assert scroll > client, got  # the box scrolls; the rows stay one line each
    assert got["tallest"] < 1.5 * got["one_line"], got
    assert not report.console_errors


# -- 3. and 4. Diverging ranks compared ---------------------------------------------------------
_CACHE_LOOKUP = re.compile(r'"artifact": \{"name": "(\w+?)_cache_(hit|miss|bypass)"')
_FRAME = re.compile(r'"frame_id": (\d+), "frame_compile_id": \d+')


def cache_lookups(log: str) -> list[tuple[str, str, str]]:
    """Each cache lookup a rank logged, in order: (frame id, cache, hit/miss/bypass)."""
    found = []
    for line in log.splitlines():
        lookup = _CACHE_LOOKUP.search(line)
        if lookup:
            frame = _FRAME.search(line)
            found.append((frame[1] if frame else "?", lookup[1], lookup[2]))
    return found


def misses(log: str, frame: str | None = None) -> int:
    return sum(r == "miss" and frame in (None, f) for f, _, r in cache_lookups(log))


def compared(site: Path) -> dict[tuple[int, int], list[str]]:
    """The rows of "Diverging ranks compared": (rank a, rank b) → the row's cells' text."""
    page = (site / "index.html").read_text(encoding="utf-8")
    rows = {}
    for row in _ROW.findall(section(page, "diverging-ranks-compared"))[1:]:
        # text_of puts a space for each tag: "<strong>worse</strong>:" reads "worse:"
        cells = [re.sub(r" ([,:;])", r"\1", text_of(c)) for c in _CELL.findall(row)]
        a, b = map(int, re.match(r"rank (\d+) → rank (\d+)$", cells[0]).groups())
        assert f'href="diff_{a}_{b}/index.html"' in row and (site / f"diff_{a}_{b}").is_dir()
        rows[a, b] = cells
    return rows


@pytest.mark.slow
def test_every_group_of_ranks_that_differs_is_compared_with_the_largest(logs, site):
    """Six cache patterns (the ranks shared one inductor cache) and two compile-id sets: each
    group but the largest has its first rank compared with the largest group's first rank.
    Rank 11, a cache group of its own, had no comparison."""
    patterns: dict[tuple, list[int]] = {}
    for rank in sorted(logs):
        patterns.setdefault(tuple(cache_lookups(logs[rank])), []).append(rank)
    groups = sorted(patterns.values(), key=lambda g: (-len(g), g))
    assert len(groups) == 6 and [11] in groups
    largest = groups[0][0]
    rows = compared(site)
    for group in groups[1:]:
        assert (largest, group[0]) in rows, (group, sorted(rows))
    assert (0, 3) in rows  # ranks 3 and 11 compiled what the others did not


@pytest.mark.slow
def test_a_verdict_between_ranks_names_what_is_worse_and_the_cache_misses(logs, site):
    """Rank 0 compiled faster than rank 6 in all, yet "worse": its resume function missed the
    cache and compiled slower. The row says that, not only "worse"."""
    rows = compared(site)
    for (a, b), cells in rows.items():
        verdict = cells[1]
        if misses(logs[a]) != misses(logs[b]):
            assert f"cache misses {misses(logs[a])} → {misses(logs[b])}" in verdict, verdict
    verdict, total = rows[6, 0][1], rows[6, 0][4]
    before, after = map(float, re.findall(r"([\d.]+) s", total))
    assert after < before  # rank 0 compiled faster in all
    resume = "5"  # the frame of torch_dynamo_resume_in_forward
    assert verdict.startswith("worse: compile time of torch_dynamo_resume_in_forward"), verdict
    expected = f"(cache misses {misses(logs[6], resume)} → {misses(logs[0], resume)})"
    assert expected in verdict and misses(logs[0], resume) > misses(logs[6], resume)


@pytest.mark.slow
def test_ranks_with_the_same_results_are_not_said_to_differ_in_setup(logs, site):
    """Rank 5 against rank 6: same torch, same config, same compiles; only the shared cache
    answered differently. "Different setup" said something that did not differ."""
    verdict = compared(site)[6, 5][1]
    assert "setup" not in verdict
    assert verdict == (
        f"same results, different cache misses {misses(logs[6])} → {misses(logs[5])}, "
        f"hits {len(cache_lookups(logs[6])) - misses(logs[6])} → "
        f"{len(cache_lookups(logs[5])) - misses(logs[5])}"
    )


@pytest.mark.slow
def test_the_diff_tool_keeps_its_verdict_between_two_ranks_and_names_the_cache(logs, site):
    """``tlsite diff`` of ranks 6 and 0 still says "worse" (a frame compiled slower), and
    now says why that frame was slower: it missed the cache where rank 6 hit."""
    data = json.loads((site / "diff_6_0" / "diff.json").read_text(encoding="utf-8"))
    assert data["verdict"] == "worse"
    [slower] = [f["text"] for f in data["regressions"]]
    resume = f"(cache misses {misses(logs[6], '5')} → {misses(logs[0], '5')})"
    assert slower.startswith("compile time of torch_dynamo_resume_in_forward") and resume in slower
    summary = text_of((site / "diff_6_0" / "index.html").read_text(encoding="utf-8"))
    cache = f"cache misses {misses(logs[6])} → {misses(logs[0])}"
    assert re.search(rf"Verdict: worse — 1 regression, 0 improvements, {cache}\b", summary)


def test_two_real_runs_keep_their_verdicts_and_the_summary_names_the_cache_change():
    """Two runs of a script (dynamic=False, then dynamic=True): still "better", and the
    verdict line says the cache was used differently (one bypass fewer), which it left out."""
    from test_diff import compare

    from tlsite.core.render.diff_pages import render_pages

    diff = compare("dynamic", "dynamic")
    assert diff.verdict == "better" and not diff.regressions
    assert compare("newgb", "newgb").verdict == "worse"
    assert compare("gbfix", "gbfix").verdict == "better"
    b, a = diff.before.cache["bypass"], diff.after.cache["bypass"]
    assert b != a
    summary = next(p for p in render_pages(diff) if p.path == "index.md").markdown
    verdict = next(line for line in summary.splitlines() if line.startswith("**Verdict:"))
    assert verdict.endswith(f", cache bypasses {b} → {a}."), verdict


@pytest.mark.slow
def test_a_pair_past_the_cap_is_named_on_the_page_with_why(tmp_path, monkeypatch, site):
    from tlsite.mkdocs_plugin import diff_build

    built = list(compared(site))  # in the order the page lists them
    monkeypatch.setattr(diff_build, "MAX_RANK_DIFFS", 4)
    out = tmp_path / "site"
    with resolve_input(str(JOB)) as resolved:
        build_multirank(resolved, out, jobs=1)
    assert list(compared(out)) == built[:4]
    page = text_of((out / "index.html").read_text(encoding="utf-8"))
    left = ", ".join(f"rank {a} → rank {b}" for a, b in built[4:])
    assert f"Not compared: {left} (at most 4 comparisons are built)." in page


# -- 2. a restart's compile page ----------------------------------------------------------------
@pytest.mark.slow
def test_a_restarted_attempt_of_a_recompile_says_why_the_compile_happened(logs, site):
    """[0/1_1] is [0/1] tried again after a graph break (torch logs the compile's reason once:
    the ``recompile_reasons`` artifact on [0/1], the metrics' ``recompile_reason`` on [0/1_1]),
    so its page gives [0/1]'s reason and says whose it is. A first compile's restart has none."""
    guards = reasons(logs[3])
    restarts = sorted(k for k in compile_ids(logs[3]) if "_" in k)
    assert "[0/1_1]" in restarts and "[0/0_1]" in restarts
    for key in restarts:
        frame, compile_, attempt = re.match(r"\[(\d+)/(\d+)_(\d+)\]", key).groups()
        page = (site / "rank_3" / f"-_{frame}_{compile_}_{attempt}" / "index.html").read_text()
        text = text_of(page)
        first = f"[{frame}/{compile_}]"
        if first not in guards:  # a first compile: it did not recompile
            assert "Why it recompiled" not in text, key
            continue
        assert "Why it recompiled" in text, key
        assert f"This attempt is compile {first} restarted, not a new compile" in text, key
        assert guards[first] in text, key
        assert f'href="../-_{frame}_{compile_}_0/index.html">{first}</a> restarted' in page

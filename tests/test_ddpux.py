"""What a person sees on the landing page of a real 16-rank DDP job (``ddp16.7z``).

The ranks' logs are unpacked from the archive and read here for the expected values (compile
ids, cache lookups, recompile reasons); the pages are checked as built, and in Chromium where
what matters is how the page looks (a table that fits, a name not wrapped).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from test_speed_ddp16 import JOB, rank_logs, text_of

from tlsite.core import resolve_input
from tlsite.mkdocs_plugin.multirank_build import build_multirank

_ROW = re.compile(r"<tr>(.*?)</tr>", re.DOTALL)
_CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.DOTALL)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    return rank_logs(tmp_path_factory.mktemp("ddpux_logs"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddpux") / "site"
    with resolve_input(str(JOB)) as resolved:
        build_multirank(resolved, out, jobs=1)
    return out


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

"""A real 16-rank DDP job (``tests/fixtures/traces/ddp16/ddp16.7z``): what its landing page tells.

Real ranks are not alike: ranks 3 and 11 got a shorter last batch and recompiled three frames,
and the 16 ranks shared one inductor cache, so their hits and misses differ. A user opening the
landing page checks which ranks did more, and why. Expected values are read here from the rank
logs themselves (compile ids and ``recompile_reason`` of each rank), not copied from the pages.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import py7zr
import pytest
from corpus import FIXTURE_TRACES

JOB = FIXTURE_TRACES / "ddp16" / "ddp16.7z"

_COMPILE_ID = re.compile(r'"frame_id": (\d+), "frame_compile_id": (\d+), "attempt": (\d+)')
_RANK = re.compile(r"rank_(\d+)_")
_TAG = re.compile(r"<[^>]+>")
_LINK = re.compile(r'<a\b[^>]*?\bhref="([^"]*)"[^>]*>(.*?)</a>', re.DOTALL)


def rank_logs(folder: Path) -> dict[int, str]:
    """Each rank's log text, unpacked from the archive into ``folder``."""
    with py7zr.SevenZipFile(JOB) as archive:
        archive.extractall(path=folder)
    return {
        int(_RANK.search(log.name)[1]): log.read_text(encoding="utf-8")
        for log in folder.rglob("*.log")
    }


def compile_ids(log: str) -> set[str]:
    """``[0/1_1]``-style ids of every record that names one, as tlparse labels them."""
    return {f"[{f}/{c}{'_' + a if a != '0' else ''}]" for f, c, a in _COMPILE_ID.findall(log)}


def reasons(log: str) -> dict[str, str]:
    """Per frame compile (``[4/1]``), the failed guard of its ``recompile_reason``."""
    found = {}
    for line in log.splitlines():
        if '{"compilation_metrics"' in line and '"recompile_reason"' in line:
            record = json.loads(line[line.index("] ") + 2 :])  # after the glog prefix
            reason = record["compilation_metrics"].get("recompile_reason")
            if reason:
                key = f"[{record['frame_id']}/{record['frame_compile_id']}]"
                found[key] = re.split(r"\s{2,}#", reason.splitlines()[0])[0].rstrip()
    return found


def text_of(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).split())


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    return rank_logs(tmp_path_factory.mktemp("ddp16_logs"))


@pytest.fixture
def site(job_site_of: Callable[[Path], Path]) -> Path:
    return job_site_of(JOB)


def warning_items(site: Path) -> list[str]:
    """The landing page's warning box, one text per bullet."""
    page = (site / "index.html").read_text(encoding="utf-8")
    box = page[page.index("admonition warning") :]
    box = box[: box.index("</div>")]
    return [text_of(item) for item in re.findall(r"<li>(.*?)</li>", box, re.DOTALL)]


@pytest.mark.slow
def test_the_warning_names_the_ranks_that_compiled_more_and_why(logs, site):
    ids = {rank: compile_ids(log) for rank, log in logs.items()}
    usual = Counter(frozenset(v) for v in ids.values()).most_common(1)[0][0]
    extra_ranks = sorted(rank for rank, v in ids.items() if v != usual)
    assert extra_ranks == [3, 11]  # the script's uneven last shard
    extra = ids[3] - usual
    assert ids[11] - usual == extra and not usual - ids[3]
    lead = f"Ranks 3, 11 compiled {len(extra)} compile ids that ranks"
    [item] = [i for i in warning_items(site) if i.startswith(lead)]
    assert all(key in item for key in extra), item
    # why: the guard that failed for each extra id (restarts share their compile's) is named
    guards = reasons(logs[3])
    why = {guards[key.split("_")[0].rstrip("]") + "]"] for key in extra}
    assert why and all(guard in item for guard in why), (why, item)
    assert "size mismatch at index 0. expected 8, actual 5" in item


@pytest.mark.slow
def test_the_ranks_table_counts_each_ranks_compile_ids(logs, site):
    page = (site / "index.html").read_text(encoding="utf-8")
    table = page[page.index('id="ranks"') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)[1:]
    shown = {}
    for row in rows:
        cells = [text_of(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        shown[int(cells[0].split()[1])] = int(cells[3])
    assert shown == {rank: len(compile_ids(log)) for rank, log in logs.items()}


@pytest.mark.slow
def test_the_extra_compile_ids_open_the_recompiling_ranks_page_from_disk(logs, site):
    index = site / "index.html"
    page = index.read_text(encoding="utf-8")
    extra = compile_ids(logs[3]) - compile_ids(logs[0])
    opened = {}
    for href, body in _LINK.findall(page):
        label = text_of(body)
        if label in extra:
            url = urlsplit(urljoin(index.resolve().as_uri(), html.unescape(href)))
            target = Path(unquote(url.path))
            assert target.is_file(), href
            opened[label] = target.read_text(encoding="utf-8")
    assert set(opened) == extra
    for key, target in opened.items():
        title = text_of(re.search(r"<h1[^>]*>(.*?)</h1>", target, re.DOTALL)[1])
        assert title.startswith(key), (key, title)  # the page of the id the link names
        if "_" not in key:  # a recompile's first attempt says which guard failed
            assert "Why it recompiled" in text_of(target), key


@pytest.mark.slow
def test_the_compile_ids_table_says_why_each_extra_id_was_compiled(logs, site):
    page = (site / "index.html").read_text(encoding="utf-8")
    section = page[page.index('id="compile-ids"') :]
    section = section[: section.index("</table>")]
    guards = reasons(logs[3])
    rows = [text_of(row) for row in re.findall(r"<tr>(.*?)</tr>", section, re.DOTALL)]
    extra = sorted(compile_ids(logs[3]) - compile_ids(logs[0]))
    assert len(extra) == 6
    for key in extra:  # the id's row, then the row of ranks 3 and 11: the guard of its compile
        at = next(i for i, row in enumerate(rows) if row.startswith(key + " "))
        guard = guards[key.split("_")[0].rstrip("]") + "]"]
        assert rows[at + 1] == f"3, 11 compiled (recompiled: {guard})", rows[at : at + 2]


@pytest.mark.slow
def test_diverging_ranks_compared_says_when_the_graph_breaks_are_the_same(site):
    """Every rank hits the same graph breaks: "0 only on rank 0, 0 only on rank 3" hid that."""
    page = (site / "index.html").read_text(encoding="utf-8")
    section = page[page.index('id="diverging-ranks-compared"') :]
    section = section[: section.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", section, re.DOTALL)[1:]
    assert rows
    for row in rows:
        cells = [text_of(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        a = int(re.match(r"rank (\d+) →", cells[0])[1])
        overview = text_of((site / f"rank_{a}" / "index.html").read_text(encoding="utf-8"))
        distinct = re.search(r"Graph breaks (\d+) distinct", overview)[1]
        assert cells[2] == f"the same {distinct} on both", cells

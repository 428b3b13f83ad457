"""A job's ranks built faster show what they showed (issue #19: 16 ranks at tlparse's speed).

A job's ranks are built a few per helper process; a rank's pages that are alike with those of
a rank the same process built before (the same Markdown and link targets: a real job's ranks
compiled the same program) are converted and indexed once, and the ranks load the theme's
files from the job's root instead of a copy each. Checked on the corpus' real two-rank job plus
a third rank that logged what rank 0 did: the pages are the same whichever process built
which rank, every page is there, every link and theme file a page loads is in the site and in
its zip, and a rank's page opened from ``file://`` is styled and searches.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import pytest
from browser import SiteOpener
from corpus import PROJECT_ROOT, TORCH_213

TWO_RANKS = TORCH_213 / "multi_rank"
TIMEOUT_S = 600
SEARCH_TIMEOUT_MS = 30_000

pytestmark = pytest.mark.skipif(not TWO_RANKS.is_dir(), reason="shared corpus not available")

#: Relative URLs a page loads or links to (``src``/``href``), and Material's search worker.
_URL = re.compile(r'(?:\bsrc|\bhref)="([^"]*)"|"search": "([^"]*)"')


def _job(folder: Path) -> Path:
    """The corpus' two rank logs, and rank 2: a copy of rank 0's log (its pages are alike)."""
    logs = sorted(TWO_RANKS.glob("dedicated_log_torch_trace_rank_*.log"))
    folder.mkdir()
    for rank, log in enumerate([*logs, logs[0]]):
        shutil.copyfile(log, folder / f"dedicated_log_torch_trace_rank_{rank}.log")
    return folder


def _build(job: Path, out: Path, jobs: int) -> Path:
    """``tlsite build`` of the job, ``jobs`` ranks at a time (1: one process builds all)."""
    command = [sys.executable, "-m", "tlsite", "build", str(job), "-o", str(out)]
    command += ["--no-browser", "--quiet", "--jobs", str(jobs)]
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT.parent))
    subprocess.run(command, check=True, timeout=TIMEOUT_S, env=env, stdout=subprocess.DEVNULL)
    return out


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The job built in one process (ranks share) and with a process per rank (none do)."""
    scratch = tmp_path_factory.mktemp("ranks")
    job = _job(scratch / "job")
    return _build(job, scratch / "shared", 1), _build(job, scratch / "apart", 3)


def _files(site: Path) -> dict[str, bytes]:
    return {
        path.relative_to(site).as_posix(): path.read_bytes()
        for path in sorted(site.rglob("*"))
        if path.is_file()
    }


def _pages(site: Path, rank: int) -> set[str]:
    folder = site / f"rank_{rank}"
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*.html")}


def _article(page: Path) -> str:
    """A report page's article (the tlparse-compatible pages have none: all of it)."""
    text = page.read_text(encoding="utf-8")
    if "<article" not in text:
        return text
    return text[text.index("<article") : text.index("</article>")]


@pytest.mark.slow
def test_ranks_built_in_one_process_show_what_each_shows_alone(sites: tuple[Path, Path]) -> None:
    shared, apart = sites
    files = _files(shared)
    assert files.keys() == _files(apart).keys()
    differing = [path for path, data in _files(apart).items() if files[path] != data]
    assert differing == []
    # every rank has its pages; rank 2 logged what rank 0 did, and shows it as its own
    assert all(_pages(shared, rank) for rank in (0, 1, 2))
    assert _pages(shared, 2) == _pages(shared, 0)
    for page in sorted(_pages(shared, 0)):
        own = _article(shared / "rank_2" / page)  # the log's name and the rank's number aside
        own = re.sub(r"rank_2(?!\d)", "rank_0", own).replace("Rank 2", "Rank 0")
        assert own == _article(shared / "rank_0" / page), page
    assert "Rank 2" in (shared / "rank_2" / "index.html").read_text(encoding="utf-8")


def _targets(site: Path) -> list[tuple[str, str]]:
    """(page, site-relative file) of every relative URL on every page of ``site``."""
    found = []
    for page in sorted(site.rglob("*.html")):
        source = page.read_text(encoding="utf-8")
        here = PurePosixPath(page.relative_to(site).as_posix()).parent
        for match in _URL.finditer(source):
            url = urlsplit(match.group(1) or match.group(2))
            if url.scheme or url.netloc or not url.path or url.path.startswith("/"):
                continue
            target = os.path.normpath(str(here / unquote(url.path)))
            found.append((page.relative_to(site).as_posix(), target))
    return found


@pytest.mark.slow
def test_one_copy_of_the_theme_serves_every_rank_in_site_and_zip(
    sites: tuple[Path, Path],
) -> None:
    shared, _ = sites
    with zipfile.ZipFile(shared.with_name(f"{shared.name}.zip")) as bundle:
        names = {PurePosixPath(n).relative_to(shared.name).as_posix() for n in bundle.namelist()}
    themes = sorted(n for n in names if re.search(r"(^|/)assets/", n))
    assert themes and all(n.startswith("assets/") for n in themes), themes[:5]
    for rank in (0, 1, 2):  # what no one opens in a rank's folder is not there either
        assert not {f"rank_{rank}/404.html", f"rank_{rank}/sitemap.xml"} & names
    targets = _targets(shared)
    assert any(t.startswith("assets/javascripts/workers/") for _, t in targets)  # search
    assert any(page.startswith("rank_1/-_") and t.startswith("assets/") for page, t in targets)
    missing = sorted({(p, t) for p, t in targets if t not in names})
    assert missing == [], missing[:5]
    # the landing page opens every rank, and every rank's pages lead back to it
    landing = {t for p, t in targets if p == "index.html"}
    assert {f"rank_{rank}/index.html" for rank in (0, 1, 2)} <= landing
    for rank in (0, 1, 2):
        back = {t for p, t in targets if p == f"rank_{rank}/-_0_0_0/index.html"}
        assert "index.html" in back


@pytest.mark.slow
@pytest.mark.browser
def test_a_rank_page_from_file_is_styled_and_searches(
    sites: tuple[Path, Path], open_site: SiteOpener
) -> None:
    shared, _ = sites
    page, report = open_site(shared / "rank_1" / "-_0_0_0" / "index.html")
    header = page.locator(".md-header").first
    # Material's stylesheet (from the job's root) makes the header a sticky, coloured bar
    assert header.evaluate("e => getComputedStyle(e).position") == "sticky"
    search = page.locator(".md-search__input")
    search.click()
    search.press_sequentially("[1/0]")
    hit = page.locator(".md-search-result__item a[href*='-_1_0_0/index.html']").first
    hit.wait_for(state="visible", timeout=SEARCH_TIMEOUT_MS)
    assert "/rank_1/" in hit.evaluate("a => a.href")
    assert report.outside_requests == [] and report.console_errors == [] and report.dialogs == []

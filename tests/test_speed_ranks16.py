"""A job's sites below its root find the theme's files at the root, by one rule (issue #19).

A job's site is a landing page at its root, a report per rank in ``rank_<N>/`` and a diff of
two ranks in ``diff_<a>_<b>/``; the sites below the root have no theme files of their own, no
``404.html`` and no sitemap. Where their pages load the theme's files from is decided by
:func:`tlsite.core.render.page.theme_file_url`, for Material's template (the job's url filter)
and for tlsite's own provenance pages alike. Checked on the corpus' real two-rank torch 2.13 job,
whose ranks have provenance pages.

With ``TLSITE_BASE_REV`` set to a revision of this repository (e.g. the one before a change to
how jobs are built), the slow test also builds the corpus' real two-rank torch 2.13 job and
tlparse's multi-rank inputs with that revision and checks the sites and their zips are the
same, file for file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

import pytest
from corpus import PROJECT_ROOT, TLPARSE_INPUTS, TORCH_213

TWO_RANKS = TORCH_213 / "multi_rank"
REAL_JOBS = [TWO_RANKS, *(TLPARSE_INPUTS / f"multi_rank_{name}" for name in ("logs", "runtime"))]
TIMEOUT_S = 600

#: A stylesheet or script a page loads, relative to the page.
_LOADED = re.compile(r'<(?:link[^>]*\bhref|script[^>]*\bsrc)="([^":]+\.(?:css|js))"')


def _build(job: Path, out: Path, pythonpath: Path) -> Path:
    command = [sys.executable, "-m", "tlsite", "build", str(job), "-o", str(out)]
    command += ["--no-browser", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    subprocess.run(command, check=True, timeout=TIMEOUT_S, env=env, stdout=subprocess.DEVNULL)
    return out


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not TWO_RANKS.is_dir():
        pytest.skip("shared corpus not available")
    return _build(TWO_RANKS, tmp_path_factory.mktemp("job") / "site", PROJECT_ROOT.parent)


def _loaded(page: Path, site: Path) -> list[str]:
    """The site-relative files of the stylesheets and scripts ``page`` loads."""
    here = PurePosixPath(page.relative_to(site).as_posix()).parent
    text = page.read_text(encoding="utf-8")
    return [os.path.normpath(str(here / url)) for url in _LOADED.findall(text)]


@pytest.mark.slow
def test_rank_pages_load_the_theme_files_at_the_jobs_root(two_ranks: Path) -> None:
    site = two_ranks
    files = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}
    provenance = sorted(site.glob("rank_*/provenance_tracking_*.html"))
    assert provenance, "the job's ranks have provenance pages"
    for page in [*provenance, *site.glob("rank_*/index.html"), *site.glob("diff_*/index.html")]:
        loaded = _loaded(page, site)
        # Material's stylesheet and tlsite's own (a provenance page's too): the root's copies
        assert any(p.startswith("assets/stylesheets/") for p in loaded), page
        assert any(p.startswith("assets/tlsite/") for p in loaded), page
        if page in provenance:
            assert "assets/tlsite/provenance.css" in loaded
            assert "assets/tlsite/provenance.js" in loaded
        missing = [p for p in loaded if p not in files]
        assert missing == [], (page, missing)
    # the theme's files, its 404 page and the sitemap are the root's alone
    below = {name for name in files if "/" in name and name.split("/", 1)[0] != "assets"}
    assert not [n for n in below if re.search(r"/(assets/|404\.html|sitemap\.xml)", n)]
    assert {"404.html", "sitemap.xml", "sitemap.xml.gz"} <= files


def _entries(archive: Path) -> dict[str, bytes]:
    """A zip's entries by their path below its top folder (named after the site)."""
    with zipfile.ZipFile(archive) as bundle:
        return {name.split("/", 1)[1]: bundle.read(name) for name in bundle.namelist()}


def _tree(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TLSITE_BASE_REV"), reason="TLSITE_BASE_REV not set")
@pytest.mark.parametrize("job", REAL_JOBS, ids=lambda p: p.name)
def test_a_real_jobs_site_and_zip_are_the_base_revisions(job: Path, tmp_path: Path) -> None:
    if not job.is_dir():
        pytest.skip("shared corpus not available")
    base = tmp_path / "base" / "tlsite"
    base.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "archive", os.environ["TLSITE_BASE_REV"]],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    ours = _build(job, tmp_path / "new" / "site", PROJECT_ROOT.parent)
    theirs = _build(job, tmp_path / "old" / "site", base.parent)
    ours_files, their_files = _tree(ours), _tree(theirs)
    assert ours_files.keys() == their_files.keys()
    assert [name for name in ours_files if ours_files[name] != their_files[name]] == []
    assert _entries(ours.with_name("site.zip")) == _entries(theirs.with_name("site.zip"))

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
from pathlib import Path, PurePosixPath

import pytest
from corpus import PROJECT_ROOT, TLPARSE_INPUTS, TORCH_213
from revisions import assert_built_as_by_base, cli_build, needs_base_rev

TWO_RANKS = TORCH_213 / "multi_rank"
REAL_JOBS = [TWO_RANKS, *(TLPARSE_INPUTS / f"multi_rank_{name}" for name in ("logs", "runtime"))]

#: A stylesheet or script a page loads, relative to the page.
_LOADED = re.compile(r'<(?:link[^>]*\bhref|script[^>]*\bsrc)="([^":]+\.(?:css|js))"')


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not TWO_RANKS.is_dir():
        pytest.skip("shared corpus not available")
    return cli_build(TWO_RANKS, tmp_path_factory.mktemp("job") / "site", PROJECT_ROOT.parent)


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


@pytest.mark.slow
@needs_base_rev
@pytest.mark.parametrize("job", REAL_JOBS, ids=lambda p: p.name)
def test_a_real_jobs_site_and_zip_are_the_base_revisions(job: Path, tmp_path: Path) -> None:
    if not job.is_dir():
        pytest.skip("shared corpus not available")
    assert_built_as_by_base(job, tmp_path)

"""A real 16-rank DDP job built with less work per job, the same site (issue #19).

``tests/fixtures/traces/ddp16/ddp16.7z`` is a real torch 2.13 DDP job whose ranks diverged, so
its site has comparison sites of rank pairs (``diff_<a>_<b>/``) besides a report per rank.
Checked here: a rank in several pairs is read once for all of them, and the sites are the same
bytes as when every pair read its ranks again; a process that builds several sites (a job's
ranks, its comparison sites) reads and compiles the theme's templates once.

With ``TLSITE_BASE_REV`` set to a revision of this repository, the slow test also builds the
job with that revision and checks that the site and the zip are the same, file for file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES
from revisions import assert_built_as_by_base, needs_base_rev, site_files

from tlsite.core import load_source
from tlsite.core.analysis.diff import diff_traces
from tlsite.mkdocs_plugin import diff_build, site_config
from tlsite.mkdocs_plugin.diff_build import build_diff_site, build_rank_diffs

JOB = FIXTURE_TRACES / "ddp16" / "ddp16.7z"
#: Pairs sharing ranks, as a job whose largest group's first rank is compared with several
#: other groups gets them (rank 6 is in three pairs, rank 0 in two).
PAIRS = [(0, 3), (6, 0), (6, 1), (6, 5)]


@pytest.mark.slow
def test_a_rank_in_several_pairs_is_read_once_and_the_sites_are_the_same(
    ddp16_job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = {log.rank: log for log in ddp16_job.logs}
    # every pair read afresh, as each pair's site was built before
    fresh = tmp_path / "fresh"
    for a, b in PAIRS:
        before, after = load_source(logs[a]), load_source(logs[b])
        try:
            build_diff_site(diff_traces(before, after), fresh / f"diff_{a}_{b}", in_job=True)
        finally:
            before.close()
            after.close()
    read: Counter[int] = Counter()

    def counted(source, **options):
        read[source.rank] += 1
        return load_source(source, **options)

    monkeypatch.setattr(diff_build, "diverging_pairs", lambda report: list(PAIRS))
    monkeypatch.setattr(diff_build, "load_source", counted)
    shared = tmp_path / "shared"
    shared.mkdir()
    links = build_rank_diffs(ddp16_job, report=None, site_dir=shared)  # type: ignore[arg-type]
    assert read == {rank: 1 for pair in PAIRS for rank in pair}
    assert all(f"diff_{a}_{b}/index.html" in links for a, b in PAIRS)
    assert site_files(shared) == site_files(fresh)


@pytest.mark.slow
def test_a_second_site_in_the_process_compiles_no_theme_template(
    ddp16_job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = {log.rank: log for log in ddp16_job.logs}
    before, after = load_source(logs[0]), load_source(logs[3])
    try:
        diff = diff_traces(before, after)
        monkeypatch.setattr(site_config, "_COMPILED", {})
        build_diff_site(diff, tmp_path / "first", in_job=True)
        found: list[str] = []
        get_source = site_config._ThemeLoader.get_source

        def counted(self, environment, name):
            found.append(name)
            return get_source(self, environment, name)

        monkeypatch.setattr(site_config._ThemeLoader, "get_source", counted)
        build_diff_site(diff, tmp_path / "second", in_job=True)
    finally:
        before.close()
        after.close()
    assert found == []  # every template of the page came compiled from the first site
    assert site_files(tmp_path / "second") == site_files(tmp_path / "first")


@pytest.mark.slow
@needs_base_rev
def test_the_real_jobs_site_and_zip_are_the_base_revisions(tmp_path: Path) -> None:
    assert_built_as_by_base(JOB, tmp_path)

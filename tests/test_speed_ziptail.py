"""What the zip worker leaves for the end of a build (the wait after the last page).

The renderer hands the bundle the list of tlparse's artifact copies its compile pages show in
full (the bundle no longer reads every compile page again to find them), and the worker
deflates the input's copies (``raw.log``, ``raw.jsonl``) while the pages are built, into a side
file whose entries go into the zip at the end if they fit: the same archive, byte for byte.
On real traces: the first compile ids of a torch 2.6 storm and a two-rank torch 2.13 DDP job.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from corpus import TORCH_213
from site_copies import copies_linked, deflated_now

import tlsite.core.bundle as bundle
from tlsite import __version__
from tlsite.cli import build

STORM = Path(__file__).parent / "fixtures" / "traces" / "zipstorm" / "zipstorm.log"
JOB = TORCH_213 / "multi_rank"
INPUTS = ("raw.log", "raw.jsonl")


@pytest.fixture(scope="module")
def storm_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(str(STORM), tmp_path_factory.mktemp("storm") / "storm", bundle="none").site


def _left_out(site: Path) -> dict[str, str]:
    return bundle.left_out_of_zip(site)


def _entries(archive: Path) -> list[str]:
    with zipfile.ZipFile(archive) as opened:
        return [name.split("/", 1)[1] for name in opened.namelist()]


def test_a_build_over_the_limit_leaves_out_the_copies_its_compile_pages_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copies left out are those the pages mark as copies of the text they show, from
    the renderer's list (the limit is lowered in this process: a small trace's zip is
    written here, not by the worker)."""
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", 1)
    outcome = build(str(STORM), tmp_path / "storm", bundle="zip")
    assert outcome.bundle is not None
    copies = copies_linked(outcome.site)
    assert len(copies) > 40
    left = _left_out(outcome.site)
    assert set(left) == {*copies, *INPUTS}
    names = set(_entries(outcome.bundle))
    assert not names & set(left)
    every_page = {p.relative_to(outcome.site).as_posix() for p in outcome.site.rglob("*.html")}
    metrics = {name for name in every_page & set(left) if "compilation_metrics_" in name}
    assert every_page - metrics <= names  # but tlparse's pointers to a compile page's table


def _worker_zip(site: Path, dest: Path) -> tuple[list[str], list[str]]:
    """The zip the worker writes (its steps, in this process) with every file handed over as
    the build does; the files deflated ahead, and those the end deflated."""
    tmp = dest.with_name(dest.name + ".part")
    catalog = bundle._Catalog(bundle._catalog_path(tmp))
    level = bundle._site_level(site, bundle.site_listing(site))  # as without a worker
    ahead = bundle._Ahead(bundle._ahead_path(tmp), level)
    try:
        with bundle._Zip(tmp, "w", catalog, level) as archive:
            for name in bundle.site_listing(site):
                bundle._add_site_file(archive, site, name, catalog.digests, ahead)
        fields = {"trace": "t.log", "version": __version__, "extra": {}}
        copies = copies_linked(site)
        with deflated_now() as at_the_end:
            deflater = bundle._Deflater(site)
            try:
                bundle._complete_zip(
                    site, tmp, catalog, "a", **fields, copies=copies, ahead=ahead, deflater=deflater
                )
            finally:
                deflater.close()
        taken = [name for name in INPUTS if name in ahead]
    finally:
        catalog.close()
        ahead.close()
    os.replace(tmp, dest)
    return taken, at_the_end


def _reference(site: Path, dest: Path) -> dict[str, str]:
    """The zip of the finished site written at once (no worker); what it left out."""
    fields = {"trace": "t.log", "version": __version__, "copies": copies_linked(site)}
    made, _ = bundle.write_bundle(site, "zip", **fields)
    assert made is not None
    made.replace(dest)
    return _left_out(site)


def test_the_input_copies_are_deflated_while_the_site_is_built_not_after_it(
    storm_site: Path, tmp_path: Path
) -> None:
    """The biggest files of a storm's site, deflated after the last page, were most of the
    wait at the end of the build: now they are deflated as they are handed over, and the
    archive is the same."""
    left = _reference(storm_site, tmp_path / "reference.zip")
    assert left == {}  # everything fits: raw.log and raw.jsonl too
    taken, at_the_end = _worker_zip(storm_site, tmp_path / "worker.zip")
    assert taken == list(INPUTS)
    assert not set(at_the_end) & set(INPUTS)
    assert (tmp_path / "worker.zip").read_bytes() == (tmp_path / "reference.zip").read_bytes()
    assert _entries(tmp_path / "worker.zip")[-2:] == ["raw.log", "raw.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference.zip", "worker.zip"]


@pytest.mark.parametrize("bet", [True, False])
def test_input_copies_that_may_not_fit_are_decided_as_without_a_worker(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bet: bool
) -> None:
    """Under a limit ``raw.log`` does not fit, the archive and what it left out are those
    written without a worker, whether ``raw.log`` was deflated ahead (a limit over twice the
    input's copies) or not (under it: too big to bet on)."""
    # one deflate level (the limits below are measured at it)
    monkeypatch.setattr(bundle, "FAST_LEVEL", bundle.SMALL_LEVEL)
    whole = _reference(storm_site, tmp_path / "whole.zip")
    assert whole == {}
    with zipfile.ZipFile(tmp_path / "whole.zip") as archive:
        inputs = sum(i.compress_size for i in archive.infolist() if i.filename.endswith(INPUTS))
    size = (tmp_path / "whole.zip").stat().st_size
    limit = size - inputs // 2 if bet else inputs * 9 // 5
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", limit)
    left = _reference(storm_site, tmp_path / "reference.zip")
    taken, _ = _worker_zip(storm_site, tmp_path / "worker.zip")
    assert _left_out(storm_site) == left
    assert "raw.log" in left
    assert ("raw.log" in taken) == bet
    assert (tmp_path / "worker.zip").read_bytes() == (tmp_path / "reference.zip").read_bytes()
    if bet:  # the pages fit (under the other limit they do not: every page stays)
        assert (tmp_path / "worker.zip").stat().st_size <= limit


@pytest.mark.slow
def test_a_jobs_zip_leaves_out_every_ranks_copies_from_its_ranks_renderers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank is rendered in a helper process: its list of copies comes back with it."""
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", 1)
    outcome = build(str(JOB), tmp_path / "job", bundle="zip")
    assert outcome.bundle is not None
    copies = copies_linked(outcome.site)
    assert {name.split("/", 1)[0] for name in copies} == {"rank_0", "rank_1"}
    inputs = {f"rank_{rank}/{name}" for rank in (0, 1) for name in INPUTS}
    assert set(_left_out(outcome.site)) == {*copies, *inputs}
    assert not set(_entries(outcome.bundle)) & {*copies, *inputs}

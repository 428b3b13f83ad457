"""The zip written while a big trace's site is built deflates tlparse's files of each compile's
folder as they are handed over, not after the last page (when only the zip's worker is left
running): after the last page it deflates no file it was handed. The zip keeps what it kept:
every file of the site, or, over GitHub's limit, all but the copies its manifest names.

On a real trace: the first compile ids of a torch 2.6 storm (tests/fixtures/traces/zipstorm),
its files handed to the worker's service (run in a thread, so that a lowered limit holds) in
the order a build hands them over: tlparse's files before the pages.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from site_copies import copies_linked, zip_as_the_worker_late

import tlsite.core.bundle as bundle
from tlsite.cli import build

STORM = Path(__file__).parent / "fixtures" / "traces" / "zipstorm" / "zipstorm.log"


@pytest.fixture(scope="module")
def storm_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(str(STORM), tmp_path_factory.mktemp("storm") / "storm", bundle="none").site


def _worker_zip(site: Path, dest: Path) -> list[str]:
    """Write the site's zip as the build's worker does, for an input as big as the site's
    ``raw.log``; return the site files it deflated after the last page was handed over."""
    return zip_as_the_worker_late(site, dest, (site / bundle.RAW_LOG).stat().st_size)


def _entries(archive: Path) -> set[str]:
    """The archive's files by their path in the site, after ``unzip -t`` checked it and
    every entry was checked to hold its file's bytes."""
    if shutil.which("unzip"):
        tested = subprocess.run(["unzip", "-tq", archive], capture_output=True, text=True)
        assert tested.returncode == 0, tested.stdout + tested.stderr
    names = set()
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            site_name = info.filename.split("/", 1)[1]
            names.add(site_name)
    return names


def _check_bytes(archive: Path, site: Path) -> None:
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            data = opened.read(info)
            assert data == (site / info.filename.split("/", 1)[1]).read_bytes(), info.filename


def test_the_worker_deflates_a_compiles_files_before_the_last_page_and_keeps_every_file(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = [
        name
        for name in bundle.site_listing(storm_site)
        if bundle._deferred(name)
        and bundle.input_copy_kind(name) is None
        and (storm_site / name).stat().st_size >= bundle._AHEAD_MIN_BYTES
    ]
    assert big, "the trace has no artifact file big enough to be deflated ahead"
    late = _worker_zip(storm_site, tmp_path / "worker.zip")
    # after the last page only the manifest (written then) and small files are deflated
    assert [name for name in late if name in big] == []
    assert bundle.MANIFEST_NAME in late
    assert bundle.left_out_of_zip(storm_site) == {}
    every_file = {*bundle.site_listing(storm_site), bundle.MANIFEST_NAME}
    assert _entries(tmp_path / "worker.zip") == every_file  # every page, every copy
    _check_bytes(tmp_path / "worker.zip", storm_site)


def test_over_the_limit_the_copies_deflated_ahead_are_left_out_and_the_manifest_says_so(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a limit that the zip passes with tlparse's copies but not without them, the
    worker's zip leaves out exactly the copies (and the input's copies), as a zip of the
    finished site does, and holds every other file (one level throughout: the lowered limit
    would raise the fast one)."""
    monkeypatch.setattr(bundle, "FAST_LEVEL", bundle.SMALL_LEVEL)
    copies = copies_linked(storm_site)
    _worker_zip(storm_site, tmp_path / "all.zip")
    with zipfile.ZipFile(tmp_path / "all.zip") as archive:
        optional = sum(
            info.compress_size + 2 * len(info.filename) + 76
            for info in archive.infolist()
            if info.filename.split("/", 1)[1] in copies
            or bundle.input_copy_kind(info.filename.split("/", 1)[1])
        )
    limit = (tmp_path / "all.zip").stat().st_size - optional + 1000
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", limit)
    _worker_zip(storm_site, tmp_path / "worker.zip")
    left_out = bundle.left_out_of_zip(storm_site)
    inputs = [n for n in bundle.site_listing(storm_site) if bundle.input_copy_kind(n)]
    assert set(left_out) == {*copies, *inputs}
    assert all("25 MB" in why for why in left_out.values())
    assert (tmp_path / "worker.zip").stat().st_size <= limit
    every_file = {*bundle.site_listing(storm_site), bundle.MANIFEST_NAME}
    assert _entries(tmp_path / "worker.zip") == every_file - set(left_out)
    _check_bytes(tmp_path / "worker.zip", storm_site)

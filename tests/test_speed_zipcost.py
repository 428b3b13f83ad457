"""The zip bundle's deflate level follows the attachment limit: a fast level where the
zip stays under GitHub's limit with every file at it (a smaller zip gains a user nothing, and
a small level took twice the CPU), a small level where it may not.

On real traces: a small torch 2.13 trace (fast), the first compile ids of a torch 2.6 storm
with the limit lowered under its fast zip (the small level, every file still in).
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import pytest
from corpus import TORCH_213
from site_copies import copies_linked, zip_as_the_worker
from zlib_ng import zlib_ng

import tlsite.core.bundle as bundle
from tlsite import __version__
from tlsite.cli import build

FAST, DEFAULT = bundle.FAST_LEVEL, bundle.SMALL_LEVEL
SMALL = TORCH_213 / "simple" / "dedicated_log_torch_trace_8x1quyig.log"
STORM = Path(__file__).parent / "fixtures" / "traces" / "zipstorm" / "zipstorm.log"


def _deflated_size(data: bytes, level: int) -> int:
    """What ``data`` deflates to at ``level`` as a zip entry (raw deflate, as the bundle's)."""
    packer = zlib_ng.compressobj(level, zlib_ng.DEFLATED, -15)
    return len(packer.compress(data) + packer.flush())


def _levels(archive: Path, site: Path) -> set[int]:
    """The levels the archive's entries were deflated at (each entry's data checked against
    its file deflated at the fast and the small level), after checking every entry holds
    its site file's bytes."""
    found = set()
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            data = opened.read(info)
            assert data == (site / info.filename.split("/", 1)[1]).read_bytes(), info.filename
            if info.filename.endswith("/" + bundle.MANIFEST_NAME) or len(data) < 4096:
                continue  # tiny files deflate alike at every level
            fast = _deflated_size(data, FAST)
            default = _deflated_size(data, DEFAULT)
            if fast != default:
                assert info.compress_size in (fast, default), info.filename
                found.add(FAST if info.compress_size == fast else DEFAULT)
    return found


def test_a_small_traces_zip_is_deflated_fast_and_holds_every_file_of_the_site(
    tmp_path: Path,
) -> None:
    outcome = build(str(SMALL), tmp_path / "site", bundle="zip")
    assert outcome.bundle is not None
    with zipfile.ZipFile(outcome.bundle) as archive:
        assert archive.testzip() is None
        names = {name.split("/", 1)[1] for name in archive.namelist()}
    files = {p.relative_to(outcome.site).as_posix() for p in outcome.site.rglob("*") if p.is_file()}
    assert names == files  # every file, the input's copies and the manifest included
    assert bundle.left_out_of_zip(outcome.site) == {}
    assert _levels(outcome.bundle, outcome.site) == {FAST}


@pytest.fixture(scope="module")
def storm_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(str(STORM), tmp_path_factory.mktemp("storm") / "storm", bundle="none").site


def _whole_zip(site: Path, dest: Path) -> int:
    """The size of the site's zip written at once (no worker)."""
    fields = {"trace": "t.log", "version": __version__, "copies": copies_linked(site)}
    made, size = bundle.write_bundle(site, "zip", **fields)
    assert made is not None
    made.replace(dest)
    return size


@pytest.mark.slow
def test_a_zip_that_would_pass_the_limit_fast_is_deflated_smaller_with_every_file(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a limit the storm's fast zip passes but its default-level zip does not, both
    ways of writing it keep every file (none left out) under the limit: at once, from the
    finished site's estimate; and while the site is built, from an input whose size the
    build undersold (as a gzipped log's), once the copy of the log shows its true size."""
    fast = _whole_zip(storm_site, tmp_path / "fast.zip")
    assert _levels(tmp_path / "fast.zip", storm_site) == {FAST}
    monkeypatch.setattr(bundle, "FAST_LEVEL", bundle.SMALL_LEVEL)
    small = _whole_zip(storm_site, tmp_path / "small.zip")
    monkeypatch.undo()
    assert small < fast * 0.9
    limit = (fast + small) // 2
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", limit)
    every_file = {*bundle.site_listing(storm_site), bundle.MANIFEST_NAME}

    at_once = _whole_zip(storm_site, tmp_path / "at_once.zip")
    assert bundle.left_out_of_zip(storm_site) == {}
    assert at_once <= limit
    assert _levels(tmp_path / "at_once.zip", storm_site) == {DEFAULT}

    zip_as_the_worker(storm_site, tmp_path / "worker.zip", input_size=1)
    assert bundle.left_out_of_zip(storm_site) == {}
    assert (tmp_path / "worker.zip").stat().st_size <= limit
    with zipfile.ZipFile(tmp_path / "worker.zip") as archive:
        assert {name.split("/", 1)[1] for name in archive.namelist()} == every_file
    assert DEFAULT in _levels(tmp_path / "worker.zip", storm_site)


def _stdlib_deflated_size(data: bytes, level: int) -> int:
    """What the standard library's zlib (zipfile's own) deflates ``data`` to at ``level``."""
    packer = zlib.compressobj(level, zlib.DEFLATED, -15)
    return len(packer.compress(data) + packer.flush())


def test_the_zip_is_smaller_than_the_standard_librarys_zlib_makes_it_with_every_byte_kept(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zip a user attaches holds every file's exact bytes and takes fewer bytes than
    zipfile's own deflate made at the levels a zip used before (zlib's 1 where it fits
    fast, its 6 where it may not), however it is written."""
    for stdlib_level in (1, 6):
        if stdlib_level == 6:
            monkeypatch.setattr(bundle, "FAST_LEVEL", bundle.SMALL_LEVEL)
        _whole_zip(storm_site, tmp_path / f"{stdlib_level}.zip")
        ours = theirs = 0
        with zipfile.ZipFile(tmp_path / f"{stdlib_level}.zip") as archive:
            assert archive.testzip() is None
            for info in archive.infolist():
                data = archive.read(info)
                assert data == (storm_site / info.filename.split("/", 1)[1]).read_bytes()
                ours += info.compress_size
                theirs += _stdlib_deflated_size(data, stdlib_level)
        assert ours < theirs, stdlib_level

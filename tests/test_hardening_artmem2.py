"""Issue #20, point 9: peak memory is bounded by the largest page, not by how many files or
payloads a trace makes. A trace of a million artifacts is a site of a million files: the zip
bundle's directory and digests, and the payload store's index, must not grow with them."""

from __future__ import annotations

import json
import os
import tracemalloc
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from corpus import TORCH_213
from site_copies import copies_linked

from tlsite import __version__
from tlsite.cli import BuildOutcome, build
from tlsite.core import bundle, store
from tlsite.core.bundle import MANIFEST_NAME, ZipWriter, input_copy_kind, manifest_json
from tlsite.core.store import PayloadStore

SIMPLE_213 = next(TORCH_213.glob("simple/*.log"))


def _peak(work: Callable[[], object]) -> int:
    """The most Python memory ``work`` held at once, in bytes."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _site_of(tmp: Path, count: int) -> Path:
    """A site folder of ``count`` small files in one folder (one compile's artifacts)."""
    site = tmp / f"site{count}"
    folder = site / "-_0_0_0"
    folder.mkdir(parents=True)
    (site / "index.html").write_text("<p>report</p>")
    for number in range(count):
        (folder / f"art_{number}_{number}.txt").write_text(f"payload {number}\n")
    return site


def _zip_peak(site: Path) -> int:
    def work() -> None:
        writer = ZipWriter(site, site.with_name(site.name + ".zip"), background=False)
        writer.finish(trace="t.log", version="0", extra=None)

    return _peak(work)


@pytest.mark.slow
def test_zipping_four_times_the_files_takes_no_more_memory(tmp_path: Path) -> None:
    """The zip's central directory, each file's digest (for the manifest) and the site's
    listing wait on disk: the peak grows by under 100 bytes per file from 6,000 to 24,000
    files (before, every one kept a ``ZipInfo``, a digest and its name: over a kilobyte per
    file). Both sizes are past what a zip allocates once or in batches of a few thousand
    (measured from smaller sites, that step read as a slope and failed by run order)."""
    small = _zip_peak(_site_of(tmp_path, 6_000))
    big = _zip_peak(_site_of(tmp_path, 24_000))
    assert big - small < 100 * 18_000, (small, big)  # under 100 bytes per extra file
    with zipfile.ZipFile(tmp_path / "site24000.zip") as archive:
        names = archive.namelist()
    assert len(names) == 24_002  # every file, the index and the manifest
    assert names[-1] == f"site24000/{MANIFEST_NAME}"
    manifest = json.loads((tmp_path / "site24000" / MANIFEST_NAME).read_text())
    assert manifest["file_count"] == 24_001


def test_the_store_recognises_recent_payloads_within_a_bounded_index(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Four times the distinct payloads, the same index memory; a payload put again soon after
    is still stored once, and one put again long after reads back the same."""
    monkeypatch.setattr(store, "RECOGNISED", 1_000, raising=False)

    def fill(count: int) -> PayloadStore:
        payloads = PayloadStore(tmp_path / f"store{count}", owned=True)
        for number in range(count):
            payloads.put(f"payload {number}")
        return payloads

    stores: list[PayloadStore] = []
    small = _peak(lambda: stores.append(fill(5_000)))
    big = _peak(lambda: stores.append(fill(20_000)))
    assert big - small < 100 * 15_000, (small, big)  # before: ~220 bytes per payload
    payloads = stores[-1]
    recent = payloads.put("payload 19999")
    assert recent == payloads.put("payload 19999")  # recognised: not stored again
    again = payloads.put("payload 0")
    assert payloads.read(again) == "payload 0"
    for kept in stores:
        kept.close()


# -- the same bytes as before -------------------------------------------------------------------


def _reference_zip(site: Path, dest: Path, early: Iterable[str] = (), level: int = 6) -> None:
    """The archive as zipfile writes it with every entry in memory (the code before the
    catalog): the files handed over early in that order, the others in path order, the
    compile folders' files that are not copies of what a page shows, then the manifest, then
    the copies (all kept: a small site), at ``level``."""
    listing = bundle.site_listing(site)
    copies = [name for name in listing if name in set(copies_linked(site))]
    done: set[str] = set()
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as archive:
        for name in [*early, *listing]:
            if name in done or input_copy_kind(name) is not None or bundle._deferred(name):
                continue
            done.add(name)
            bundle._add_to_zip(archive, site / name, f"{site.name}/{name}")
        for name in listing:
            if bundle._deferred(name) and name not in copies and input_copy_kind(name) is None:
                bundle._add_to_zip(archive, site / name, f"{site.name}/{name}")
        bundle._add_to_zip(archive, site / MANIFEST_NAME, f"{site.name}/{MANIFEST_NAME}")
        for name in copies:
            bundle._add_to_zip(archive, site / name, f"{site.name}/{name}")
        for kind in bundle.INPUT_COPIES:
            for name in listing:
                if input_copy_kind(name) == kind:
                    bundle._add_to_zip(archive, site / name, f"{site.name}/{name}")


@pytest.fixture(scope="module")
def real_site(tmp_path_factory: pytest.TempPathFactory) -> BuildOutcome:
    return build(str(SIMPLE_213), tmp_path_factory.mktemp("real") / "report", bundle="none")


@pytest.mark.parametrize("background", [False, True])
def test_a_real_sites_zip_and_manifest_are_the_bytes_zipfile_writes_in_memory(
    real_site: BuildOutcome, tmp_path: Path, background: bool
) -> None:
    site = real_site.site
    listing = bundle.site_listing(site)
    assert any(input_copy_kind(name) for name in listing)  # raw.log and raw.jsonl go last
    expected_manifest = manifest_json(site, trace="t.log", version=__version__)
    writer = ZipWriter(site, tmp_path / "new.zip", background=background)
    early = list(reversed(listing[::3])) if background else []  # build order, not path order
    for name in early:
        writer.add(os.path.join(site, name))
    writer.finish(trace="t.log", version=__version__, extra=None, copies=copies_linked(site))
    assert (site / MANIFEST_NAME).read_bytes() == expected_manifest
    # without a worker, the level the finished site calls for; a worker not told the
    # input's size deflates at the default level
    level = bundle.SMALL_LEVEL if background else bundle._site_level(site, listing)
    _reference_zip(site, tmp_path / "reference.zip", early, level)
    assert (tmp_path / "new.zip").read_bytes() == (tmp_path / "reference.zip").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.zip", "reference.zip"]


@pytest.mark.slow
def test_the_summary_after_a_build_reads_the_manifests_head_not_its_list_of_files(
    tmp_path: Path,
) -> None:
    """What the terminal says was left out of the zip comes from the manifest's summary: a
    manifest of four times the files takes no more memory to ask (before, the whole manifest
    was parsed, a dict per file: half a gigabyte at a million artifacts)."""
    why = {"raw.log": "too big"}
    left = {"raw.log": {"why": "too big", "files": ["raw.log"]}}  # as a zip's manifest says
    peaks = []
    for count in (1_500, 6_000):
        site = _site_of(tmp_path, count)
        bundle.write_bundle(
            site, "none", trace="t.log", version="0", extra={"left_out_of_zip": left}
        )
        assert bundle.left_out_of_zip(site) == why
        peaks.append(_peak(lambda site=site: bundle.left_out_of_zip(site)))
    assert peaks[1] - peaks[0] < 20 * 4_500, peaks
    (tmp_path / "site1500" / MANIFEST_NAME).write_text("{not json")
    assert bundle.left_out_of_zip(tmp_path / "site1500") == {}


@pytest.mark.slow
def test_a_site_without_a_zip_writes_its_manifest_in_the_same_memory_for_four_times_the_files(
    tmp_path: Path,
) -> None:
    """``--bundle none`` (and ``7z``) write the manifest from the catalog too (before, the
    listing, a digest per file and the manifest's whole text were in memory at once)."""
    peaks = []
    fields = {"trace": "t.log", "version": "0", "extra": {"redaction": "none"}}
    for count in (1_500, 6_000):
        site = _site_of(tmp_path, count)
        expected = manifest_json(site, **fields)  # type: ignore[arg-type]
        peaks.append(_peak(lambda site=site: bundle.write_bundle(site, "none", **fields)))
        assert (site / MANIFEST_NAME).read_bytes() == expected
    assert peaks[1] - peaks[0] < 100 * 4_500, peaks
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site1500", "site6000"]

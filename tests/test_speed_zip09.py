"""The zip's entries deflated on threads (issue #19, ``zip09``).

zlib-ng's deflate, SHA-256 and file reads release the GIL: the zip's helper process deflates
two pages at once, and a small trace's build hands each final file to threads of its own
process, which deflate it while the rest of the site is written. Either way the entries go
into the archive in the order they did before. The tests check that two entries are in
flight at once, that a small build's files are begun before the bundle is written and
deflated once, and that the archive is byte for byte what one written from the finished site
is (the base-revision tests compare it with the base's); no test measures time
(``bench/ab_build.py`` does).
"""

from __future__ import annotations

import collections
import hashlib
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
from site_copies import copies_linked, zip_as_the_worker

from tlsite.cli import build, example_trace
from tlsite.core import bundle
from tlsite.core.bundle import MANIFEST_NAME, ZipWriter, write_bundle


def _pages(tmp: Path, count: int = 12) -> Path:
    """A site of ``count`` pages of some size (none a copy the zip may leave out)."""
    site = tmp / "site"
    for number in range(count):
        page = site / f"page_{number}" / "index.html"
        page.parent.mkdir(parents=True)
        page.write_text("".join(f"<p>line {line} of page {number}</p>\n" for line in range(4000)))
    return site


def test_the_zip_helper_deflates_two_pages_at_once_into_the_same_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper's service (run in a thread here) has a second page begun while the first is
    being deflated: the spy holds the first deflate until another one starts (without
    threads it would wait for nothing). The archive is the one it writes a page at a time."""
    site = _pages(tmp_path)
    original = bundle._deflate_entry
    meet = threading.Barrier(2, timeout=60)  # a deadlock guard, not a measure of time
    met: list[bool] = []

    def spied(path: str, name: str, level: int | None, *rest: Any) -> Any:
        if level is not None and not met:
            try:
                meet.wait()
                met.append(True)
            except threading.BrokenBarrierError:
                met.append(False)
        return original(path, name, level, *rest)

    monkeypatch.setattr(bundle, "_deflate_entry", spied)
    zip_as_the_worker(site, tmp_path / "threads.zip", input_size=1 << 20)
    assert met and met[0], "no second page was deflated while the first one was"

    monkeypatch.setattr(bundle, "_deflate_entry", original)
    monkeypatch.setattr(bundle, "ZIP_THREADS", 1)
    monkeypatch.setattr(bundle, "_WINDOW", 0)
    (site / MANIFEST_NAME).unlink()
    zip_as_the_worker(site, tmp_path / "serial.zip", input_size=1 << 20)
    assert (tmp_path / "threads.zip").read_bytes() == (tmp_path / "serial.zip").read_bytes()


def test_a_small_builds_files_are_deflated_as_they_become_final_and_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below the size of a zip helper, each file the build hands over (``raw.log`` first,
    then the pages) is begun on the zip's threads before the bundle is written, and no file
    is deflated twice; the archive is byte for byte what the finished site gives."""
    begun_before_finish: list[str] = []
    deflated: collections.Counter[str] = collections.Counter()
    finishing: list[bool] = []
    early, deflate, finish = bundle._Deflater.early, bundle._deflate_entry, ZipWriter.finish

    def spied_early(self: Any, name: str, *rest: int) -> None:
        if not finishing:
            begun_before_finish.append(name)
        early(self, name, *rest)

    def spied_deflate(path: str, name: str, level: int | None, *rest: Any) -> Any:
        if level is not None:
            deflated[name.split("/", 1)[1]] += 1
        return deflate(path, name, level, *rest)

    def spied_finish(self: ZipWriter, **fields: Any) -> int:
        finishing.append(True)
        return finish(self, **fields)

    monkeypatch.setattr(bundle._Deflater, "early", spied_early)
    monkeypatch.setattr(bundle, "_deflate_entry", spied_deflate)
    monkeypatch.setattr(ZipWriter, "finish", spied_finish)
    outcome = build(str(example_trace()), tmp_path / "report", bundle="zip")
    assert outcome.bundle is not None
    assert "raw.log" in begun_before_finish
    assert "index.html" in begun_before_finish
    assert len(begun_before_finish) > 50  # the pages and tlparse's files
    assert [name for name, times in deflated.items() if times > 1] == []
    assert set(begun_before_finish) <= set(deflated)  # each one taken as begun

    monkeypatch.undo()
    again = tmp_path / "again" / "report"
    again.parent.mkdir()
    (outcome.site).rename(again)
    write_bundle(again, "zip", **_manifest_fields(again), copies=copies_linked(again))
    assert again.with_name("report.zip").read_bytes() == outcome.bundle.read_bytes()


def _manifest_fields(site: Path) -> dict[str, Any]:
    """The fields the build gave the bundle's manifest (read back from it)."""
    summary = bundle._manifest_summary(site)
    extra = {
        key: value
        for key, value in summary.items()
        if key not in {"generator", "trace", "note", "file_count", "total_size"}
    }
    return {"trace": summary["trace"], "version": summary["generator"].split()[1], "extra": extra}


@pytest.mark.parametrize(
    ("first", "then"),
    [("first", "second, longer"), ("first!", "SECOND")],  # the same size is not the same file
)
def test_a_file_handed_over_and_changed_after_goes_in_as_it_ends(
    tmp_path: Path, first: str, then: str
) -> None:
    """A file handed over early that then changes is deflated again at the end: the zip
    holds what the site holds, and the manifest its digest."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "a.html").write_text(first)
    writer = ZipWriter(site, tmp_path / "site.zip", background=False, input_size=100)
    writer.add(site / "a.html")
    assert writer._deflater is not None
    writer._deflater.start("a.html", None).result()  # deflated as it was first
    (site / "a.html").write_text(then)
    writer.finish(trace="t.log", version="0", extra=None)
    with zipfile.ZipFile(tmp_path / "site.zip") as archive:
        assert archive.read("site/a.html") == then.encode()
        manifest = archive.read(f"site/{MANIFEST_NAME}").decode()
    assert hashlib.sha256(then.encode()).hexdigest() in manifest


def test_a_small_build_holds_at_most_so_many_bytes_of_early_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log small on disk may unpack to a big site (gzip): past ``_EARLY_BYTES`` of files
    handed over, the rest is deflated at the end, not held in memory; the same archive."""
    handed: list[int] = []
    early = bundle._Deflater.early

    def spied_early(self: Any, name: str, level: int, size: int) -> None:
        handed.append(size)
        early(self, name, level, size)

    monkeypatch.setattr(bundle, "_EARLY_BYTES", 200_000)
    monkeypatch.setattr(bundle._Deflater, "early", spied_early)
    outcome = build(str(example_trace()), tmp_path / "report", bundle="zip")
    assert outcome.bundle is not None
    assert handed and sum(handed) <= 200_000
    assert sum(p.stat().st_size for p in outcome.site.rglob("*") if p.is_file()) > 1_000_000

    monkeypatch.undo()
    again = tmp_path / "again" / "report"
    again.parent.mkdir()
    outcome.site.rename(again)
    write_bundle(again, "zip", **_manifest_fields(again), copies=copies_linked(again))
    assert again.with_name("report.zip").read_bytes() == outcome.bundle.read_bytes()

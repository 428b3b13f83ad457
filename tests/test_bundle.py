"""Bundles: zip (default) and 7z hold the same files plus a manifest of them."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import py7zr
import pytest
from corpus import TORCH_213

from tlsite import __version__
from tlsite.cli import BuildOutcome, build, example_trace
from tlsite.core.bundle import MANIFEST_NAME, ZipWriter, manifest_json, write_bundle

SIMPLE_213 = next(TORCH_213.glob("simple/*.log"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> BuildOutcome:
    """One built report (no bundle); each test bundles it its own way."""
    out = tmp_path_factory.mktemp("bundle") / "report"
    return build(str(SIMPLE_213), out, bundle="none")


def _zip_contents(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {n: archive.read(n) for n in archive.namelist() if not n.endswith("/")}


def _7z_contents(path: Path, tmp: Path) -> dict[str, bytes]:
    with py7zr.SevenZipFile(path, "r") as archive:
        archive.extractall(tmp)
    return {p.relative_to(tmp).as_posix(): p.read_bytes() for p in tmp.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_7z_holds_the_same_files_as_the_zip(site: BuildOutcome, tmp_path: Path) -> None:
    zipped, zip_size = write_bundle(site.site, "zip", trace="t.log", version=__version__)
    sevened, sz_size = write_bundle(site.site, "7z", trace="t.log", version=__version__)
    assert zipped == site.site.with_name("report.zip")
    assert sevened == site.site.with_name("report.7z")
    zip_files = _zip_contents(zipped)
    sz_files = _7z_contents(sevened, tmp_path / "x")
    assert zip_files.keys() == sz_files.keys()
    assert zip_files == sz_files
    assert f"report/{MANIFEST_NAME}" in zip_files
    assert (site.site / MANIFEST_NAME).read_bytes() == zip_files[f"report/{MANIFEST_NAME}"]
    assert "report/index.html" in zip_files
    assert sz_size < zip_size * 0.8, (zip_size, sz_size)  # solid LZMA2 across pages


def test_manifest_lists_every_file(site: BuildOutcome) -> None:
    manifest = json.loads(manifest_json(site.site, trace="t.log", version=__version__))
    on_disk = {
        p.relative_to(site.site).as_posix(): p
        for p in site.site.rglob("*")
        if p.is_file() and p.name != MANIFEST_NAME
    }
    listed = {f["path"]: f for f in manifest["files"]}
    assert listed.keys() == on_disk.keys()
    for name, path in on_disk.items():
        data = path.read_bytes()
        assert listed[name]["size"] == len(data)
        assert listed[name]["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["trace"] == "t.log"
    assert manifest["generator"] == f"tlsite {__version__}"
    assert manifest["file_count"] == len(on_disk)
    assert "index.html" in manifest["note"]


def test_zip_bundle_is_the_folder_and_deterministic(site: BuildOutcome) -> None:
    zipped, _ = write_bundle(site.site, "zip", trace="t.log", version=__version__)
    first = zipped.read_bytes()
    write_bundle(site.site, "zip", trace="t.log", version=__version__)
    assert zipped.read_bytes() == first
    names = set(_zip_contents(zipped))
    files = [p.relative_to(site.site).as_posix() for p in site.site.rglob("*") if p.is_file()]
    assert names == {f"report/{name}" for name in files}


def _copy_site(site: Path, tmp_path: Path) -> Path:
    copy = tmp_path / site.name
    shutil.copytree(site, copy)
    (copy / MANIFEST_NAME).unlink(missing_ok=True)
    return copy


def test_zip_written_during_the_build_holds_the_same_files(
    site: BuildOutcome, tmp_path: Path
) -> None:
    """Files handed to the worker process early, in build order, the rest swept at the end:
    the archive holds exactly what a zip of the finished folder holds."""
    copy = _copy_site(site.site, tmp_path / "streamed")
    reference = _copy_site(site.site, tmp_path / "plain")
    writer = ZipWriter(copy, copy.with_name("report.zip"), background=True)
    files = [p for p in sorted(copy.rglob("*")) if p.is_file()]
    for path in reversed(files[::2]):  # some files, in another order than the sweep
        writer.add(path)
    writer.add(files[0])  # handed over twice: stored once
    writer.finish(trace="t.log", version=__version__, extra=None)
    write_bundle(reference, "zip", trace="t.log", version=__version__)

    streamed = _zip_contents(copy.with_name("report.zip"))
    plain = _zip_contents(reference.with_name("report.zip"))
    assert sorted(streamed) == sorted(plain)
    assert streamed == plain  # same bytes, manifest (digests taken while zipping) included
    with zipfile.ZipFile(copy.with_name("report.zip")) as archive:
        names = archive.namelist()
    assert len(names) == len(set(names))
    assert sorted(p.name for p in copy.parent.iterdir()) == ["report", "report.zip"]


def test_a_file_changed_after_it_was_handed_over_is_zipped_as_it_ends(
    site: BuildOutcome, tmp_path: Path
) -> None:
    copy = _copy_site(site.site, tmp_path)
    writer = ZipWriter(copy, tmp_path / "out.zip", background=True)
    page = copy / "index.html"
    writer.add(page)
    page.write_bytes(page.read_bytes() + b"<!-- changed -->")
    writer.finish(trace="t.log", version=__version__, extra=None)
    contents = _zip_contents(tmp_path / "out.zip")
    assert contents[f"{copy.name}/index.html"].endswith(b"<!-- changed -->")
    manifest = json.loads(contents[f"{copy.name}/{MANIFEST_NAME}"])
    listed = {f["path"]: f["sha256"] for f in manifest["files"]}
    assert listed["index.html"] == hashlib.sha256(page.read_bytes()).hexdigest()


def test_a_failing_zip_worker_is_reported_and_leaves_no_partial_archive(
    site: BuildOutcome, tmp_path: Path
) -> None:
    copy = _copy_site(site.site, tmp_path)
    writer = ZipWriter(copy, tmp_path / "out.zip", background=True)
    gone = copy / "index.html"
    writer.add(gone)
    gone.unlink()  # the worker cannot read it
    with pytest.raises(OSError, match=r"index\.html"):
        writer.finish(trace="t.log", version=__version__, extra=None)
    writer.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == [copy.name]


@pytest.mark.slow
def test_cli_bundle_option(tmp_path: Path) -> None:
    out = tmp_path / "r"
    command = [sys.executable, "-m", "tlsite", "build", "--example", "-o", str(out)]
    done = subprocess.run(
        [*command, "--bundle", "7z", "--no-browser"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert out.with_name("r.7z").is_file() and not out.with_name("r.zip").exists()
    assert "GitHub issues accept .zip, not .7z" in done.stdout
    unpacked = _7z_contents(out.with_name("r.7z"), tmp_path / "x")
    manifest = json.loads(unpacked[f"r/{MANIFEST_NAME}"])
    assert manifest["trace"] == example_trace().name
    done = subprocess.run(
        [*command, "--overwrite", "--bundle", "none", "--no-browser"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Bundle:" not in done.stdout

"""The zip bundle stays attachable to a GitHub issue by leaving out the copies of the input
(``raw.log``, ``raw.jsonl``, also in each rank's folder), and every page still works from it."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from urllib.parse import unquote

import pytest
from corpus import TORCH_213
from site_copies import copies_linked

import tlsite.core.bundle as bundle
from tlsite import __version__
from tlsite.cli import build

JOB = TORCH_213 / "multi_rank"
_LINK = re.compile(r'(?:href|src)="([^"]*)"')


@pytest.fixture(scope="module")
def job_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real two-rank DDP job, built without a bundle (each test bundles it)."""
    out = tmp_path_factory.mktemp("ranks") / "job"
    return build(str(JOB), out, bundle="none").site


def _bundle(site: Path, tmp: Path) -> Path:
    copies = copies_linked(site)
    dest, _ = bundle.write_bundle(site, "zip", trace=str(JOB), version=__version__, copies=copies)
    assert dest is not None
    tmp.mkdir()
    moved = tmp / dest.name
    dest.replace(moved)
    return moved


def _broken_links(folder: Path) -> list[str]:
    """Every relative link or source of every page that names no file of ``folder``."""
    broken = []
    for page in folder.rglob("*.html"):
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            path = unquote(target.split("#", 1)[0].split("?", 1)[0])
            if not path or re.match(r"[a-z][a-z0-9+.-]*:", path) or path.startswith("/"):
                continue
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(folder)} -> {target}")
    return broken


@pytest.mark.slow
def test_a_job_too_big_for_github_leaves_out_each_ranks_input_copies_and_keeps_every_page(
    job_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one deflate level (the limits below are measured at it)
    monkeypatch.setattr(bundle, "FAST_LEVEL", bundle.SMALL_LEVEL)
    whole = _bundle(job_site, tmp_path / "whole")
    with zipfile.ZipFile(whole) as archive:
        sizes = {info.filename.split("/", 1)[1]: info.compress_size for info in archive.infolist()}
    logs = [name for name in sizes if name.endswith("/raw.log")]
    assert logs == ["rank_0/raw.log", "rank_1/raw.log"]
    # an attachment limit the rank logs do not fit under, but their raw.jsonl do
    limit = whole.stat().st_size - sum(sizes[name] for name in logs) // 2
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", limit)

    small = _bundle(job_site, tmp_path / "small")
    assert small.stat().st_size <= limit
    with zipfile.ZipFile(small) as archive:
        names = {name.split("/", 1)[1] for name in archive.namelist()}
        archive.extractall(tmp_path / "unzipped")
    assert names == set(sizes) - set(logs)  # every page and tlparse file, the raw.jsonl too
    manifest = json.loads((job_site / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(bundle.left_out_of_zip(job_site)) == logs
    assert {f["path"] for f in manifest["files"]} >= set(logs)  # still listed, in the folder
    assert _broken_links(tmp_path / "unzipped" / job_site.name) == []


@pytest.mark.slow
def test_a_job_far_over_the_limit_leaves_out_its_raw_jsonl_too(
    job_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", 1)
    small = _bundle(job_site, tmp_path / "zip")
    with zipfile.ZipFile(small) as archive:
        names = {name.split("/", 1)[1] for name in archive.namelist()}
    copies = {f"rank_{rank}/{kind}" for rank in (0, 1) for kind in ("raw.log", "raw.jsonl")}
    assert not names & copies
    assert {"index.html", "rank_0/index.html", "rank_1/index.html"} <= names
    left_out = bundle.left_out_of_zip(job_site)
    # and tlparse's copies of the artifacts the compile pages show (tests/test_speed_zipstorm.py)
    shown = {name for name in left_out if "/-_" in name}
    assert set(left_out) == copies | shown
    assert shown and not names & shown
    pages = {p.relative_to(job_site).as_posix() for p in job_site.rglob("*.html")}
    metrics = {name for name in shown if "compilation_metrics_" in name}  # pointers to a table
    assert pages - metrics <= names


@pytest.mark.slow
def test_no_site_of_a_job_carries_theme_files_its_pages_never_load(job_site: Path) -> None:
    """The landing page and the rank diff are sites of their own too: Material's source maps
    and other-language search files were 2.2 MB in each of them."""
    assert (job_site / "diff_0_1" / "index.html").exists()
    unread = [p for p in job_site.rglob("*") if p.suffix == ".map" or "lunr" in p.parts]
    assert unread == []
    assert (job_site / "assets" / "javascripts").is_dir()  # what the landing page loads stays


@pytest.mark.slow
def test_a_jobs_zip_written_while_its_ranks_build_holds_what_the_folder_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tlsite.mkdocs_plugin.pipeline as pipeline

    monkeypatch.setattr(pipeline, "ZIP_WHILE_BUILDING_MIN_BYTES", 0)  # a job this small too
    outcome = build(str(JOB), tmp_path / "site" / "job", bundle="zip")
    assert outcome.bundle is not None
    with zipfile.ZipFile(outcome.bundle) as archive:
        streamed = {info.filename: info.CRC for info in archive.infolist()}
        first = archive.namelist()[0]
    assert first.startswith("job/rank_0/")  # handed over as rank 0 finished
    again = _bundle(outcome.site, tmp_path / "again")
    with zipfile.ZipFile(again) as archive:
        rezipped = {info.filename: info.CRC for info in archive.infolist()}
    del streamed["job/manifest.json"], rezipped["job/manifest.json"]  # other summary fields
    assert streamed == rezipped

"""The zip's worker does not hash a copy of the input it did not deflate ahead (most often too
big to go in): the manifest gives no digest for a file the zip leaves out, and one the zip
keeps is hashed when the manifest is written. On a real torch 2.6 storm (the zipstorm
fixture), its zip written as the build's worker writes it."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from site_copies import zip_as_the_worker

import tlsite.core.bundle as bundle
from tlsite.cli import build

STORM = Path(__file__).parent / "fixtures" / "traces" / "zipstorm" / "zipstorm.log"


@pytest.fixture(scope="module")
def storm_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(str(STORM), tmp_path_factory.mktemp("storm") / "storm", bundle="none").site


def _hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``_file_digest`` reads from now on, by name."""
    read: list[str] = []
    file_digest = bundle._file_digest

    def spy(path: str | Path) -> bundle.Digest:
        read.append(Path(path).name)
        return file_digest(path)

    monkeypatch.setattr(bundle, "_file_digest", spy)
    return read


def _manifest(archive: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    with zipfile.ZipFile(archive) as opened:
        entries = {i.filename.split("/", 1)[1]: opened.read(i) for i in opened.infolist()}
    return json.loads(entries[bundle.MANIFEST_NAME]), entries


def test_an_input_copy_left_out_is_never_hashed(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", 1)  # no copy fits
    read = _hashed(monkeypatch)
    archive = tmp_path / "worker.zip"
    zip_as_the_worker(storm_site, archive, (storm_site / bundle.RAW_LOG).stat().st_size)
    manifest, entries = _manifest(archive)
    assert bundle.RAW_LOG not in entries and bundle.RAW_LOG not in read
    listed = {f["path"]: f for f in manifest["files"]}
    assert listed[bundle.RAW_LOG] == {
        "path": bundle.RAW_LOG,
        "size": (storm_site / bundle.RAW_LOG).stat().st_size,
    }


def test_an_input_copy_kept_without_deflating_ahead_is_hashed_for_the_manifest(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle._Ahead, "take", lambda self, site, name, archived: None)
    archive = tmp_path / "worker.zip"
    zip_as_the_worker(storm_site, archive, (storm_site / bundle.RAW_LOG).stat().st_size)
    manifest, entries = _manifest(archive)
    assert "left_out_of_zip" not in manifest
    listed = {f["path"]: f for f in manifest["files"]}
    for name in (bundle.RAW_LOG, "raw.jsonl"):
        assert listed[name]["sha256"] == hashlib.sha256(entries[name]).hexdigest()
        assert entries[name] == (storm_site / name).read_bytes()

"""What the zip does after a storm's last page, shorter (issue #19).

On a real torch 2.15 storm the zip was the last thing running for 0.8 to 1.4 s of a 6 s
build: after the last page it deflated the copies that fit with a task apiece on its
threads, read each copy deflated ahead on a thread too (where it only waited for the side
file), moved the archive's file position before each entry (a seek writes out what the file
buffers), inserted each entry into its catalog with a statement apiece and encoded every
line of the manifest through ``json.dumps``. Now the copies go a batch per task (at most
:data:`~tlsite.core.bundle.ZIP_BATCH` files and 1 MiB), the side file is read where the
entries go in and the catalog takes a batch of entries at once. The archive is the same,
byte for byte: the tests of the zip against a base revision compare it.
"""

from __future__ import annotations

import json
import random
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
from site_copies import zip_as_the_worker, zip_as_the_worker_late

import tlsite.core.bundle as bundle

STORM = Path(__file__).parent / "fixtures" / "traces" / "zipstorm" / "zipstorm.log"


@pytest.fixture(scope="module")
def storm_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tlsite.cli import build

    return build(str(STORM), tmp_path_factory.mktemp("storm") / "storm", bundle="none").site


def test_the_zips_end_deflates_the_copies_that_fit_a_batch_per_task(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small copies (not deflated ahead in a zip expected over the limit, at the small level)
    are deflated at the zip's end in tasks of many files, not a task apiece; the zip holds
    them as they are."""
    monkeypatch.setattr(bundle, "ZIP_BATCH", 8)  # the fixture's few dozen copies: batches
    tasks: list[str] = []
    ending = threading.Event()
    complete = bundle._complete_zip
    submit = bundle.ThreadPoolExecutor.submit

    def counted(self: Any, function: Any, *args: Any) -> Any:
        if ending.is_set():
            tasks.append(getattr(function, "__name__", ""))
        return submit(self, function, *args)

    def watched(*args: Any, **kwargs: Any) -> None:
        ending.set()
        try:
            complete(*args, **kwargs)
        finally:
            ending.clear()

    monkeypatch.setattr(bundle.ThreadPoolExecutor, "submit", counted)
    monkeypatch.setattr(bundle, "_complete_zip", watched)
    dest = tmp_path / "storm.zip"
    late = zip_as_the_worker_late(storm_site, dest, 10**9)  # a big input: the small level
    small = [
        name
        for name in late
        if bundle._deferred(name)
        and bundle.input_copy_kind(name) is None
        and (storm_site / name).stat().st_size < bundle._AHEAD_MIN_BYTES
    ]
    assert len(small) > 3 * bundle.ZIP_BATCH, "too few small copies deflated at the end"
    with zipfile.ZipFile(dest) as archive:
        for name in small:
            assert archive.read(f"{storm_site.name}/{name}") == (storm_site / name).read_bytes()
    assert len(tasks) <= len(small) // bundle.ZIP_BATCH + 4


def test_a_copy_to_deflate_smaller_is_not_taken_as_it_was_deflated_ahead(
    tmp_path: Path,
) -> None:
    """Copies deflated ahead at the fast level that only fit deflated at the small level go in
    deflated at the small level: the same archive as when none was deflated ahead."""
    site = tmp_path / "site"
    (site / "-_0_0_0").mkdir(parents=True)
    rng = random.Random(14)
    names = []
    for number in range(5):
        name = f"-_0_0_0/copy_{number}.txt"
        (site / name).write_text("".join(rng.choice("abcdefgh \n") for _ in range(50_000)))
        names.append(name)

    def archive(with_ahead: bool) -> bytes:
        work = tmp_path / ("ahead" if with_ahead else "now")
        work.mkdir()
        ahead = bundle._Ahead(work / "side", bundle.FAST_LEVEL) if with_ahead else None
        if ahead is not None:
            for name in names:
                ahead.take(site, name, 0)
            assert all(name in ahead for name in names)
        catalog = bundle._Catalog(work / "catalog")
        deflater = bundle._Deflater(site)
        try:
            with bundle._Zip(work / "out.zip", "w", catalog, bundle.FAST_LEVEL) as out:
                bundle._put_deferred(out, deflater, names, ahead, set(names))
        finally:
            deflater.close()
            catalog.close()
            if ahead is not None:
                ahead.close()
        return (work / "out.zip").read_bytes()

    assert archive(with_ahead=True) == archive(with_ahead=False)


def test_entries_deflated_ahead_go_in_from_the_zips_own_thread(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zip's end reads the entries deflated ahead in the thread that completes it (a task
    apiece on the deflate threads only waited for the side file), and the zip holds them."""
    threads: set[str] = set()
    entry = bundle._Ahead.entry

    def watched(self: bundle._Ahead, name: str) -> bundle._Entry:
        threads.add(threading.current_thread().name)
        return entry(self, name)

    monkeypatch.setattr(bundle._Ahead, "entry", watched)
    dest = tmp_path / "storm.zip"
    zip_as_the_worker(storm_site, dest, (storm_site / bundle.RAW_LOG).stat().st_size)
    assert threads, "nothing was deflated ahead"
    assert not any(name.startswith("tlsite-zip") for name in threads)
    with zipfile.ZipFile(dest) as archive:
        assert archive.testzip() is None


def test_manifest_lines_are_the_json_of_each_files_fields() -> None:
    """Each file's line of the manifest is ``json.dumps`` of its path, size and SHA-256 (no
    SHA-256 for a file left out), whatever its name holds."""
    rng = random.Random(19)
    alphabet = 'ab/é"\\\n\t\x01\u2028😀 '
    names = sorted(
        {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(300)}
    )
    digests = {name: bundle.Digest.of(rng.randint(0, 10**9), rng.randbytes(32)) for name in names}
    left_out = set(names[::3])
    chunks = list(
        bundle._manifest_chunks(
            Path("."), names, dict(digests), trace="t", version="v", extra={}, left_out=left_out
        )
    )
    lines = chunks[1:-1]
    assert len(lines) == len(names)
    for number, (name, line) in enumerate(zip(names, lines, strict=True)):
        fields: dict[str, Any] = {"path": name, "size": digests[name].size}
        if name not in left_out:
            fields["sha256"] = digests[name].sha256
        comma = "," if number < len(names) - 1 else ""
        assert line == f"  {json.dumps(fields, ensure_ascii=False)}{comma}\n"
    assert json.loads("".join(chunks))["files"][0]["path"] == names[0]


def test_a_catalog_started_again_holds_only_the_entries_after(tmp_path: Path) -> None:
    """Entries wait to be inserted a batch at a time: a catalog cleared (the archive started
    again, a file having changed) forgets those waiting too."""
    catalog = bundle._Catalog(tmp_path / "catalog")
    try:
        for number in range(bundle._ENTRIES_AT_ONCE + 10):
            catalog.entries.append(bundle._entry_info(f"old/{number}", bundle.SMALL_LEVEL))
        catalog.clear()
        for number in range(3):
            catalog.entries.append(bundle._entry_info(f"new/{number}", bundle.SMALL_LEVEL))
        assert len(catalog.entries) == 3
        assert [info.filename for info in catalog.entries] == [f"new/{n}" for n in range(3)]
    finally:
        catalog.close()

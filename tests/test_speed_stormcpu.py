"""A storm's tlparse files written by a helper process while the pages render (issue #19).

A recompile storm's tlparse files are thousands of small files (eight or more per compile
id), and the kernel's work creating them came before any page was rendered. From
:data:`~tlsite.mkdocs_plugin.report.FILES_ASIDE_MIN` artifacts on, a helper process writes
them from the payload store while the pages are rendered, and they are handed to the zip, in
the same order, once all are on disk. What a user gets is the same: every file byte for
byte, the zip's entries in the same order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, PROJECT_ROOT, TORCH_213, TRAINING_TRACE_GLOB
from revisions import assert_built_as_by_base, needs_base_rev, site_files, zip_in_order

from tlsite.core import load
from tlsite.core.files_aside import FilesAside
from tlsite.core.store import PayloadStore
from tlsite.mkdocs_plugin import report

#: A real torch 2.15 recompile storm (334 compile ids, 4,000 artifacts), where it was made.
REAL_STORM = PROJECT_ROOT.parent / "traces" / "storm" / "zipstorm_2.15.log"
TRAINING = next(iter(sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))), None)


def _storm(folder: Path, compile_ids: int) -> Path:
    """One frame recompiled ``compile_ids`` times (``bench/make_trace.py``), 8 artifacts each."""
    log = folder / f"storm{compile_ids}.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py")]
    subprocess.run([*make, "--storm", str(compile_ids), "-o", str(log)], check=True)
    return log


def _build(trace: Path, out: Path, monkeypatch: pytest.MonkeyPatch, aside_min: int) -> Path:
    from tlsite.cli import build

    monkeypatch.setattr(report, "FILES_ASIDE_MIN", aside_min)
    return build(str(trace), out, make_zip=True).site


@pytest.mark.slow
def test_a_storms_files_written_aside_are_the_same_files_and_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built with every tlparse file written by the helper, and with none: the same files,
    and the same zip, entry by entry in the same order."""
    trace = _storm(tmp_path, 24)
    handed: list[str] = []
    copy, text = FilesAside.copy, FilesAside.text

    def copied(self: FilesAside, dest: str, offset: int, size: int) -> None:
        handed.append(dest)
        copy(self, dest, offset, size)

    def written(self: FilesAside, dest: str, body: str) -> None:
        handed.append(dest)
        text(self, dest, body)

    monkeypatch.setattr(FilesAside, "copy", copied)
    monkeypatch.setattr(FilesAside, "text", written)
    aside = _build(trace, tmp_path / "aside", monkeypatch, 0)
    assert len(handed) >= 24 * 8  # every artifact's file went to the helper
    here = _build(trace, tmp_path / "here", monkeypatch, 10**9)
    assert len(handed) >= 24 * 8
    files_aside, files_here = site_files(aside), site_files(here)
    assert files_aside.keys() == files_here.keys()
    assert [name for name in files_here if files_aside[name] != files_here[name]] == []
    assert zip_in_order(aside) == zip_in_order(here)


def test_a_file_the_helper_cannot_write_fails_the_build_step(tmp_path: Path) -> None:
    """The helper's first failure is raised when its files are waited for (not lost)."""
    store = PayloadStore(tmp_path / "store")
    ref = store.put("payload")
    store.flush()
    files = FilesAside(store.pack_file, str(tmp_path))
    files.copy(str(tmp_path / "out.txt"), ref.offset, ref.size)
    files.text(str(tmp_path / "missing" / "x.txt"), "text")  # its folder was never made
    files.folder(str(tmp_path / "made"))
    files.text(str(tmp_path / "made" / "y.txt"), "é")
    with pytest.raises(OSError, match=r"x\.txt"):
        files.finish()
    assert (tmp_path / "out.txt").read_text() == "payload"
    assert not (tmp_path / "made" / "y.txt").exists()  # nothing more after a failure
    store.close()


def test_a_stopped_builds_site_folder_is_not_made_again(tmp_path: Path) -> None:
    """A build stopped while the helper still has files to write removes its staging
    folder: the helper's folders below it must not bring it back (nothing would remove it)."""
    store = PayloadStore(tmp_path / "store")
    store.flush()
    site = tmp_path / "staging" / "site"
    site.mkdir(parents=True)
    files = FilesAside(store.pack_file, str(site))
    files.folder(str(site / "-_0_1_0"))
    files.text(str(site / "-_0_1_0" / "a.txt"), "a")
    site.parent.rename(tmp_path / "gone")  # the staging folder goes before the helper writes
    with pytest.raises(OSError, match=r"-_0_1_0"):
        files.finish()
    assert not (tmp_path / "staging").exists()
    store.close()


@pytest.mark.parametrize(
    ("trace", "aside"),
    [
        # a storm's small files (about 1.5 kB each): the kernel's cost per file dominates
        (FIXTURE_TRACES / "recompiles" / "recompiles.log", True),
        # a big trace's files (about 70 kB each): mostly copying, no helper for them
        (TRAINING, False),
    ],
    ids=["small-files", "big-files"],
)
def test_only_many_small_files_are_written_aside(
    trace: Path | None, aside: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if trace is None:
        pytest.skip("no torch 2.13 training trace")
    monkeypatch.setattr(report, "FILES_ASIDE_MIN", 1)  # as many as these traces have
    loaded = load(trace)
    try:
        assert report._many_small_files(loaded) is aside
    finally:
        loaded.close()


@needs_base_rev
@pytest.mark.slow
@pytest.mark.parametrize("name", ["storm-300", "zipstorm_2.15"])
def test_a_storms_site_and_zip_are_the_base_revisions(name: str, tmp_path: Path) -> None:
    """A storm past the threshold (``make_trace --storm 300``, 2,400 artifacts) and the real
    torch 2.15 storm (where it was made): site and zip byte for byte what the base built."""
    if name == "zipstorm_2.15":
        if not REAL_STORM.is_file():
            pytest.skip(f"{REAL_STORM} is not on this machine")
        trace = REAL_STORM
    else:
        trace = _storm(tmp_path, 300)
    assert_built_as_by_base(trace, tmp_path)

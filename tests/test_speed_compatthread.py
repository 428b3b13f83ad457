"""The tlparse files whose bytes are in the store are written by a thread while the pages
are (:class:`~tlsite.core.render.compat.LaterFiles`): the same files, the same zip bundle
byte for byte whatever the thread's timing, a failed write failing the build as before, and
no thread left behind by a failed or interrupted build."""

from __future__ import annotations

import errno
import re
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from corpus import TORCH_213, all_corpus_traces, trace_id

from tlsite import cli
from tlsite.core import load
from tlsite.core.render import compat
from tlsite.core.render.compat import CompatWriter, LaterFiles
from tlsite.mkdocs_plugin import pipeline, report

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
STORM = FIXTURES / "zipstorm" / "zipstorm.log"  # a real torch 2.15 recompile storm
TRAINING = sorted((TORCH_213 / "training").glob("*.log"))[0]


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def _compat_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tlsite-compat" and t.is_alive()]


@pytest.mark.parametrize("log", [STORM, *all_corpus_traces()], ids=trace_id)
def test_files_written_later_are_the_files_written_at_once(log: Path, tmp_path: Path) -> None:
    """Every tlparse file, byte for byte, and every path named in the same order."""
    trace = load(log)
    try:
        now = CompatWriter(trace, tmp_path / "now", raw_log=log)
        named_now = now.write_all()
        listing = tmp_path / "listing"
        files = LaterFiles(trace.store.pack_file, str(tmp_path / "later"), listing)
        CompatWriter(trace, tmp_path / "later", raw_log=log, later=files).write_all()
        trace.store.flush()
        files.start()
        files.finish()
    finally:
        trace.close()
    assert files.take_written() == named_now
    now_files, later_files = _tree(tmp_path / "now"), _tree(tmp_path / "later")
    assert sorted(later_files) == sorted(now_files)
    assert [path for path in now_files if now_files[path] != later_files[path]] == []


def _zip(out: Path) -> tuple[list[str], bytes]:
    zipped = out.with_name("report.zip")
    with zipfile.ZipFile(zipped) as archive:
        assert archive.testzip() is None
        names = archive.namelist()
    return names, zipped.read_bytes()


def _thread_after_the_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread starts only once every page is written (and named)."""
    start, finish = LaterFiles.start, LaterFiles.finish

    def finish_late(self: LaterFiles) -> None:
        start(self)
        finish(self)

    monkeypatch.setattr(LaterFiles, "start", lambda self: None)
    monkeypatch.setattr(LaterFiles, "finish", finish_late)


def _thread_before_the_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread writes every file before the first page is."""
    start = LaterFiles.start

    def start_and_wait(self: LaterFiles) -> None:
        start(self)
        self._thread.join()

    monkeypatch.setattr(LaterFiles, "start", start_and_wait)


def _no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The files written at once, as before the thread (its names sent as written)."""
    write = report.ReportPages._write_compat
    monkeypatch.setattr(
        report.ReportPages, "_write_compat", lambda self, config, later=False: write(self, config)
    )


@pytest.mark.slow
def test_the_zip_is_the_same_whatever_the_threads_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A storm's zip bundle, compressed while the site is built, has its entries in one order
    (the tlparse files, then the pages) and the same bytes, whether the thread writes the
    files before, while or after the pages are written, or no thread does."""
    monkeypatch.setattr(pipeline, "ZIP_WHILE_BUILDING_MIN_BYTES", 0)
    started: list[LaterFiles] = []
    start = LaterFiles.start
    monkeypatch.setattr(LaterFiles, "start", lambda self: (started.append(self), start(self)))
    timings: dict[str, Callable[[pytest.MonkeyPatch], None] | None] = {
        "during": None,
        "again": None,
        "after": _thread_after_the_pages,
        "before": _thread_before_the_pages,
        "none": _no_thread,
    }
    zips: dict[str, tuple[list[str], bytes]] = {}
    for name, timing in timings.items():
        with monkeypatch.context() as patch:
            if timing is not None:
                timing(patch)
            out = tmp_path / name / "report"
            cli.build(str(STORM), out, bundle="zip")
        zips[name] = _zip(out)
    assert len(started) == 4  # the thread wrote the files in all but the last build
    names, first = zips["during"]
    assert any(name.endswith(".txt") and "/-_" in name for name in names)  # artifact files
    assert [name for name, (_, data) in zips.items() if data != first] == []


def _failing_write(path: str) -> Callable[..., Any]:
    """``open`` that fails to create ``path`` as a full disk would."""

    def fail_or_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith(path) and "w" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", str(file))
        return open(file, mode, *args, **kwargs)

    return fail_or_open


@pytest.mark.slow
@pytest.mark.parametrize("bundle", ["zip", "none"])
def test_a_failed_write_in_the_thread_fails_the_build_and_keeps_the_old_report(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bundle: str,
) -> None:
    """The same one-line error as a failed write of the same file without the thread, the
    previous report left as it was, and no thread left writing."""
    monkeypatch.setattr(pipeline, "ZIP_WHILE_BUILDING_MIN_BYTES", 0)
    out = tmp_path / "report"
    build = ["build", str(TRAINING), "-o", str(out), "--no-browser", "--quiet", "--overwrite"]
    build += ["--no-zip"] if bundle == "none" else []
    assert cli.main(build) == cli.EXIT_OK
    before = _tree(out)
    victim = next(path for path in before if path.endswith(".txt") and "/" in path)
    errors = []
    for with_thread in (True, False):
        with monkeypatch.context() as patch:
            patch.setattr(compat, "open", _failing_write(victim), raising=False)
            patch.setattr("tlsite.core.store.open", _failing_write(victim), raising=False)
            if not with_thread:
                _no_thread(patch)
            capsys.readouterr()
            assert cli.main(build) == cli.EXIT_FAILED
            # the path in the staging folder, which has a new name each time
            errors.append(re.sub(r"-\d+-\w+/report/", "/report/", capsys.readouterr().err))
        assert _compat_threads() == []
        assert _tree(out) == before
    assert errors[0] == errors[1]
    assert errors[0].count("\n") == 1
    assert "No space left on device" in errors[0] and victim.rsplit("/", 1)[1] in errors[0]


@pytest.mark.slow
def test_an_interrupted_build_leaves_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the pages are written (the thread still at work) stops the thread."""
    run = LaterFiles._run

    def run_when_stopped(self: LaterFiles) -> None:
        self._stop.wait()  # still writing when the build is interrupted
        run(self)

    pages = 0

    def interrupt(self: Any, output: str, page: Any, config: Any) -> str:
        nonlocal pages
        pages += 1
        if pages == 3:
            assert len(_compat_threads()) == 1
            raise KeyboardInterrupt
        return output

    monkeypatch.setattr(LaterFiles, "_run", run_when_stopped)
    monkeypatch.setattr(report.ReportPages, "on_post_page", interrupt)
    out = tmp_path / "report"
    code = cli.main(["build", str(STORM), "-o", str(out), "--no-browser", "--quiet"])
    assert code == cli.EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().err
    assert _compat_threads() == []
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []

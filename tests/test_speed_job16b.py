"""A multi-rank job's last steps spread over the build's processes (issue #19), the same site.

After its ranks, a job's build compared diverging ranks (a MkDocs site per pair) in the build
process alone while the rank helper had ended, and its zip deflated the comparisons and the
job's files only once the whole site was written. Checked here on the real 16-rank DDP job of
``tests/fixtures/traces/ddp16``: the helpers that built the ranks build comparisons too, with
no process started for them, and the site is the same; the job's files and comparison sites
reach the zip before the landing page is built. With ``TLSITE_BASE_REV`` set to the revision
before the change, the slow test compares every file of the site and every zip entry.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES
from revisions import assert_built_as_by_base, needs_base_rev, site_files

from tlsite.core import worker
from tlsite.core.worker import TaskPool
from tlsite.mkdocs_plugin import diff_build
from tlsite.mkdocs_plugin.diff_build import build_rank_diffs
from tlsite.mkdocs_plugin.multirank_build import build_multirank

JOB = FIXTURE_TRACES / "ddp16" / "ddp16.7z"
PAIRS = [(0, 3), (6, 0), (6, 1), (6, 5)]


def _pid(task: float) -> int:
    """A task that takes a while, so that each process of a pool gets some."""
    time.sleep(task)
    return os.getpid()


@pytest.mark.slow
def test_a_pool_runs_a_second_run_in_the_helpers_of_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = []

    class Counted(worker.WorkerProcess):
        def __init__(self, *args: str) -> None:
            started.append(args)
            super().__init__(*args)

    monkeypatch.setattr(worker, "WorkerProcess", Counted)
    with TaskPool(2, here=True) as pool:
        first = set(pool.run(f"{__name__}:_pid", [0.2] * 4))
        second = set(pool.run(f"{__name__}:_pid", [0.2] * 4))
    assert len(started) == 1
    helpers = first - {os.getpid()}
    assert len(helpers) == 1
    assert second - {os.getpid()} == helpers  # the same helper, still there


@pytest.mark.slow
def test_comparisons_built_by_a_pool_are_the_sites_built_here(
    ddp16_job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(diff_build, "diverging_pairs", lambda report: list(PAIRS))
    here = tmp_path / "here"
    here.mkdir()
    links_here = build_rank_diffs(ddp16_job, report=None, site_dir=here)  # type: ignore[arg-type]
    shared = tmp_path / "shared"
    shared.mkdir()
    runs = []
    with TaskPool(2, here=True) as pool:
        run = pool.run

        def spied(function: str, tasks: list) -> object:
            runs.append((function, len(tasks)))
            return run(function, tasks)

        monkeypatch.setattr(pool, "run", spied)
        links = build_rank_diffs(ddp16_job, report=None, site_dir=shared, pool=pool)  # type: ignore[arg-type]
    assert runs == [("tlsite.mkdocs_plugin.diff_build:_build_pairs", 2)]
    assert links == links_here
    assert site_files(shared) == site_files(here)


@pytest.mark.slow
def test_the_jobs_files_and_comparisons_reach_the_zip_before_the_landing_page(
    ddp16_job, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    given: list[tuple[str, bool]] = []

    def on_final(path: Path) -> None:
        given.append((path.relative_to(site).as_posix(), (site / "index.html").exists()))

    build_multirank(ddp16_job, site, jobs=2, on_final=on_final)
    names = [name for name, _ in given]
    assert not any(landing_built for _, landing_built in given)
    assert "chromium_events.json" in names
    folders = sorted(p.name for p in site.glob("diff_*_*"))
    assert folders and [n for n in names if n.startswith("diff_")] == folders


@pytest.mark.slow
@needs_base_rev
def test_the_ddp16_job_is_built_as_by_the_base_revision(tmp_path: Path) -> None:
    assert_built_as_by_base(JOB, tmp_path)


def test_a_builds_scratch_folders_are_removed_beside_it_and_gone_when_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removing a folder blocks for milliseconds on a file system that discards freed blocks
    as it goes (ext4's ``discard``); a job's build removes a hundred (each site's Markdown
    tree, each model's payload store), which the build waited for."""
    from tlsite.core import cleanup
    from tlsite.mkdocs_plugin.pipeline import build

    removed: list[tuple[str, str]] = []
    remove = cleanup.remove_scratch

    def recorded(path: str | os.PathLike[str]) -> None:
        removed.append((Path(path).name, threading.current_thread().name))
        remove(path)

    monkeypatch.setattr(cleanup, "remove_scratch", recorded)
    example = Path(__file__).resolve().parents[1] / "core" / "examples" / "example.log"
    build(str(example), tmp_path / "site", make_zip=False)
    kinds = {name.split("-")[1]: thread for name, thread in removed if name.startswith("tlsite-")}
    assert {"docs", "store"} <= kinds.keys()
    assert kinds["docs"] == kinds["store"] == "tlsite-remove"
    assert not [name for name, _ in removed if Path(tempfile.gettempdir(), name).exists()]

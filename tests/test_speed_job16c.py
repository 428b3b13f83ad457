"""A job's rank helpers start before the build process imports MkDocs (issue #19).

``tlsite build`` on a folder of rank logs started its rank helper only once the pipeline
(MkDocs, Material, the pages) was imported and the input resolved: the other core idled while
the build process imported, and then while the helper imported the same modules. The CLI now
starts the helpers first (:func:`tlsite.core.multirank.early_rank_pool`) and each imports the
rank modules at once; checked here in a fresh interpreter, as a user runs ``tlsite build``:
the helper exists before ``mkdocs`` is imported, the site is built by it, and a build that
turns out not to be a job (``--rank``) starts none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from corpus import FIXTURE_TRACES
from site_copies import zip_as_the_worker, zip_as_the_worker_late

import tlsite.core.bundle as bundle
from tlsite.cli import build as build_site
from tlsite.core import worker
from tlsite.core.multirank import RANK_MODULES, early_rank_pool

JOB = FIXTURE_TRACES / "torch-2.6" / "multi_rank"

#: Runs ``tlsite build`` in a fresh interpreter, noting each helper started and whether
#: MkDocs was imported by then; prints the notes as JSON.
_SPY = """
import json, sys
from tlsite.core import worker
started = []
class Spied(worker.WorkerProcess):
    def __init__(self, *args):
        started.append([list(args[:1]), "mkdocs" in sys.modules])
        super().__init__(*args)
worker.WorkerProcess = Spied
from tlsite import cli
code = cli.main(sys.argv[1:])
print(json.dumps({"code": code, "started": started}))
"""


def _build(*args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", _SPY, "build", *args, "--no-browser", "--quiet", "--jobs", "2"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_jobs_rank_helper_starts_before_mkdocs_is_imported(tmp_path: Path) -> None:
    spied = _build(str(JOB), "-o", str(tmp_path / "site"), "--bundle", "none")
    assert spied["code"] == 0
    ranks = [before for (service,), before in spied["started"] if "_task_service" in service]
    assert ranks == [False]  # one helper, started before MkDocs was imported
    for rank in (0, 1):
        assert (tmp_path / "site" / f"rank_{rank}" / "index.html").is_file()


@pytest.mark.slow
def test_a_build_of_one_rank_starts_no_rank_helper(tmp_path: Path) -> None:
    spied = _build(str(JOB), "--rank", "1", "-o", str(tmp_path / "site"), "--bundle", "none")
    assert spied["code"] == 0
    assert not [s for (s,), _ in spied["started"] if "_task_service" in s]


def test_only_a_folder_of_rank_logs_gets_an_early_pool(tmp_path: Path) -> None:
    assert early_rank_pool(tmp_path, 2) is None  # empty folder
    assert early_rank_pool(tmp_path / "missing.log", 2) is None
    assert early_rank_pool(JOB, 1) is None  # one process: no helper to start
    one = tmp_path / "one"
    one.mkdir()
    (one / "dedicated_log_torch_trace_rank_0_x.log").write_text("")
    assert early_rank_pool(one, 2) is None
    # two logs of one rank are not a job (the build asks which to take): no helper
    (one / "dedicated_log_torch_trace_rank_0_y.log").write_text("")
    assert early_rank_pool(one, 2) is None
    (one / "dedicated_log_torch_trace_rank_1_x.log").write_text("")
    pool = early_rank_pool(one, 8)  # two ranks: helpers for two ranks, not seven
    assert pool is not None
    try:
        assert pool.processes == 3
    finally:
        pool.close()


def _imported(names: list[str]) -> list[str]:
    """A task: which of ``names`` the helper had imported when the task came."""
    return [name for name in names if name in sys.modules]


def test_an_early_helper_imports_the_rank_modules_before_any_task() -> None:
    helper = worker.WorkerProcess(worker._TASK_SERVICE, *RANK_MODULES)
    try:
        helper.send((f"{__name__}:_imported", [*RANK_MODULES, "mkdocs"]))
        failed, imported = helper.receive()
    finally:
        helper.close()
    assert not failed
    assert imported == [*RANK_MODULES, "mkdocs"]


# -- the zip's end: a job's small artifact files deflated ahead ------------------------------------
STORM = FIXTURE_TRACES / "zipstorm" / "zipstorm.log"


@pytest.fixture(scope="module")
def storm_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(str(STORM), tmp_path_factory.mktemp("storm") / "storm", bundle="none").site


@pytest.mark.slow
def test_a_zip_expected_to_fit_deflates_no_copy_after_the_last_page(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zip deflated at the fast level (everything expected to fit, as a 16-rank job's) has
    every artifact file deflated ahead, small ones too: after the last page the worker adds
    them as they were deflated, and deflates only what it writes then (the manifest) and
    files never handed over. Before, the small ones were estimated and deflated there, while
    the other core idled."""
    site = storm_site
    small = [
        name
        for name in bundle.site_listing(site)
        if bundle._deferred(name)
        and bundle.input_copy_kind(name) is None
        and (site / name).stat().st_size < bundle._AHEAD_MIN_BYTES
    ]
    assert small, "the trace has no small artifact file"
    late = zip_as_the_worker_late(
        site, tmp_path / "storm.zip", (site / bundle.RAW_LOG).stat().st_size
    )
    assert bundle.deflate_level(0) == bundle.FAST_LEVEL
    assert [name for name in late if bundle._deferred(name)] == []
    assert bundle.MANIFEST_NAME in late
    with zipfile.ZipFile(tmp_path / "storm.zip") as archive:
        names = {info.filename.split("/", 1)[1] for info in archive.infolist()}
        for name in small:
            assert archive.read(f"storm/{name}") == (site / name).read_bytes()
    assert names == {*bundle.site_listing(site), bundle.MANIFEST_NAME}


@pytest.mark.slow
def test_the_zips_end_looks_up_no_file_of_the_catalog_one_by_one(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the last page the manifest and the check of what fits read every file's digest
    from the catalog in one query: a look-up per file was most of the zip's end on a job of
    thousands of files. The manifest still lists every file with its size and SHA-256."""
    looked_up: list[str] = []
    at_the_end = []
    get_item = bundle._Digests.__getitem__
    complete_zip = bundle._complete_zip

    def counted(self: Any, name: str) -> Any:
        if at_the_end:
            looked_up.append(name)
        return get_item(self, name)

    def watched_complete(*args: Any, **kwargs: Any) -> None:
        at_the_end.append(True)
        complete_zip(*args, **kwargs)

    monkeypatch.setattr(bundle._Digests, "__getitem__", counted)
    monkeypatch.setattr(bundle, "_complete_zip", watched_complete)
    zip_as_the_worker(
        storm_site, tmp_path / "storm.zip", (storm_site / bundle.RAW_LOG).stat().st_size
    )
    assert looked_up == []
    manifest = json.loads((storm_site / bundle.MANIFEST_NAME).read_text(encoding="utf-8"))
    files = {entry["path"]: entry for entry in manifest["files"]}
    assert set(files) == set(bundle.site_listing(storm_site))
    for name in ("index.md", "raw.log"):
        if (storm_site / name).exists():
            assert files[name]["size"] == (storm_site / name).stat().st_size
    assert all(len(entry["sha256"]) == 64 for entry in files.values())

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
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES

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

"""Fixed costs of a typical 1-5 MB build cut without changing what it writes (issue #19,
``small05``).

The process of a command leaves what it made to the operating system at exit instead of
having the interpreter's exit collections go through all of it. The tests check that this
is so, that a build still leaves nothing behind in the temporary folder, and that the site
and zip are byte for byte the base revision's (``TLSITE_BASE_REV``). No test measures time
(``bench/ab_build.py`` does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import PROJECT_ROOT, TORCH_213, TRAINING_TRACE_GLOB
from revisions import assert_built_as_by_base, needs_base_rev

from tlsite.cli import example_trace

#: Runs ``tlsite build`` through ``cli.main`` in a process of its own and reports, from an
#: exit handler that runs after every one ``main`` registers, how much of the heap was frozen
#: (left out of the exit's collections) and how big the heap was when ``main`` returned.
_BUILD_AND_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count()))
from tlsite.cli import main
code = main(["build", sys.argv[1], "-o", sys.argv[2], "--no-browser", "--quiet"])
print("objects after the build:", len(gc.get_objects()))
sys.exit(code)
"""


def _count(output: str, label: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith(label))
    return int(line.split(":")[1])


def test_a_build_process_leaves_its_heap_to_the_os_at_exit(tmp_path: Path) -> None:
    """What a build made is frozen before the interpreter's exit collections, which would
    go through every object of it; and the build still removes its scratch folders."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT.parent), TMPDIR=str(scratch))
    done = subprocess.run(
        [sys.executable, "-c", _BUILD_AND_EXIT, str(example_trace()), str(tmp_path / "site")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site.zip").is_file()
    heap = _count(done.stdout, "objects after the build:")
    assert _count(done.stdout, "frozen at exit:") >= 0.9 * heap  # a few are freed meanwhile
    # its scratch folders are gone (Jinja's bytecode cache of the templates stays, as before)
    assert [name for name in os.listdir(scratch) if "tlsite-" in name] == []


def _training() -> Path:
    found = sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))
    if not found:
        pytest.skip(f"no training trace in {TORCH_213}")
    return found[0]


@needs_base_rev
@pytest.mark.slow
def test_the_example_is_built_as_by_the_base_revision(tmp_path: Path) -> None:
    assert_built_as_by_base(example_trace(), tmp_path)


@needs_base_rev
@pytest.mark.slow
def test_a_5mb_training_trace_is_built_as_by_the_base_revision(tmp_path: Path) -> None:
    assert_built_as_by_base(_training(), tmp_path)

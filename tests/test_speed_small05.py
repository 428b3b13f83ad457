"""Fixed costs of a typical 1-5 MB build cut without changing what it writes (issue #19,
``small05``).

The process of a command leaves what it made to the operating system at exit instead of
having the interpreter's exit collections go through all of it; on a terminal, the progress
bar is drawn only once a build has run for a while, so a small build imports no rich and runs
no drawing thread. The tests check that this is so, that a build still leaves nothing behind
in the temporary folder, that a bar drawn late shows the stage as far as it got (its name
still escaped), and that the site and zip are byte for byte the base revision's
(``TLSITE_BASE_REV``). No test measures time (``bench/ab_build.py`` does).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from corpus import PROJECT_ROOT, TORCH_213, TRAINING_TRACE_GLOB
from revisions import assert_built_as_by_base, needs_base_rev

from tlsite.cli import example_trace
from tlsite.progress import BYTES, Progress

#: Runs ``tlsite build`` as the ``tlsite`` command does (``cli.console_main``) in a process of
#: its own and reports, from an exit handler that runs after every one the command registers,
#: how much of the heap was frozen (left out of the exit's collections) and how big the heap
#: was when the command returned.
_BUILD_AND_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count()))
from tlsite.cli import console_main
sys.argv = ["tlsite", "build", sys.argv[1], "-o", sys.argv[2], "--no-browser", "--quiet"]
code = console_main()
print("objects after the build:", len(gc.get_objects()))
sys.exit(code)
"""

#: A program of its own that calls ``cli.main``: its cyclic garbage must still be finalized
#: at its exit (the freeze is the command's, not the library's).
_HOST_CALLS_MAIN = """
import sys
from tlsite.cli import main
class Cycle:
    def __del__(self):
        print("host finalizer ran")
cycle = Cycle()
cycle.me = cycle
del cycle
import gc; gc.disable()  # leave the cycle to the exit's collection
main(["build", sys.argv[1], "-o", sys.argv[2], "--no-browser", "--quiet"])
"""


def _count(output: str, label: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith(label))
    return int(line.split(":")[1])


def _build_in_a_process(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``script`` (which builds the example into ``tmp_path/site``) in a Python process of
    its own; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(example_trace()), str(tmp_path / "site")],
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT.parent), **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.slow
def test_a_build_process_leaves_its_heap_to_the_os_at_exit(tmp_path: Path) -> None:
    """What a build made is frozen before the interpreter's exit collections, which would
    go through every object of it; and the build still removes its scratch folders."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = _build_in_a_process(_BUILD_AND_EXIT, tmp_path, TMPDIR=str(scratch))
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site.zip").is_file()
    heap = _count(done.stdout, "objects after the build:")
    assert _count(done.stdout, "frozen at exit:") >= 0.9 * heap  # a few are freed meanwhile
    # its scratch folders are gone (Jinja's bytecode cache of the templates stays, as before)
    assert [name for name in os.listdir(scratch) if "tlsite-" in name] == []


@pytest.mark.slow
def test_a_program_calling_main_keeps_its_own_exit(tmp_path: Path) -> None:
    """``cli.main`` called by another program does not freeze that program's heap at exit."""
    done = _build_in_a_process(_HOST_CALLS_MAIN, tmp_path)
    assert "host finalizer ran" in done.stdout


#: A build on a terminal that is over before its bar is due: is rich imported?
_SHORT_BUILD_ON_A_TERMINAL = """
import sys
from tlsite.progress import BYTES, Progress
with Progress(enabled=True, delay=60) as bar:
    bar.stage("Reading trace.log", 1000, unit=BYTES)
    bar.advance(1000)
    bar.stage("Writing pages", 3)
    bar.advance()
print("rich imported:", "rich" in sys.modules)
"""


def test_a_build_over_before_its_bar_is_due_draws_none() -> None:
    """No bar flashed for a small build: rich is not even imported."""
    done = subprocess.run(
        [sys.executable, "-c", _SHORT_BUILD_ON_A_TERMINAL],
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT.parent)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "rich imported: False"


def test_a_bar_drawn_late_shows_the_stage_as_far_as_it_got() -> None:
    """A longer build gets its bar once it is due, showing the stage it is in with the steps
    done before, and the stage's name (from the trace) shown, not obeyed."""
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    with Progress(enabled=True, console=console, delay=0.05) as bar:
        bar.stage("Reading x.log", 10, unit=BYTES)
        bar.stage("Reading \x1b[31mred[link=http://e/]t.log", 250_000_000, unit=BYTES)
        bar.advance(100_000_000)
        bar.advance(25_000_000)
        deadline = time.monotonic() + 30
        while bar._progress is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bar._progress is not None
        bar._progress.refresh()
        shown = screen.getvalue()
    assert "125.0/250.0 MB" in shown
    assert "\\x1b[31mred[link=http://e/]t.log" in shown
    assert "\x1b[31m" not in shown and "x.log" not in shown


@pytest.mark.slow
def test_a_late_bar_times_its_stage_from_when_the_stage_began() -> None:
    """The bar drawn a second into a stage says the stage has run a second, not none."""
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    with Progress(enabled=True, console=console, delay=1.1) as bar:
        bar.stage("Writing pages", 3)
        deadline = time.monotonic() + 30
        while bar._progress is None and time.monotonic() < deadline:
            time.sleep(0.01)
        bar._progress.refresh()
        shown = screen.getvalue()
    assert "0:00:01" in shown and "0:00:00" not in shown


def test_a_bar_due_after_the_build_is_never_drawn() -> None:
    """A timer that fires while the build ends (rich still importing) draws nothing after."""
    bar = Progress(enabled=True, delay=60)
    with bar:
        bar.stage("Writing pages", 3)
    bar._draw()  # what the timer's thread does when it gets there late
    assert bar._progress is None


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

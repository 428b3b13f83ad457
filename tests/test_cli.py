"""The ``tlsite`` command as a user runs it: exit codes, messages, files left behind.

Each test runs the real command in a subprocess, from an empty working directory, writing
into ``tmp_path`` with ``-o``.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import PROJECT_ROOT, TORCH_213

EXAMPLE_RECORDS = 425  # tests/fixtures/README.md: tlparse 0.4.3 reads `Stats { ok: 425 }`
TIMEOUT_S = 120


def run_tlsite(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m tlsite ARGS`` from ``cwd``, never opening a browser."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    return subprocess.run(
        [sys.executable, "-m", "tlsite", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """An empty working directory; tests check that it stays empty."""
    path = tmp_path / "cwd"
    path.mkdir()
    return path


def record_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if re.search(r"\d[\d,]* records\b", line)]


@pytest.mark.slow
def test_build_example(tmp_path: Path, cwd: Path) -> None:
    out = tmp_path / "out" / "report"
    done = run_tlsite("build", "--example", "-o", str(out), "--no-browser", cwd=cwd)
    assert done.returncode == 0, done.stderr
    summary = record_lines(done.stdout)
    assert len(summary) == 1, done.stdout
    assert f"{EXAMPLE_RECORDS} records" in summary[0]
    assert "skipped" not in summary[0]
    assert str(out / "index.html") in done.stdout
    assert str(out.with_name("report.zip")) in done.stdout
    assert (out / "index.html").is_file()
    assert out.with_name("report.zip").is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["report", "report.zip"]
    assert list(cwd.iterdir()) == []
    assert "Traceback" not in done.stderr


def test_existing_output_without_overwrite_is_refused(tmp_path: Path, cwd: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n", encoding="utf-8")
    done = run_tlsite("build", "--example", "-o", str(out), "--no-browser", cwd=cwd)
    assert done.returncode == 2
    assert str(out) in done.stderr
    assert "not a folder tlsite wrote" in done.stderr  # so --overwrite would not replace it
    assert "Traceback" not in done.stderr
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert (out / "notes.txt").read_text(encoding="utf-8") == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "report"]  # no zip either
    assert list(cwd.iterdir()) == []


@pytest.mark.slow
def test_overwrite_replaces_the_output(tmp_path: Path, cwd: Path) -> None:
    """A report tlsite wrote is replaced whole (a folder that is not tlsite's, or a report
    holding a file of the user's, is refused: see test_answers_input.py and
    test_answers_review_a.py)."""
    out = tmp_path / "report"
    done = run_tlsite("build", "--example", "-o", str(out), "--no-browser", cwd=cwd)
    assert done.returncode == 0, done.stderr
    (out / "index.html").write_text("old\n", encoding="utf-8")
    done = run_tlsite("build", "--example", "-o", str(out), "--overwrite", "--no-browser", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert (out / "index.html").read_text(encoding="utf-8") != "old\n"
    assert (out / "index.html").is_file()
    # nothing left over from the staging folder or the old report
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "report", "report.zip"]


@pytest.mark.slow
def test_no_zip_writes_no_bundle(tmp_path: Path, cwd: Path) -> None:
    out = tmp_path / "report"
    done = run_tlsite("build", "--example", "-o", str(out), "--no-zip", "--no-browser", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert (out / "index.html").is_file()
    assert list(tmp_path.rglob("*.zip")) == []
    assert ".zip" not in done.stdout


def test_missing_path_is_one_line(tmp_path: Path, cwd: Path) -> None:
    missing = tmp_path / "no" / "such_trace.log"
    out = tmp_path / "report"
    done = run_tlsite("build", str(missing), "-o", str(out), "--no-browser", cwd=cwd)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert str(missing) in lines[0]
    assert "Traceback" not in done.stderr
    assert not out.exists()
    assert list(cwd.iterdir()) == []


def test_build_from_standard_input(tmp_path: Path, cwd: Path) -> None:
    out = tmp_path / "report"
    example = PROJECT_ROOT / "core" / "examples" / "example.log"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    with open(example, "rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "tlsite", "build", "-", "-o", str(out), "--no-browser"],
            stdin=stdin,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    assert done.returncode == 0, done.stderr
    assert f"{EXAMPLE_RECORDS} records" in done.stdout
    assert (out / "raw.log").read_bytes() == example.read_bytes()


def corrupt_copy(tmp_path: Path) -> tuple[Path, int, int]:
    """A real trace with a garbage line and a broken JSON line put between its records.

    Returns the copy and the 1-based line numbers of the two bad lines in it.
    """
    source = sorted((TORCH_213 / "simple").glob("*.log"))[0]
    lines = source.read_text(encoding="utf-8").split("\n")
    headers = [i for i, line in enumerate(lines) if re.match(r"[VIWE]\d{4} .*\] \{", line)]
    first, second = headers[3], headers[6]  # insert before these records, not into a payload
    broken = lines[second].split("] ", 1)[0] + '] {"artifact": {"name": "x", "enc'
    corrupted = [
        *lines[:first],
        "this line is not part of any trace",
        *lines[first:second],
        broken,
        *lines[second:],
    ]
    target = tmp_path / "corrupt.log"
    target.write_text("\n".join(corrupted), encoding="utf-8")
    return target, first + 1, second + 2


@pytest.mark.slow
def test_corrupt_trace_builds_and_says_what_was_skipped(tmp_path: Path, cwd: Path) -> None:
    trace, garbage_line, broken_line = corrupt_copy(tmp_path)
    out = tmp_path / "report"
    done = run_tlsite("build", str(trace), "-o", str(out), "--no-browser", cwd=cwd)
    assert done.returncode == 0, done.stderr
    summary = record_lines(done.stdout)
    assert len(summary) == 1, done.stdout
    assert "2 lines skipped" in summary[0]
    assert re.search(rf"\bline {garbage_line}\b", summary[0]), summary[0]
    health = (out / "health.html").read_text(encoding="utf-8")
    for line in (garbage_line, broken_line):
        assert re.search(rf"<td[^>]*>{line}</td>", health), f"line {line} not on Parse health"

    strict = run_tlsite(
        "build", str(trace), "-o", str(out), "--overwrite", "--strict", "--no-browser", cwd=cwd
    )
    assert strict.returncode == 3
    assert (out / "index.html").is_file()  # built anyway
    assert "2 lines skipped" in "".join(record_lines(strict.stdout))
    assert "Traceback" not in strict.stderr
    assert list(cwd.iterdir()) == []


def test_strict_on_a_clean_trace_exits_0(tmp_path: Path, cwd: Path) -> None:
    out = tmp_path / "report"
    done = run_tlsite(
        "build", "--example", "-o", str(out), "--strict", "--no-zip", "--no-browser", cwd=cwd
    )
    assert done.returncode == 0, done.stderr


def test_readme_starts_with_the_two_commands() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    first_block = re.search(r"(?s)```\w*\n(.*?)```", readme)
    assert first_block is not None
    assert readme.index("```") < 600, "the commands are not at the top of the README"
    ci = (PROJECT_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = re.search(r"(?m)^[^#\n]*?(python3? -m pytest[^\n&|;]*)", ci)
    assert test_command is not None, ".ci/run runs no pytest command"
    block = first_block.group(1)
    assert "tlsite build --example" in block
    assert test_command.group(1).strip() in block


def test_version() -> None:
    expected = f"tlsite {importlib.metadata.version('tlsite')}"
    done = subprocess.run(
        [sys.executable, "-m", "tlsite", "--version"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_console_script_version() -> None:
    script = shutil.which("tlsite") or str(Path(sys.executable).parent / "tlsite")
    if not os.access(script, os.X_OK):
        pytest.skip("the tlsite console script is not installed")
    done = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.startswith("tlsite ")

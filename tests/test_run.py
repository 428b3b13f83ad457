"""``tlsite run``: run a command with TORCH_TRACE set, then build the report of what it wrote."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import TLPARSE_INPUTS, TORCH_213

TIMEOUT_S = 300
TINY_SCRIPT = """\
import torch


@torch.compile(backend="aot_eager")
def f(x):
    return torch.sin(x) + 1


f(torch.randn(4))
"""


def tlsite_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("TORCH_TRACE", None)
    return subprocess.run(
        [sys.executable, "-m", "tlsite", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def copy_logs(*logs: Path) -> list[str]:
    """A command that writes the given logs into $TORCH_TRACE (a stand-in for a torch job)."""
    code = (
        "import os, shutil, sys\nfor p in sys.argv[1:]: shutil.copy(p, os.environ['TORCH_TRACE'])\n"
    )
    return [sys.executable, "-c", code, *map(str, logs)]


@pytest.mark.slow
@pytest.mark.torch
def test_run_a_tiny_torch_script(tmp_path: Path) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install torch==2.13.0, the CPU wheel)")
    (tmp_path / "tiny.py").write_text(TINY_SCRIPT, encoding="utf-8")
    done = tlsite_run("-o", "report", "--", sys.executable, "tiny.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    site = tmp_path / "report"
    assert (site / "index.html").is_file() and (site / "-_0_0_0" / "index.html").is_file()
    assert (tmp_path / "report.zip").is_file()
    traces = list(tmp_path.glob("report-trace-*/dedicated_log_torch_trace_*.log"))
    assert len(traces) == 1, list(tmp_path.iterdir())
    assert f"Trace: {traces[0].parent}" in done.stdout
    overview = (site / "index.html").read_text(encoding="utf-8")
    assert "2.13.0" in overview  # PyTorch version, from the run's own trace
    assert "tiny.py" in (site / "raw.log").read_text(encoding="utf-8")  # the script it ran


@pytest.mark.slow
def test_rank_logs_give_one_report_per_rank(tmp_path: Path) -> None:
    logs = sorted((TORCH_213 / "multi_rank").glob("*.log"))
    assert len(logs) == 2
    done = tlsite_run(
        "-o", "job", "--trace-dir", "trace", "--redact", "--", *copy_logs(*logs), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    site = tmp_path / "job"
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="rank_0/index.html"' in index and 'href="rank_1/index.html"' in index
    for rank in (0, 1):
        report = (site / f"rank_{rank}" / "index.html").read_text(encoding="utf-8")
        assert "This report was redacted" in report
    assert sorted(p.name for p in (tmp_path / "trace").iterdir()) == [p.name for p in logs]
    import zipfile

    with zipfile.ZipFile(tmp_path / "job.zip") as archive:
        manifest = json.loads(archive.read("job/manifest.json"))
    assert manifest["ranks"] == [0, 1]


def test_a_failing_command_still_gets_its_report(tmp_path: Path) -> None:
    log = TLPARSE_INPUTS / "comp_failure.log"
    command = [*copy_logs(log)]
    command[2] += "sys.exit(7)\n"
    done = tlsite_run("-o", "r", "--bundle", "none", "--", *command, cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    assert (tmp_path / "r" / "failures.html").is_file()
    assert "exited with 7" in done.stdout


def test_usage_and_no_trace(tmp_path: Path) -> None:
    done = tlsite_run("-o", "r", cwd=tmp_path)
    assert done.returncode == 2 and "after --" in done.stderr
    done = tlsite_run("-o", "r", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert done.returncode == 1
    assert "wrote no trace" in done.stderr
    done = tlsite_run("-o", "r", "--", "no-such-command-xyz", cwd=tmp_path)
    assert done.returncode == 127 and "command not found" in done.stderr

"""The code base stays ruff-clean (lint rules and formatting from pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from corpus import PROJECT_ROOT


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=" ".join)
def test_ruff(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "."],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr

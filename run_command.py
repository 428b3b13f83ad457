"""``tlsite run``: run a command with ``TORCH_TRACE`` set, then report on what it wrote.

The trace folder is new for each run (so an old log is never mistaken for this run's) and is
kept beside the report: it is the raw material to attach or rebuild from. A job whose processes
wrote rank logs (``torchrun``) gets the multi-rank site: a landing page comparing the ranks
and each rank's report under ``DIR/rank_<N>/``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tlsite.core import InputError, resolve_input


def new_trace_dir(out: Path) -> Path:
    """A fresh folder for ``TORCH_TRACE``, beside the report folder ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{out.name}-trace-", dir=out.parent))


def run_traced(command: Sequence[str], trace_dir: Path) -> int:
    """Run ``command`` (inheriting the terminal) with ``TORCH_TRACE=trace_dir``; its exit code."""
    env = dict(os.environ, TORCH_TRACE=str(trace_dir))
    try:
        return subprocess.call(list(command), env=env)
    except FileNotFoundError as exc:
        raise InputError(f"{command[0]}: command not found") from exc
    except PermissionError as exc:
        raise InputError(f"{command[0]}: permission denied") from exc


def traced_ranks(trace_dir: Path) -> list[int]:
    """The ranks of the rank logs in ``trace_dir`` (empty for a single-process run).

    Raises :class:`InputError` when the command wrote no log at all.
    """
    if not any(p.is_file() and p.stat().st_size for p in trace_dir.iterdir()):
        raise InputError(
            f"{trace_dir}: the command wrote no trace (does it call torch.compile? "
            "TORCH_TRACE is read when torch is imported)"
        )
    try:
        with resolve_input(trace_dir) as resolved:
            if not resolved.is_multi_rank:
                return []
            return sorted({log.rank for log in resolved.logs if log.rank is not None})
    except InputError:  # several logs that are not rank logs: the newest is built
        return []

"""``tlsite run``: run a command with ``TORCH_TRACE`` set, then report on what it wrote.

The trace folder is new for each run (so an old log is never mistaken for this run's) and is
kept beside the report: it is the raw material to attach or rebuild from. A job whose processes
wrote rank logs (``torchrun``) gets the multi-rank site: a landing page comparing the ranks
and each rank's report under ``DIR/rank_<N>/``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from tlsite.core import InputError, resolve_input
from tlsite.core.cleanup import EXIT_TERMINATED, Terminated


def new_trace_dir(out: Path) -> Path:
    """A fresh folder for ``TORCH_TRACE``, beside the report folder ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{out.name}-trace-", dir=out.parent))


class CommandError(InputError):
    """The command could not be started; ``code`` is what a shell exits with then."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Finished:
    """How the command ended: ``code`` as a shell reports it (``128 + N`` when signal N
    ended it) and whether the user interrupted it (Ctrl-C, forwarded to it)."""

    code: int
    interrupted: bool = False


def shell_code(returncode: int) -> int:
    """``subprocess``'s return code as a shell gives it: ``-9`` (killed) is ``137``."""
    return 128 - returncode if returncode < 0 else returncode


def run_traced(command: Sequence[str], trace_dir: Path) -> Finished:
    """Run ``command`` (inheriting the terminal) with ``TORCH_TRACE=trace_dir`` until it ends.

    Ctrl-C does not stop tlsite while the command runs: it is passed on to the command (a
    terminal sends it to both; a ``kill -INT`` of tlsite alone is forwarded), so the trace it
    wrote is still reported. SIGTERM is passed on too, and ends tlsite once the command ended.
    """
    env = dict(os.environ, TORCH_TRACE=str(trace_dir))
    try:
        child = subprocess.Popen(list(command), env=env)
    except FileNotFoundError as exc:
        raise CommandError(f"{command[0]}: command not found", 127) from exc
    except PermissionError as exc:
        raise CommandError(f"{command[0]}: permission denied", 126) from exc
    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if signum == signal.SIGINT and _terminal_sent_it_to_the_command_too():
            return
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        returncode = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if signal.SIGTERM in received:
        raise Terminated(EXIT_TERMINATED)
    return Finished(shell_code(returncode), interrupted=signal.SIGINT in received)


def _terminal_sent_it_to_the_command_too() -> bool:
    """True when tlsite runs in the foreground of its terminal: Ctrl-C there reaches every
    process of the group, the command included, which must not get it twice."""
    for stream in (sys.stdin, sys.stderr, sys.stdout):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            return os.tcgetpgrp(stream.fileno()) == os.getpgrp()
    return False


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

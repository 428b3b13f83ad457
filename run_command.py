"""``tlsite run``: run a command with ``TORCH_TRACE`` set, then report on what it wrote.

The trace folder is new for each run (so an old log is never mistaken for this run's) and is
kept beside the report: it is the raw material to attach or rebuild from. A job whose processes
wrote rank logs (``torchrun``) gets one report per rank under ``DIR/rank_<N>/`` and a small
``DIR/index.html`` linking them.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlsite.core import InputError, resolve_input

if TYPE_CHECKING:
    from tlsite.cli import BuildOutcome
    from tlsite.core.redact import Redactor


@dataclass
class RankReport:
    """One rank's report inside a multi-rank run."""

    rank: int
    folder: str  # relative to the run's site folder, e.g. "rank_0"
    summary: str


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


def write_rank_index(site: Path, reports: list[RankReport], *, title: str) -> None:
    """``site/index.html``: a self-contained page linking each rank's report."""
    rows = "\n".join(
        f'<li><a href="{html.escape(r.folder)}/index.html">Rank {r.rank}</a>'
        f" <small>{html.escape(r.summary)}</small></li>"
        for r in reports
    )
    page = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:50rem;margin:2rem auto;padding:0 1rem}}
li{{margin:.4rem 0}}small{{color:#555}}</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p>One report per rank; each opens on its own.</p>
<ul>
{rows}
</ul>
</body>
</html>
"""
    (site / "index.html").write_text(page, encoding="utf-8")


def build_ranks(
    trace_dir: Path,
    out: Path,
    ranks: list[int],
    *,
    bundle: str,
    redactor: Redactor | None = None,
    export_mode: bool | None = None,
    progress: bool = False,
) -> BuildOutcome:
    """One report per rank under ``out/rank_<N>/``, an index page, and one bundle of all."""
    from tlsite import __version__
    from tlsite.cli import BuildOutcome, _swap_into_place, build
    from tlsite.core.bundle import write_bundle

    started = time.perf_counter()
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    reports: list[RankReport] = []
    clean = True
    try:
        for rank in ranks:
            folder = f"rank_{rank}"
            outcome = build(
                str(trace_dir),
                staging / "site" / folder,
                rank=rank,
                export_mode=export_mode,
                bundle="none",
                redactor=redactor,
                progress=progress,
            )
            reports.append(RankReport(rank, folder, outcome.summary))
            clean = clean and outcome.clean
        write_rank_index(staging / "site", reports, title=f"tlsite: {len(ranks)} ranks")
        _swap_into_place(staging / "site", out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    extra: dict[str, Any] = {"ranks": ranks}
    if redactor is not None:
        extra["redaction"] = {"mode": redactor.mode}
    name = f"{len(ranks)} rank logs in {trace_dir.name}"
    archive, size = write_bundle(out, bundle, trace=name, version=__version__, extra=extra)
    return BuildOutcome(
        site=out,
        bundle=archive,
        bundle_size=size,
        seconds=time.perf_counter() - started,
        summary="\n".join(f"Rank {r.rank}: {r.summary}" for r in reports),
        clean=clean,
        bundle_format=bundle,
    )

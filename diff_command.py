"""``tlsite diff BEFORE AFTER``: read both traces, compare them, write the diff site.

Each side is read like ``tlsite build`` reads its input (file, folder, archive, rank folders)
into the same model; the site is made in a staging folder and swapped into place with its
bundle, like a report. Exit codes are the CLI's, plus :data:`EXIT_REGRESSED` when
``--fail-on`` finds AFTER worse.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlsite import __version__

if TYPE_CHECKING:
    from tlsite.core import Trace
    from tlsite.core.analysis.diff import TraceDiff
    from tlsite.core.redact import Redactor

MANIFEST_NOTE = (
    "A tlsite diff: a static website comparing two PyTorch TORCH_TRACE logs (what changed "
    "between the runs). Open index.html in a browser (it works from disk, offline); diff.json "
    "holds the same facts. It shows guards, graphs, generated code, file names and config "
    "values of both runs. Share it knowingly."
)
#: ``--fail-on`` found AFTER worse than BEFORE (the site was still written).
EXIT_REGRESSED = 4


def add_diff_parser(commands: Any, add_site_options: Any, add_trace_options: Any) -> None:
    """The ``diff`` subcommand's arguments."""
    diff = commands.add_parser(
        "diff",
        help="compare two traces (before and after a change) and build a site saying what changed",
        description="Compare BEFORE with AFTER (each anything tlsite build takes) and write a "
        "site that says what changed: graph breaks fixed and new, recompiles, failures, "
        "compile time, per-compile guard, graph and code diffs; plus diff.json.",
    )
    diff.add_argument("before", help="the trace before the change")
    diff.add_argument(
        "after", nargs="?", help="the trace after it (omit with --ranks A,B for two ranks)"
    )
    diff.add_argument("--before-rank", type=int, help="rank log to read on the BEFORE side")
    diff.add_argument("--after-rank", type=int, help="rank log to read on the AFTER side")
    diff.add_argument(
        "--ranks",
        metavar="A,B",
        help="compare rank A with rank B of one job (the folder BEFORE, or BEFORE and AFTER)",
    )
    add_fail_on(diff)
    add_site_options(diff)
    add_trace_options(diff)
    diff.set_defaults(out="tl_diff")
    for action in diff._actions:  # the shared options, said for a diff
        if action.dest == "out":
            action.help = "site folder (default: tl_diff)"
        elif action.dest in ("jobs", "all_ranks_html", "inductor_provenance"):
            action.help = argparse.SUPPRESS  # accepted, but nothing to do in a diff
        elif action.dest == "rank":
            action.help = "for folders of rank logs: read this rank on both sides"


def add_fail_on(parser: argparse.ArgumentParser) -> None:
    """``--fail-on CHECKS`` (checked as the arguments are parsed: a typo stops at once)."""
    parser.add_argument(
        "--fail-on",
        metavar="CHECKS",
        type=_fail_on,
        help="exit 4 when AFTER regresses: graph-breaks,recompiles,failures,compile-time=+20%%",
    )


def _fail_on(text: str) -> dict[str, float]:
    from tlsite.core.analysis.diff import parse_fail_on

    try:
        return parse_fail_on(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--fail-on: ")) from None


@dataclass
class DiffOutcome:
    site: Path
    bundle: Path | None
    bundle_size: int
    diff: TraceDiff
    seconds: float


def sides(args: argparse.Namespace) -> tuple[str, int | None, str, int | None]:
    """(BEFORE path, rank, AFTER path, rank) from the arguments; raises ValueError."""
    before_rank = args.before_rank if args.before_rank is not None else args.rank
    after_rank = args.after_rank if args.after_rank is not None else args.rank
    after = args.after
    if args.ranks:
        try:
            first, second = (int(r) for r in args.ranks.split(","))
        except ValueError:
            raise ValueError(f"--ranks: expected two ranks A,B, not {args.ranks!r}") from None
        before_rank, after_rank = first, second
        after = after or args.before
    if after is None:
        raise ValueError("give BEFORE and AFTER (or one job folder with --ranks A,B)")
    return args.before, before_rank, after, after_rank


def load_side(
    path: str,
    *,
    rank: int | None,
    latest: bool,
    export_mode: bool | None,
    redactor: Redactor | None,
) -> Trace:
    """Read one side as ``tlsite build`` would; a non-trace raises InputError."""
    from tlsite.core import InputError, load_source, resolve_input, select_log
    from tlsite.core.redact import redacted_source

    with resolve_input(path, latest=latest) as resolved:
        log = select_log(resolved, rank, path)
        if redactor is not None:
            log = redacted_source(log, redactor)
        trace = load_source(log, export_mode=export_mode)
    why = trace.stats.not_a_trace()
    if why is not None:
        trace.close()
        raise InputError(f"{path}: {why}")
    return trace


def run_diff(
    before: tuple[str, int | None],
    after: tuple[str, int | None],
    out: Path,
    *,
    bundle: str = "zip",
    latest: bool = False,
    export_mode: bool | None = None,
    redactor: Redactor | None = None,
    progress: bool = False,
) -> DiffOutcome:
    """Read both sides, compare them and write the site (and bundle) at ``out``."""
    from tlsite.core.analysis.diff import diff_traces
    from tlsite.core.bundle import write_bundle
    from tlsite.core.cleanup import wait_for_removals
    from tlsite.core.output import staging_for, swap_into_place
    from tlsite.core.redact import redaction_summary
    from tlsite.mkdocs_plugin.diff_build import build_diff_site

    from .progress import Progress

    started = time.perf_counter()
    out = out.resolve()
    traces: list[Trace] = []
    try:
        with (
            staging_for(out, inputs=[before[0], after[0]], bundle=bundle) as staging,
            Progress(enabled=progress) as bar,
        ):
            for path, rank in (before, after):
                bar.stage(f"Reading {path}" + ("" if rank is None else f" (rank {rank})"))
                traces.append(
                    load_side(
                        path, rank=rank, latest=latest, export_mode=export_mode, redactor=redactor
                    )
                )
            bar.stage("Comparing")
            diff = diff_traces(traces[0], traces[1])
            site = staging / out.name  # the bundle's top folder is named after the site
            bar.stage("Writing pages")
            build_diff_site(diff, site)
            extra: dict[str, Any] = {"note": MANIFEST_NOTE}
            if redactor is not None:
                extra["redaction"] = redaction_summary(redactor)
            if bundle != "none":
                bar.stage(f"Writing the {bundle} bundle")
            name = f"{diff.before.source} → {diff.after.source}"
            archive, size = write_bundle(site, bundle, trace=name, version=__version__, extra=extra)
            archive = swap_into_place(site, out, archive)
    finally:
        for trace in traces:
            trace.close()
    wait_for_removals()  # the scratch folders removed while it went on
    return DiffOutcome(out, archive, size, diff, time.perf_counter() - started)


def regressed(diff: TraceDiff, checks: dict[str, float] | None) -> bool:
    """Whether AFTER fails a ``--fail-on`` check; each failed check is said on stderr."""
    from tlsite.core.analysis.diff import failed_checks

    failed = failed_checks(diff, checks or {})
    for line in failed:
        print(f"tlsite: --fail-on {line}", file=sys.stderr)
    return bool(failed)


def summary_text(outcome: DiffOutcome) -> str:
    """What the terminal says: the verdict, the findings worst first, where the site is."""
    diff = outcome.diff
    lines = [f"{diff.before.source} → {diff.after.source}: {diff.verdict}"]
    lines += [f"  {where}: what it lacks is not counted" for where in diff.incomplete]
    lines += [f"  worse:  {f.text}" for f in diff.regressions[:10]]
    lines += [f"  better: {f.text}" for f in diff.improvements[:10]]
    hidden = max(0, len(diff.regressions) - 10) + max(0, len(diff.improvements) - 10)
    if hidden:
        lines.append(f"  ... and {hidden} more on the site")
    lines.append(f"Diff: {outcome.site / 'index.html'} (and {outcome.site / 'diff.json'})")
    if outcome.bundle is not None:
        lines.append(f"Bundle: {outcome.bundle} ({outcome.bundle_size / 1e6:.1f} MB)")
    lines.append(f"Built in {outcome.seconds:.1f} s.")
    return "\n".join(lines)

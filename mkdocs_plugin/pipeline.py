"""``tlsite build``: a trace in, a report site and its bundle out, as one pipeline.

:func:`build` reads as the steps it takes, as MkDocs' own ``commands/build.py`` does:
resolve the input, read the trace, render its Markdown pages and run MkDocs on them
(:func:`~.build.build_report`), write the bundle, and swap the new site into place. A
folder of rank logs takes the same steps with each rank read and built in a worker
(:func:`~.multirank_build.build_multirank`) and a landing page comparing them.

Every trace is read the same way, in this process. Helper processes work beside it where
they pay: on a big trace, highlighting its code while it is read (and while pages are
rendered), and compressing the zip bundle while the site is built.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlsite import __version__
from tlsite.core import (
    InputError,
    LogSource,
    PayloadStore,
    ResolvedInput,
    Trace,
    load_source,
    resolve_input,
    select_log,
)
from tlsite.core.bundle import ZipWriter, site_files, write_bundle
from tlsite.core.cleanup import make_scratch, remove_scratch, wait_for_removals
from tlsite.core.output import BuildOutcome, staging_for, swap_into_place
from tlsite.core.redact import Redactor, redacted_source, redaction_note, redaction_summary
from tlsite.core.render.highlight import Highlighter
from tlsite.core.render.pages import highlight_ahead
from tlsite.core.worker import TaskPool
from tlsite.progress import BYTES, Progress

from .build import build_report

if TYPE_CHECKING:
    from tlsite.core.multirank import RankSummary

#: From this trace size on, the zip bundle is compressed during the build by a worker
#: process; below it, the process start costs more than the overlap saves, and the files are
#: deflated by threads of the build process as they become final.
ZIP_WHILE_BUILDING_MIN_BYTES = 16 * 1024 * 1024
#: From this trace size on, code is highlighted by worker processes while the trace is read.
HIGHLIGHT_AHEAD_MIN_BYTES = 16 * 1024 * 1024


@dataclass
class _Site:
    """One site written into the staging folder: what its bundle and summary need."""

    trace_name: str  # the bundle manifest's ``trace``
    manifest: dict[str, Any]  # the manifest's extra fields
    summary: list[str]
    clean: bool
    why_not_clean: str
    #: tlparse's copies of text the compile pages show (a zip over the limit leaves them out)
    artifact_copies: list[str]


def build(
    path: str,
    out: Path,
    *,
    latest: bool = False,
    rank: int | None = None,
    export_mode: bool | None = None,
    make_zip: bool = True,
    progress: bool = False,
    bundle: str | None = None,
    redactor: Redactor | None = None,
    jobs: int | None = None,
    all_ranks: bool = False,
    pool: TaskPool | None = None,
) -> BuildOutcome:
    """Read ``path``, build its report site and bundle, and swap them in place of ``out``.

    ``bundle`` is ``zip``, ``7z`` or ``none`` (default: ``zip``, or ``none`` without
    ``make_zip``). With ``redactor``, the log is redacted as it is read, so every page, file
    and the bundle is made from the redacted text. A folder of rank logs (and no ``rank``)
    gives one site for all ranks, ``jobs`` ranks read at a time (``all_ranks``: even one).
    An existing ``out`` is replaced only when :func:`tlsite.core.output.refusal` allows it
    (else :class:`~tlsite.core.output.OutputRefused`); an input in which no record could be
    read raises :class:`~tlsite.core.InputError`. A build that fails at any step leaves the
    previous report and bundle as they were. ``pool``: the processes to build a job's ranks
    with, started by the caller (:func:`~tlsite.core.multirank.early_rank_pool`), which
    closes it.
    """
    started = time.perf_counter()
    out = out.resolve()
    fmt = bundle if bundle is not None else ("zip" if make_zip else "none")
    with (
        staging_for(out, inputs=[path], bundle=fmt) as staging,
        Progress(enabled=progress) as bar,
        resolve_input(path, latest=latest) as resolved,
    ):
        site = staging / out.name  # the bundle's top folder is named after the site
        zipper: ZipWriter | None = None
        try:
            if _is_job(resolved, rank, all_ranks):
                zipper = _zip_while_building(resolved.logs, site, fmt)
                made = _build_ranks(resolved, site, bar, jobs, export_mode, redactor, zipper, pool)
            else:
                log = select_log(resolved, rank, path)
                zipper = _zip_while_building([log], site, fmt)
                on_file = zipper.add if zipper is not None else None
                made = _build_one(resolved, log, path, site, bar, export_mode, redactor, on_file)
            if fmt != "none":
                bar.stage(f"Writing the {fmt} bundle")
            archive, size = _bundle(site, fmt, made, zipper)
            zipper = None  # finished
        finally:
            if zipper is not None:
                zipper.abort()
        archive = swap_into_place(site, out, archive)
    wait_for_removals()  # the scratch folders the build removed while it went on
    return BuildOutcome(
        site=out,
        bundle=archive,
        bundle_size=size,
        seconds=time.perf_counter() - started,
        summary="\n".join([*resolved.skipped, *made.summary]),
        clean=made.clean,
        bundle_format=fmt,
        why_not_clean=made.why_not_clean,
    )


def _zip_while_building(logs: list[LogSource], site: Path, fmt: str) -> ZipWriter | None:
    """For a zip bundle, a writer that compresses each file of ``site`` as soon as it is
    final, while the rest is built: a big trace's (or job's) in a helper process."""
    if fmt != "zip":
        return None
    size = sum(log.size_hint or 0 for log in logs)
    background = size >= ZIP_WHILE_BUILDING_MIN_BYTES
    return ZipWriter(
        site, site.with_name(f"{site.name}.zip"), background=background, input_size=size
    )


def _bundle(site: Path, fmt: str, made: _Site, zipper: ZipWriter | None) -> tuple[Path | None, int]:
    """Write the bundle beside ``site`` (finishing ``zipper``'s, if one was started)."""
    fields = {"trace": made.trace_name, "version": __version__, "extra": made.manifest}
    if zipper is not None:
        return zipper.dest, zipper.finish(**fields, copies=made.artifact_copies)
    return write_bundle(site, fmt, **fields, copies=made.artifact_copies)


def _is_job(resolved: ResolvedInput, rank: int | None, all_ranks: bool) -> bool:
    """Whether the input is a job's rank logs, built as one site for all ranks."""
    if rank is not None:
        return False
    if resolved.is_multi_rank and len(resolved.logs) > 1:
        return True
    return all_ranks and all(log.rank is not None for log in resolved.logs)


def _build_one(
    resolved: ResolvedInput,
    log: LogSource,
    path: str,
    site: Path,
    bar: Progress,
    export_mode: bool | None,
    redactor: Redactor | None,
    on_file: Callable[[str], None] | None,
) -> _Site:
    """Read one log, and render and build its site into ``site``."""
    notes = list(resolved.notes)
    if redactor is not None:
        log = redacted_source(log, redactor)
        notes = [redactor.text(note) for note in notes]
    bar.stage(f"Reading {log.display_name}", log.size_hint, unit=BYTES)
    report, highlighter = _read_log(log, export_mode=export_mode, on_bytes=bar.advance, notes=notes)
    try:
        why = report.stats.not_a_trace()
        if why is not None:
            shown = path if Path(path).name == log.display_name else log.display_name
            raise InputError(f"{shown}: {why}")
        manifest: dict[str, Any] = {}
        if report.stats.parts:  # which lines of raw.log came from which log
            manifest["raw_log_lines"] = [
                {"log": p.name, "first": p.first_line, "last": p.last_line}
                for p in report.stats.parts
            ]
        if redactor is not None:
            report.notes.append(redaction_note(redactor))
            manifest["redaction"] = redaction_summary(redactor)
        bar.stage("Writing pages")
        plugin = build_report(
            report,
            site,
            raw_log=log,
            on_page=bar.advance,
            on_file=on_file,
            highlighter=highlighter,
        )
    finally:
        if highlighter is not None:
            highlighter.close()
        report.close()
    stats = report.stats
    return _Site(
        trace_name=report.source,
        manifest=manifest,
        summary=[stats.summary(), f"Found: {plugin.found}"],
        clean=stats.is_clean,
        why_not_clean=stats.why_not_clean(),
        artifact_copies=plugin.artifact_copies,
    )


def _read_log(
    log: LogSource,
    *,
    export_mode: bool | None,
    on_bytes: Callable[[int], None],
    notes: list[str],
) -> tuple[Trace, Highlighter | None]:
    """Read the log; a big one with highlight workers at work on its code meanwhile."""
    if (log.size_hint or 0) < HIGHLIGHT_AHEAD_MIN_BYTES:
        trace = load_source(log, export_mode=export_mode, on_bytes=on_bytes)
        trace.notes.extend(notes)
        return trace, None
    store_root = str(make_scratch("store"))
    highlighter = None
    try:  # from the folder's making: a SIGTERM while the workers start removes it too
        highlighter = Highlighter(Path(store_root) / "highlight")
        highlighter.start()
        trace = load_source(
            log,
            store=PayloadStore(store_root, owned=True),
            export_mode=export_mode,
            on_bytes=on_bytes,
            on_artifact=highlight_ahead(highlighter),
        )
    except BaseException:
        if highlighter is not None:
            highlighter.close()
        remove_scratch(store_root)
        raise
    trace.notes.extend(notes)
    return trace, highlighter


def _build_ranks(
    resolved: ResolvedInput,
    site: Path,
    bar: Progress,
    jobs: int | None,
    export_mode: bool | None,
    redactor: Redactor | None,
    zipper: ZipWriter | None,
    pool: TaskPool | None,
) -> _Site:
    """One site for every rank of a job: the landing page, then ``rank_<N>/`` reports.

    With ``zipper``, each rank's finished folder is compressed while the next ranks, the
    landing page and the diffs are built, and so are the job's files and comparison sites
    while the rest is. Folders are handed over in rank order, whichever rank finishes first,
    so that the same job gives the same archive.
    """
    # only a job needs them (and the diff and landing-page modules they import)
    from tlsite.core.multirank import job_ranks

    from .multirank_build import build_multirank

    if redactor is not None:
        logs = [redacted_source(log, redactor) for log in resolved.logs]
        resolved = dataclasses.replace(resolved, logs=logs)
    bar.stage(f"Reading and building {len(resolved.logs)} ranks", len(resolved.logs))
    waiting = job_ranks(resolved)
    finished: set[int] = set()

    def on_rank(summary: RankSummary) -> None:
        bar.advance()
        finished.add(summary.rank)
        while zipper is not None and waiting and waiting[0] in finished:
            for path in site_files(site / f"rank_{waiting.pop(0)}"):
                zipper.add(path)

    def on_final(path: Path) -> None:
        for file in site_files(path) if path.is_dir() else [path]:
            zipper.add(file)  # type: ignore[union-attr]

    outcome = build_multirank(
        resolved,
        site,
        jobs=jobs,
        export_mode=export_mode,
        on_rank=on_rank,
        redactor=redactor,
        on_final=on_final if zipper is not None else None,
        pool=pool,
    )
    manifest: dict[str, Any] = {"ranks": sorted(outcome.summaries)}
    if redactor is not None:
        manifest["redaction"] = redaction_summary(redactor)
    summary = [outcome.summaries[r] for r in sorted(outcome.summaries)]
    if resolved.ignored:
        summary.append("Not rank logs, ignored: " + ", ".join(resolved.ignored))
    return _Site(
        trace_name=f"{len(outcome.summaries)} rank logs",
        manifest=manifest,
        summary=summary,
        clean=outcome.clean,
        why_not_clean="a rank log had skipped lines or damaged payloads (see above)",
        artifact_copies=outcome.artifact_copies,
    )

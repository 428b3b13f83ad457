"""Build one site for a multi-rank job: a landing page plus each rank's full report.

Ranks are read a few per worker (:func:`tlsite.core.multirank.load_ranks`: helper processes
and this one), and each worker also builds its rank's report into ``rank_<N>/`` while the
rank's model is open, so memory is bounded by the largest rank, not the sum; pages alike with
an earlier rank's are converted once (:mod:`.alike_pages`), and the theme's files are the
job's root's (:mod:`.job_theme`). The landing page compares the ranks' summaries.
"""

from __future__ import annotations

import functools
import io
import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkdocs.plugins import BasePlugin

from tlsite.core import LogSource, ResolvedInput, load_source
from tlsite.core.analysis.divergence import analyse
from tlsite.core.cleanup import scratch_folder
from tlsite.core.model import Trace
from tlsite.core.multirank import RankSummary, job_ranks, load_ranks, rank_pool
from tlsite.core.redact import Redactor, redaction_note
from tlsite.core.render.landing import render_landing
from tlsite.core.render.multirank_files import write_multirank_files
from tlsite.core.worker import TaskPool

from .alike_pages import alike_pages_shared, forget_alike_pages
from .build import build_report
from .csp import add_csp, add_csp_to_template
from .diff_build import build_rank_diffs
from .job_theme import InJob
from .site_config import build_site, site_config

# Landing links point into the rank sites, which the landing's own MkDocs build cannot see.
_RANK_LINK = re.compile(r'href="(rank_\d+/[^"#]*?)\.md(#[^"]*)?"')


@dataclass
class MultiRankOutcome:
    """What a multi-rank build made, for the terminal summary."""

    ranks: list[RankSummary]
    summaries: dict[int, str]
    clean: bool
    #: every rank's copies of text its compile pages show (see ``ReportPages.artifact_copies``)
    artifact_copies: list[str]


def build_rank_report(
    out_root: str,
    redactor: Redactor | None,
    n_ranks: int,
    trace: Trace,
    summary: RankSummary,
    source: LogSource,
) -> dict:
    """Worker hook: write this rank's complete report into ``out_root/rank_<N>``."""
    site = Path(out_root) / f"rank_{summary.rank}"
    raw_log = source if source.plain_path else None
    trace.rank, trace.job_ranks = summary.rank, n_ranks  # its pages link back to the landing
    if redactor is not None:
        trace.notes.append(redaction_note(redactor))
    # the ranks already run in parallel: each highlights in its own process, no helpers;
    # pages alike with those of the ranks this process built before are converted once
    with alike_pages_shared():
        plugin = build_report(
            trace,
            site,
            raw_log=raw_log,
            highlight_workers=0,
            site_name=f"Rank {summary.rank}",
            extra_plugins={"tlsite_job": InJob()},
        )
    summary_line = f"{trace.stats.summary()}; found {plugin.found}"
    copies = [f"rank_{summary.rank}/{name}" for name in plugin.artifact_copies]
    return {"summary": summary_line, "clean": trace.stats.is_clean, "copies": copies}


def build_multirank(
    resolved: ResolvedInput,
    site_dir: Path,
    *,
    jobs: int | None = None,
    export_mode: bool | None = None,
    on_rank: Any = None,
    redactor: Redactor | None = None,
    on_final: Callable[[Path], None] | None = None,
    pool: TaskPool | None = None,
) -> MultiRankOutcome:
    """Write the whole multi-rank site into ``site_dir`` (which must not exist yet).

    With ``redactor`` (whose logs are already redacted as they are read), the ranks are read
    in this process so that it counts every replacement. ``on_final`` is given each file or
    folder besides the ranks' (whose end ``on_rank`` tells) that will not change again, in an
    order that does not depend on timing, before the site is complete (for its zip to
    compress them meanwhile). ``pool`` is the processes to build the ranks with, when the
    caller started them (:func:`~tlsite.core.multirank.early_rank_pool`); it is closed here.
    """
    site_dir.mkdir(parents=True)
    if redactor is not None:
        jobs = 1
        if pool is not None:  # the ranks are read here, for the redactor to count
            pool.close()
            pool = None
    n_ranks = len(job_ranks(resolved))
    hook = functools.partial(build_rank_report, str(site_dir), redactor, n_ranks)
    # the processes that build the ranks build the comparisons too (this one among them)
    with (
        pool if pool is not None else rank_pool(jobs) as pool,
        load_ranks(
            resolved,
            export_mode=export_mode,
            per_rank=hook,
            on_rank=on_rank,
            pool=pool,
        ) as ranks,
    ):
        forget_alike_pages()  # what the ranks built in this process kept (jobs=1)
        summaries = list(ranks.ranks)
        for summary in summaries:
            if summary.empty:  # the rank logged nothing: its report says so
                _build_empty_rank(site_dir, summary, n_ranks)
        report = analyse(summaries)
        landing = render_landing(report)
        written = write_multirank_files(summaries, site_dir)
        if on_final is not None:
            for path in sorted(p for p in site_dir.iterdir() if p.is_file()):
                on_final(path)
            for rank in sorted(written.parity):
                on_final(written.parity[rank])
        landing += build_rank_diffs(
            resolved, report, site_dir, export_mode=export_mode, redactor=redactor, pool=pool
        )
        if on_final is not None:
            for folder in sorted(site_dir.glob("diff_*_*")):
                on_final(folder)
        _build_landing(landing, site_dir, title=f"tlsite: {len(summaries)} ranks")
    lines = {}
    clean = True
    copies: list[str] = []
    for summary in summaries:
        extra = summary.extra if isinstance(summary.extra, dict) else {}
        if summary.error:
            lines[summary.rank] = f"rank {summary.rank}: not readable: {summary.error}"
            clean = False
        elif summary.empty:
            lines[summary.rank] = f"rank {summary.rank}: empty log"
        else:
            lines[summary.rank] = extra.get("summary", f"rank {summary.rank}")
            clean = clean and bool(extra.get("clean", True))
            copies += extra.get("copies", [])
    return MultiRankOutcome(summaries, lines, clean, copies)


def _build_empty_rank(site_dir: Path, summary: RankSummary, n_ranks: int) -> None:
    """A report for an empty rank log, so every rank has its folder and files."""
    source = LogSource(summary.source, lambda: io.BytesIO(b""), summary.rank, 0)
    trace = load_source(source)
    try:
        trace.rank, trace.job_ranks = summary.rank, n_ranks
        trace.notes.append(f"The log of rank {summary.rank} is empty: it logged nothing.")
        site = site_dir / f"rank_{summary.rank}"
        build_report(trace, site, highlight_workers=0, extra_plugins={"tlsite_job": InJob()})
    finally:
        trace.close()


class _LandingPolicy(BasePlugin):
    """The report pages' Content-Security-Policy, for the landing page built without tlsite's
    plugin: it shows trace text too (log names, errors, op names)."""

    def on_post_page(self, output: str, /, *, page: Any, config: Any) -> str:
        return add_csp(output, page=page, config=config)

    def on_post_template(self, output_content: str, /, *, template_name: str, config: Any) -> str:
        return add_csp_to_template(output_content, template_name=template_name, config=config)


def _build_landing(markdown: str, site_dir: Path, *, title: str) -> None:
    """Build the landing page as its own small site and move it into ``site_dir``'s root."""
    logging.getLogger("mkdocs").setLevel(logging.ERROR)
    with scratch_folder("landing", soon=True) as scratch:
        docs = Path(scratch) / "docs"
        docs.mkdir()
        (docs / "index.md").write_text(markdown, encoding="utf-8")
        built = Path(scratch) / "site"
        config = site_config(docs_dir=str(docs), site_dir=str(built), site_name=title)
        config["nav"] = [{"All ranks": "index.md"}]
        policy = _LandingPolicy()
        policy.load_config({})
        build_site(config, config_dir=scratch, extra_plugins={"tlsite_csp": policy})
        index = built / "index.html"
        index.write_text(
            _RANK_LINK.sub(r'href="\1.html\2"', index.read_text(encoding="utf-8")),
            encoding="utf-8",
        )
        for item in built.iterdir():
            shutil.move(str(item), site_dir / item.name)

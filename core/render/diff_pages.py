"""The pages of a ``tlsite diff`` site, as Markdown: the summary and one page per matched
compile (templates ``diff_summary.md`` and ``diff_compile.md``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis import status as status_mod
from ..analysis.diff import MIN_SECONDS, NOISE_SHARE, TraceDiff
from .templating import render_markdown

#: Findings listed in each box of the summary (the rest are in the tables below it).
MAX_FINDINGS = 12
#: Rows of the summary's compiles table and config table; diff.json has them all.
MAX_COMPILE_ROWS = 500
MAX_CONFIG_ROWS = 60
#: Nodes named per list on a compile page.
MAX_NODES = 40


@dataclass
class DiffPage:
    path: str  # relative to the docs folder
    title: str
    markdown: str


def _labels() -> dict[str, object]:
    return {"labels": status_mod.LABELS, "short_labels": status_mod.SHORT_LABELS}


def render_summary(diff: TraceDiff) -> str:
    frames = diff.frames
    compiles = [c for f in frames for c in f.compiles]
    return render_markdown(
        "diff_summary.md",
        diff=diff,
        noise_percent=round(100 * NOISE_SHARE),
        noise_seconds=MIN_SECONDS,
        max_findings=MAX_FINDINGS,
        max_config=MAX_CONFIG_ROWS,
        matched_frames=sum(1 for f in frames if f.before and f.after),
        only_before=[f for f in frames if f.after is None],
        only_after=[f for f in frames if f.before is None],
        recompiled=[f for f in frames if any(r for r in f.recompiles)],
        by_time=sorted(
            frames,
            key=lambda f: -max(abs((f.seconds[1] or 0.0) - (f.seconds[0] or 0.0)), 0.0),
        ),
        pages=diff.compile_pages,
        matched_compiles=sum(1 for c in compiles if c.before and c.after),
        compiles=compiles[:MAX_COMPILE_ROWS],
        compiles_left_out=max(0, len(compiles) - MAX_COMPILE_ROWS),
        **_labels(),
    )


def render_pages(diff: TraceDiff) -> list[DiffPage]:
    """Every page of the site: ``index.md`` first, then ``compiles/<n>.md``."""
    pages = [DiffPage("index.md", "What changed", render_summary(diff))]
    for pair in diff.compile_pages:
        guard_diff = pair.guard_diff()
        markdown = render_markdown(
            "diff_compile.md",
            pair=pair,
            guard_diff=guard_diff,
            has_guards=bool(pair.before and pair.before.guards()),
            graphs=pair.graph_diffs(),
            code=pair.code_diffs(),
            times=pair.time_rows(),
            metrics=pair.metric_changes(),
            max_nodes=MAX_NODES,
            **_labels(),
        )
        pages.append(DiffPage(pair.page, f"{pair.frame.label} {pair.label}", markdown))
    return pages

"""The landing page of a multi-rank report: did the ranks do the same thing?

A warning box lists the divergences first, each followed by a few sentences saying in words what
differs (which compile ids, cache lookups or collectives, on which ranks, each linked to its
evidence), then one section per analysis groups the ranks that agree and links the compile ids
where they differ to the evidence on each rank's pages
(``rank_<N>/index.md``, ``rank_<N>/<dirname>/index.md``). The page grows with the number of
ranks and of *differing* compile ids (capped), never with ranks × compile ids.

tlparse's phrases are kept where its tests and users look for them. In tlparse's HTML each
warning is ``<p><strong>Warning:</strong> …</p>`` inside a ``warning-box`` div; here the box is a
Material ``warning`` admonition and each item starts with ``**Warning:**``, which renders as
``<strong>Warning:</strong> …`` inside it, so a check for ``Warning:</strong> Diverging …`` on
the built page still finds it. Group items read ``Ranks: 0, 2`` as in tlparse (runs of three or
more ranks are shortened to ``0–4``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from markupsafe import Markup

from ..analysis.divergence import (
    CACHE_MISMATCH,
    SCHEDULE_MISMATCH,
    Evidence,
    MultiRankReport,
    analyse,
    format_ranks,
    ranks_phrase,
)
from ..multirank import RankSummary
from .templating import render_markdown

#: Caps that keep the page linear in the number of ranks.
MAX_DIFFERENCES = 20  # compile ids listed per analysis
MAX_VARIANTS = 6  # versions of one compile id listed
MAX_GROUPS = 40  # rank groups listed per analysis
MAX_FINDINGS = 10  # parity findings listed per rank group
MAX_RUNTIME_ROWS = 30
MAX_PROBLEMS = 30


def ranks_markup(ranks: Sequence[int]) -> Markup:
    """``0, 2`` (digits, commas and dashes only: nothing to escape)."""
    return Markup(format_ranks(ranks))


def rank_names(ranks: Sequence[int]) -> Markup:
    """tlparse's ``Rank 0, Rank 1``; long lists are shortened to ``Ranks 0–63``."""
    if len(ranks) <= 4:
        return Markup(", ".join(f"Rank {r}" for r in ranks))
    return Markup(f"Ranks {format_ranks(ranks)}")


def _number(value: float, places: int) -> Markup:
    return Markup(f"{value:.{places}f}")


def _issue_text(issues: frozenset[str]) -> str:
    parts = []
    if SCHEDULE_MISMATCH in issues:
        parts.append("schedule mismatch")
    if CACHE_MISMATCH in issues:
        parts.append("cache hit/miss mismatch")
    return ", ".join(parts) or "different graphs, same schedule and cache outcome"


#: Where a shared prefix of the ranks' log names may end, so the part shown starts whole.
_NAME_BREAK = re.compile(r"[/:_.-]")


def _common_start(texts: Sequence[str]) -> str:
    """The longest text every one of ``texts`` starts with."""
    first, last = min(texts), max(texts)
    n = 0
    while n < len(first) and first[n] == last[n]:
        n += 1
    return first[:n]


def log_name_parts(sources: Sequence[str]) -> tuple[str, str]:
    """The prefix and suffix all the ranks' log names share (``ddp16/…rank_`` and ``.log``),
    so the Ranks table shows only what tells one log from another: a 60-character name
    wraps into a five-line cell. The prefix ends at a separator and the suffix starts at a
    dot, so no rank's shown part is cut inside a word; ("", "") for fewer than two names."""
    if len(sources) < 2:
        return "", ""
    prefix = _common_start(sources)
    cut = max((m.end() for m in _NAME_BREAK.finditer(prefix)), default=0)
    prefix = prefix[:cut]
    rest = [s[len(prefix) :] for s in sources]
    suffix = _common_start([s[::-1] for s in rest])[::-1]
    suffix = suffix[suffix.find(".") :] if "." in suffix else ""
    if any(len(s) <= len(suffix) for s in rest):  # a name would show as nothing
        return prefix if all(rest) else "", ""
    return prefix, suffix


def _evidence_href(rank: int, dirname: str, artifact: int | None) -> str:
    return Evidence(rank, dirname, artifact).href


def render_landing(
    report: MultiRankReport | Sequence[RankSummary], *, title: str | None = None
) -> str:
    """The landing page (``index.md`` at the site root) as Markdown.

    Give it the rank summaries from :func:`tlsite.core.multirank.load_ranks` (they are
    analysed here) or an already computed :class:`MultiRankReport`.
    """
    if not isinstance(report, MultiRankReport):
        report = analyse(list(report))
    readable = [r for r in report.ranks if r.ok]
    logged = {
        "cache": any(u.cache for r in readable for u in r.units),
        "collectives": any(u.schedule for r in readable for u in r.units),
        "tensor_meta": any(u.tensor_meta for r in readable for u in r.units),
    }
    compile_ids = {u.key for r in readable for u in r.compile_units}
    log_prefix, log_suffix = log_name_parts([r.source for r in report.ranks])
    counts = Counter(len(r.compile_units) for r in readable)
    return render_markdown(
        "landing.md",
        title=title or f"Multi-rank report: {len(report.ranks)} ranks",
        report=report,
        logged=logged,
        n_compile_ids=len(compile_ids),
        log_prefix=log_prefix,
        log_suffix=log_suffix,
        usual_compile_ids=counts.most_common(1)[0][0] if counts else None,
        log_part=lambda source: source[len(log_prefix) : len(source) - len(log_suffix)],
        ranks=ranks_markup,
        rank_names=rank_names,
        on_ranks=lambda ranks: Markup(ranks_phrase(ranks)),
        ms=lambda value: _number(value, 3),
        seconds=lambda value: _number(value, 2),
        issue_text=_issue_text,
        evidence_href=_evidence_href,
        max_differences=MAX_DIFFERENCES,
        max_variants=MAX_VARIANTS,
        max_groups=MAX_GROUPS,
        max_findings=MAX_FINDINGS,
        max_runtime_rows=MAX_RUNTIME_ROWS,
        max_problems=MAX_PROBLEMS,
    )

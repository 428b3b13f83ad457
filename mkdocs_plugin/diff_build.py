"""Build the site of ``tlsite diff``: a Markdown tree of the diff pages, built by MkDocs with
the offline configuration and the report pages' Content-Security-Policy, plus ``diff.json``.

The pages are plain Markdown (:mod:`tlsite.core.render.diff_pages`), so the tree builds the
same with ``mkdocs build``; only the policy is added by the small plugin here.
"""

from __future__ import annotations

import dataclasses
import html
import json
import logging
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import Files, InclusionLevel
from mkdocs.structure.pages import Page, _RelativePathTreeprocessor

from tlsite.core import LogSource, ResolvedInput, load_source
from tlsite.core.analysis.diff import TraceDiff, diff_traces
from tlsite.core.analysis.divergence import MultiRankReport
from tlsite.core.cleanup import scratch_folder
from tlsite.core.model import Trace
from tlsite.core.redact import Redactor
from tlsite.core.render import fast_markdown
from tlsite.core.render.diff_pages import render_pages
from tlsite.core.render.templating import render_markdown
from tlsite.core.worker import TaskPool

from .csp import add_csp, add_csp_to_template
from .deferred_page import site_markdown, take_conversion
from .job_theme import InJob
from .search_index import use_report_index
from .site_config import build_site, site_config
from .stamp import Stamping

DIFF_JSON = "diff.json"
#: The comparison's one page in the navigation, and its title there; the others are reached
#: from its links.
_INDEX = "index.md"
_INDEX_TITLE = "What changed"


class _ComparePage(Page):
    """A comparison's page: converted by :func:`fast_markdown.convert` when its body is in
    the subset with prose (the summary, a compile pair's page without a code diff), else by
    Python-Markdown as usual."""

    def render(self, config: MkDocsConfig, files: Files) -> None:
        converted = None
        if site_markdown(config) and isinstance(self.meta.get("title"), str):
            assert self.markdown is not None
            converted = fast_markdown.convert(
                self.markdown, prose=True, link=_page_links(self, config, files)
            )
        if converted is None:
            super().render(config, files)
        else:
            take_conversion(self, converted, config)


def _page_links(page: Page, config: MkDocsConfig, files: Files) -> fast_markdown.Link:
    """A link's target as MkDocs writes it on ``page``, for a link to an anchor of the page
    or to a file of ``files`` (None for others: MkDocs would warn about them, Python-Markdown
    converts the page)."""
    rewrite = _RelativePathTreeprocessor(page.file, files, config)

    def link(url: str) -> str | None:
        if url.startswith("#"):  # MkDocs keeps it (and checks the anchor: logs only)
            return url
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), url))
        if files.get_file_from_path(target) is None:
            return None
        return rewrite.path_to_url(url)

    return link


class _DiffPolicy(BasePlugin):
    """The report pages' Content-Security-Policy: diff pages show trace text too. The pages
    outside the navigation (one per compile) are converted without Python-Markdown when
    they can be (:class:`_ComparePage`) and written from one render of Material's template
    (:class:`~.stamp.PageStamp`), as a report's are.

    Their search index is Material's, its pages divided into sections without Material's
    HTML parser (:class:`~.search_index.ReportSearchIndex`, every section indexed where it
    is: a comparison site has no code index to list the pages that repeat one)."""

    def __init__(self) -> None:
        super().__init__()
        self._stamping = Stamping()

    def on_files(self, files: Files, /, *, config: Any) -> Files:
        use_report_index(config, shared_min=None)
        for file in files.documentation_pages():
            if file.src_uri == _INDEX:  # with the title the navigation gives it
                _ComparePage(_INDEX_TITLE, file, config)  # MkDocs keeps it as the file's page
            else:  # reached from the index page's links
                file.inclusion = InclusionLevel.NOT_IN_NAV
                _ComparePage(None, file, config)
        return files

    def on_nav(self, nav: Any, /, *, config: Any, files: Files) -> None:
        self._stamping.on_nav(files)

    def on_page_markdown(self, markdown: str, /, *, page: Any, config: Any, files: Any) -> None:
        self._stamping.on_page_markdown(page)

    def on_env(self, env: Any, /, *, config: Any, files: Files) -> Any:
        self._stamping.on_env(env)
        return env

    def on_post_page(self, output: str, /, *, page: Any, config: Any) -> str:
        return add_csp(output, page=page, config=config)

    def on_post_template(self, output_content: str, /, *, template_name: str, config: Any) -> str:
        return add_csp_to_template(output_content, template_name=template_name, config=config)


def diff_json(diff: TraceDiff) -> str:
    """``diff.json``: keys sorted, so two runs of the same diff write the same bytes."""
    return json.dumps(diff.as_json(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_diff_tree(diff: TraceDiff, docs: Path) -> list[str]:
    """Write the pages and ``diff.json`` into ``docs``; returns the pages written."""
    written = []
    for page in render_pages(diff):
        dest = docs / page.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(page.markdown, encoding="utf-8")
        written.append(page.path)
    (docs / DIFF_JSON).write_text(diff_json(diff), encoding="utf-8")
    return written


def build_diff_site(diff: TraceDiff, site_dir: Path, *, in_job: bool = False) -> int:
    """Write the diff site into ``site_dir`` (which must not exist yet); returns its pages.
    ``in_job``: the site is a folder of a job's site, whose root has the theme's files."""
    logging.getLogger("mkdocs").setLevel(logging.ERROR)
    with scratch_folder("diff", soon=True) as scratch:
        docs = Path(scratch) / "docs"
        docs.mkdir()
        pages = write_diff_tree(diff, docs)
        title = f"tlsite diff: {diff.before.source} → {diff.after.source}"
        config = site_config(
            docs_dir=str(docs), site_dir=str(site_dir), site_name=html.escape(title)
        )
        config["nav"] = [{_INDEX_TITLE: _INDEX}]
        policy = _DiffPolicy()
        policy.load_config({})
        plugins: dict[str, BasePlugin] = {"tlsite_csp": policy}
        if in_job:
            plugins["tlsite_job"] = InJob()
        build_site(config, config_dir=scratch, extra_plugins=plugins)
    return len(pages)


#: Rank pairs of a multi-rank job compared on its landing page (each is a site of its own),
#: and the most log bytes read again for them: the ranks' models are gone by then. Pairs past
#: either are named on the landing page as not compared, with why.
MAX_RANK_DIFFS = 8
MAX_RANK_DIFF_BYTES = 256 * 1024 * 1024
#: Regressions (and improvements) a pair's verdict names on the landing page.
MAX_VERDICT_FINDINGS = 3


def diverging_pairs(report: MultiRankReport) -> list[tuple[int, int]]:
    """(first rank of the largest group, first rank of another group) for each way the ranks
    diverged in what they compiled, cached, scheduled or described, without repeats: every
    group that differs is compared with the largest (the caller caps how many are built)."""
    pairs: list[tuple[int, int]] = []
    comparisons = (report.compile_ids, report.cache, report.collectives, report.tensor_meta)
    for comparison in comparisons:
        if not comparison.divergent:
            continue
        for group in comparison.groups[1:]:
            pair = (comparison.groups[0][0], group[0])
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def build_rank_diffs(
    resolved: ResolvedInput,
    report: MultiRankReport,
    site_dir: Path,
    *,
    export_mode: bool | None = None,
    redactor: Redactor | None = None,
    pool: TaskPool | None = None,
) -> str:
    """Write ``diff_<a>_<b>/`` for each diverging pair of ranks (their logs read again, up to
    :data:`MAX_RANK_DIFFS` pairs and :data:`MAX_RANK_DIFF_BYTES`); returns the landing page's
    section linking them and naming the pairs left out ("" when the ranks did not diverge).
    ``redactor``: the one the logs are read through, whose stats keep describing the ranks'
    own pass.

    The pairs share ranks (the largest group's first rank is in each pair with another
    group): a rank's log is read once per process that builds pairs, and its model kept only
    while a later pair needs it. ``pool``: the processes that built the ranks, which build
    the pairs too.
    """
    logs = {log.rank: log for log in resolved.logs}
    pairs: list[tuple[int, int]] = []
    left_out: list[tuple[int, int, str]] = []
    budget = MAX_RANK_DIFF_BYTES
    for a, b in diverging_pairs(report):
        if a not in logs or b not in logs:
            continue
        if len(pairs) == MAX_RANK_DIFFS:
            left_out.append((a, b, f"at most {MAX_RANK_DIFFS} comparisons are built"))
            continue
        size = (logs[a].size_hint or 0) + (logs[b].size_hint or 0)
        if size > budget:
            mib = MAX_RANK_DIFF_BYTES // (1024 * 1024)
            left_out.append((a, b, f"the logs read again for comparisons stay under {mib} MiB"))
            continue
        budget -= size
        pairs.append((a, b))
    kept = redactor.stats if redactor is not None else None
    # the pairs shared out among the pool's processes (interleaved: their costs are alike),
    # each reading a rank once for all its pairs; in this process alone when there is no
    # pool or the logs are read through the redactor (its stats count this process's reads)
    shares = 1 if pool is None or redactor is not None else min(pool.processes, len(pairs))
    shares = max(shares, 1)  # no pairs: one empty share, left out below
    tasks = [
        _PairsTask(share, {r: logs[r] for pair in share for r in pair}, str(site_dir), export_mode)
        for share in (pairs[k::shares] for k in range(shares))
        if share
    ]
    if pool is None or shares == 1:
        results = [_build_pairs(task) for task in tasks]
    else:
        tasks = [
            dataclasses.replace(task, logs={r: log.portable() for r, log in task.logs.items()})
            for task in tasks
        ]
        results = list(pool.run(_BUILD_PAIRS, tasks))
    compared = {pair: diff for result in results for pair, diff in result}
    made = []
    for a, b in pairs:
        if compared[a, b] is None:
            left_out.append((a, b, "a log is not a trace"))
        else:
            made.append((a, b, compared[a, b]))
    if redactor is not None and kept is not None:
        redactor.stats = kept
    if not made and not left_out:
        return ""
    return render_markdown(
        "diff_rank_links.md", pairs=made, left_out=left_out, max_findings=MAX_VERDICT_FINDINGS
    )


@dataclass(frozen=True)
class _PairsTask:
    """Comparison sites to build in one process: ``site/diff_<a>_<b>/`` for each pair."""

    pairs: list[tuple[int, int]]
    logs: dict[int, LogSource]
    site: str
    export_mode: bool | None


_BUILD_PAIRS = "tlsite.mkdocs_plugin.diff_build:_build_pairs"


def _build_pairs(task: _PairsTask) -> list[tuple[tuple[int, int], TraceDiff | None]]:
    """Build each pair's site; per pair, the diff the landing page's verdict row shows
    (without its compiles, which refer to the models closed here), or None when a log is not
    a trace. A rank in several pairs is read once, and kept only while a later pair needs it."""
    found: list[tuple[tuple[int, int], TraceDiff | None]] = []
    traces: dict[int, Trace] = {}
    try:
        for index, (a, b) in enumerate(task.pairs):
            for rank in (a, b):
                if rank not in traces:
                    traces[rank] = load_source(task.logs[rank], export_mode=task.export_mode)
            if traces[a].stats.not_a_trace() or traces[b].stats.not_a_trace():
                found.append(((a, b), None))
            else:
                diff = diff_traces(traces[a], traces[b])
                build_diff_site(diff, Path(task.site) / f"diff_{a}_{b}", in_job=True)
                found.append(((a, b), dataclasses.replace(diff, frames=[])))
            later = {rank for pair in task.pairs[index + 1 :] for rank in pair}
            for rank in [r for r in traces if r not in later]:
                traces.pop(rank).close()
    finally:
        for trace in traces.values():
            trace.close()
    return found

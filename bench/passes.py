"""Where one build's main thread spends its CPU, pass by pass (issue #19, ``stormcpu``).

Runs ``tlsite build`` in this process with a timer (thread CPU time, system time included)
around each pass a report page goes through, and prints each pass's total, its calls and its
cost per call and per compile page. Passes nest (``page: write`` is inside ``page: MkDocs``);
helper processes (highlighting, the zip) are not counted here: ``ab_build.py`` counts the
whole process tree.

    python bench/passes.py TRACE [tlsite build options...]
"""

from __future__ import annotations

import argparse
import functools
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

START_CPU = time.process_time()

import mkdocs.commands.build as mkdocs_build  # noqa: E402
from scratch_disk import warn_if_unjournaled  # noqa: E402

from tlsite import cli  # noqa: E402
from tlsite.core import builder  # noqa: E402
from tlsite.core.render import compat, fast_markdown, pages  # noqa: E402
from tlsite.mkdocs_plugin import deferred_page, prepared, report, search_index  # noqa: E402

IMPORTS_CPU = time.process_time() - START_CPU

#: (label, owner, attribute): each pass, in the order a page meets them.
PASSES: list[tuple[str, Any, str]] = [
    ("read the trace", builder.TraceBuilder, "read"),
    ("tlparse files", compat.CompatWriter, "write_all"),
    ("render the Markdown tree (templates)", prepared, "render_tree"),
    ("page: MkDocs _build_page (all below)", mkdocs_build, "_build_page"),
    ("page: convert (on_page_context)", deferred_page.DeferredPage, "convert"),
    ("page:   fast_markdown", fast_markdown, "convert"),
    ("page:   Python-Markdown (other pages)", deferred_page, "render_alike"),
    ("page: insert HTML parts", report, "insert_parts"),
    ("page: search entries", search_index.ReportSearchIndex, "add_entry_from_context"),
    ("page:   divide into sections", search_index, "sections"),
    ("page: on_post_page (all below)", report.ReportPages, "on_post_page"),
    ("page:   content security policy", report, "add_csp"),
    ("page:   code put in after writing", report, "_put_code"),
    ("page: write the file", mkdocs_build.utils, "write_file"),
    ("unit_page (a compile page's templates)", pages.ReportRenderer, "unit_page"),
]


def _timed(totals: dict[str, list[float]], label: str, function: Any) -> Any:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        before = time.thread_time()
        system = resource.getrusage(resource.RUSAGE_THREAD).ru_stime
        try:
            return function(*args, **kwargs)
        finally:
            total = totals[label]
            total[0] += time.thread_time() - before
            total[1] += resource.getrusage(resource.RUSAGE_THREAD).ru_stime - system
            total[2] += 1

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    known, rest = parser.parse_known_args()
    totals: dict[str, list[float]] = {label: [0.0, 0.0, 0] for label, _, _ in PASSES}
    for label, owner, name in PASSES:
        setattr(owner, name, _timed(totals, label, getattr(owner, name)))
    with tempfile.TemporaryDirectory() as folder:
        warn_if_unjournaled(folder)
        out = Path(folder) / "site"
        started, cpu = time.perf_counter(), time.process_time()
        cli.main(["build", known.trace, "-o", str(out), "--no-browser", "--quiet", *rest])
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        compile_pages = len(list(out.glob("**/-_*/index.html")))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    per = max(compile_pages, 1)
    print(f"{known.trace}: {compile_pages} compile pages")
    print(f"{'pass':42s} {'CPU s':>7s} {'sys s':>6s} {'calls':>6s} {'ms/call':>8s} {'ms/id':>6s}")
    imports = IMPORTS_CPU
    print(f"{'imports':42s} {imports:7.3f} {'':6s} {1:6d} {'':8s} {imports / per * 1e3:6.2f}")
    for label, (seconds, system, calls) in totals.items():
        if calls:
            each = seconds / calls * 1e3
            print(
                f"{label:42s} {seconds:7.3f} {system:6.3f} {int(calls):6d} {each:8.3f} "
                f"{seconds / per * 1e3:6.2f}"
            )
    print(
        f"build process: {cpu:.3f} s CPU (user {usage.ru_utime:.3f}, system {usage.ru_stime:.3f}"
        f" since start), {wall:.3f} s wall; helper processes {children.ru_utime:.3f} user, "
        f"{children.ru_stime:.3f} system"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()

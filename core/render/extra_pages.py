"""Pages beyond the core report: inductor provenance, kernel stack traces, draft export.

They live apart from :mod:`.pages` because they have their own inputs (the analyses in
:mod:`tlsite.core.analysis.provenance` and :mod:`~tlsite.core.analysis.export_report`) and their
own page furniture (a three-pane viewer with its own script). :func:`extend_tree` adds them to a
:class:`~.pages.SiteTree`; :func:`unit_links` and :func:`export_lead` give the compile-id page and
the overview what they need to link to them.

Provenance pages are computed once per renderer and kept (see :func:`_state`): the compile-id
pages need to know which provenance views exist, and the views are only known after the
mapping artifacts have been paired with their graphs and code. A unit whose inputs are
byte-identical to an earlier unit's (FX graph cache hits in a recompile storm) gets no pages of
its own: its links lead to the earlier unit's, and say so.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import dropwhile
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from markupsafe import Markup

from ..analysis import export_report as export_mod
from ..analysis.provenance import (
    KernelTraces,
    Provenance,
    fx_cache_hit_key,
    kernel_stack_traces_by_artifact,
    provenances,
    rust_lines,
    shared_provenance,
)
from ..model import Artifact, CompileUnit, Event
from .escape import h
from .highlight import CodeBlock
from .page import (
    ASSET_DIR,
    CODE_PLACEHOLDER,
    INLINE_HEAD_LINES,
    INLINE_LIMIT,
    Page,
    SiteTree,
    theme_file_url,
)
from .templating import render, render_markdown
from .vllm_page import vllm_lead, vllm_pages  # noqa: F401 (vllm_lead: for the overview)

if TYPE_CHECKING:
    from .pages import ReportRenderer

#: Index of every provenance and kernel-stack-trace page.
PROVENANCE_INDEX = "provenance.md"
EXPORT_REPORT = "export_report.md"
#: With more pages than this, the Provenance section of the navigation lists only the index.
MAX_NAV_ENTRIES = 40
#: Characters escaped in the embedded JSON so it can never end its ``<script>`` element.
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
_AOT_ID = re.compile(r"#\s*AOT ID:\s*\[?'?\d*_?([A-Za-z]+)")
_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.\w+\(", re.M)


# -- provenance -------------------------------------------------------------------------------
@dataclass
class ProvenanceView:
    """One provenance page: a node-mapping artifact with its graphs and code."""

    unit: CompileUnit
    index: int  # 1-based, in log order
    count: int  # views of this unit
    label: str  # "forward", "backward", "inference", "AOTInductor", "graph 2", or "" if alone
    path: str  # docs-relative Markdown path
    page: Page


@dataclass
class _State:
    """What the extra pages of one renderer are, computed once."""

    views: dict[int, list[ProvenanceView]] = field(default_factory=dict)  # id(unit) → views
    kernel_pages: dict[int, tuple[Page, int]] = field(default_factory=dict)  # → (page, kernels)
    #: units whose pages would repeat an earlier unit's (FX graph cache hits): → that unit
    same: dict[int, CompileUnit] = field(default_factory=dict)


_STATES: WeakKeyDictionary[ReportRenderer, _State] = WeakKeyDictionary()


def _state(renderer: ReportRenderer) -> _State:
    state = _STATES.get(renderer)
    if state is None:
        # any_folder: records logged without an attempt sit in ``…_-`` folders (spec §9 fix)
        state = _State(same=shared_provenance(renderer.trace, any_folder=True))
        shared_by: dict[int, list[CompileUnit]] = {}
        for unit in renderer.trace.units.values():
            first = state.same.get(id(unit))
            if first is not None:
                shared_by.setdefault(id(first), []).append(unit)
        for unit in renderer.trace.units.values():
            if id(unit) in state.same:
                continue  # its pages are the first one's; they say so and list it
            sources = kernel_stack_traces_by_artifact(renderer.trace, unit)
            kernel_path = kernel_traces_path(unit) if sources else None
            also = shared_by.get(id(unit), [])
            views = _provenance_views(renderer, unit, kernel_path, also)
            if views:
                state.views[id(unit)] = views
            if sources:
                state.kernel_pages[id(unit)] = _kernel_trace_page(renderer, unit, sources, views)
        _STATES[renderer] = state
    return state


def provenance_path(unit: CompileUnit, index: int, count: int) -> str:
    """tlparse's ``provenance_tracking_<D>.html`` for the last view (the one tlparse shows,
    so scripts reading its ``lineMappings`` keep working); earlier views get ``.<k>`` added.
    """
    suffix = "" if index == count else f".{index}"
    return f"provenance_tracking_{unit.dirname}{suffix}.md"


def kernel_traces_path(unit: CompileUnit) -> str:
    return f"{unit.dirname}/kernel_stack_traces.md"


def _provenance_views(
    renderer: ReportRenderer, unit: CompileUnit, kernel_path: str | None, also: list[CompileUnit]
) -> list[ProvenanceView]:
    found = provenances(renderer.trace, unit, any_folder=True)
    labels = _labels(found)
    views = []
    for index, (view, label) in enumerate(zip(found, labels, strict=True), 1):
        path = provenance_path(unit, index, len(found))
        others = [
            {"label": other or f"graph {k}", "path": provenance_path(unit, k, len(found))}
            for k, other in enumerate(labels, 1)
        ]
        kernel_href = _rel(path, kernel_path) if kernel_path else None
        page = _provenance_page(renderer, unit, view, path, label, index, others, kernel_href, also)
        views.append(ProvenanceView(unit, index, len(found), label, path, page))
    return views


def _labels(views: list[Provenance]) -> list[str]:
    """What each view is: the graph kind the generated code names, so users pick the right one."""
    if len(views) <= 1:
        return [""] * len(views)
    labels = [graph_kind(view) or f"graph {number}" for number, view in enumerate(views, 1)]
    counts = Counter(labels)
    return [
        f"{label} {number}" if counts[label] > 1 else label
        for number, label in enumerate(labels, 1)
    ]


def graph_kind(view: Provenance) -> str:
    """ "forward", "backward", "inference" (the generated code's ``# AOT ID``), "AOTInductor",
    or "" when the code does not say."""
    if view.is_cpp:
        return "AOTInductor"
    match = _AOT_ID.search(view.py_code[:2000])
    return match.group(1) if match else ""


def kernel_names(code: str) -> list[str]:
    """The kernels a Python wrapper defines (``name = async_compile.triton(`` / ``.cpp…(``)."""
    return _KERNEL_DEF.findall(code)


def _rel(from_path: str, to_path: str) -> str:
    """Relative Markdown link between two docs-relative paths (both at the docs root here)."""
    depth = from_path.count("/")
    return "../" * depth + to_path


def pane_text(view: Provenance) -> tuple[str, str, str]:
    """The three panes' texts, split into lines exactly as the line maps count them.

    Graphs keep every line (Rust's ``str::lines``). Code drops its leading empty lines, and
    Python code starts at its ``# AOT ID:`` line, since tlparse numbers Python lines from there.
    """
    pre = "\n".join(rust_lines(view.pre_text))
    post = "\n".join(rust_lines(view.post_text))
    code = rust_lines("\n".join(dropwhile(lambda line: line == "", rust_lines(view.code))))
    if not view.is_cpp:
        base = next((i for i, line in enumerate(code) if "# AOT ID:" in line), 0)
        code = code[base:]
    return pre, post, "\n".join(code)


def mappings_json(mappings: dict[str, Any]) -> Markup:
    """The line maps as inert JSON for ``<script type="application/json">``."""
    text = json.dumps(mappings, indent=2, sort_keys=True)
    for char, escaped in _JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return Markup(text)


def _asset(renderer: ReportRenderer, page_path: str, name: str) -> str:
    url = "../" * (renderer.prefix + page_path).count("/") + f"{ASSET_DIR}/{name}"
    return theme_file_url(url, in_job=renderer.trace.job_ranks is not None)


def _artifact_info(
    renderer: ReportRenderer, unit: CompileUnit, artifact: Artifact | None, page_path: str
) -> dict[str, Any] | None:
    if artifact is None:
        return None
    up = "../" * page_path.count("/")
    return {
        "name": artifact.name,
        "number": artifact.number,
        "raw_href": f"{up}{artifact.path}" if artifact.path else None,
        "report_href": f"{up}{unit.dirname}/index.html#artifact-{artifact.number}",  # raw HTML
        "report_md": f"{up}{unit.dirname}/index.md#artifact-{artifact.number}",  # Markdown
    }


def _provenance_page(
    renderer: ReportRenderer,
    unit: CompileUnit,
    view: Provenance,
    path: str,
    label: str,
    index: int,
    others: list[dict[str, str]],
    kernel_href: str | None,
    also: list[CompileUnit],
) -> Page:
    pre, post, code = pane_text(view)
    inputs = view.inputs
    linked = sum(len(lines) for lines in view.mappings.values())
    code_artifact = inputs.cpp_code if view.is_cpp else inputs.py_code
    panes = render(
        "provenance_panes.html",
        css=_asset(renderer, path, "provenance.css"),
        js=_asset(renderer, path, "provenance.js"),
        code_lang="cpp" if view.is_cpp else "python",
        panes=[
            {
                "id": "preGradGraph",
                "title": "Pre-grad graph",
                "text": pre,
                "artifact": _artifact_info(renderer, unit, inputs.pre_grad, path),
            },
            {
                "id": "postGradGraph",
                "title": "Post-grad graph",
                "text": post,
                "artifact": _artifact_info(renderer, unit, inputs.post_grad, path),
            },
            {
                "id": "generatedCode",
                "title": "Generated code (C++ wrapper)"
                if view.is_cpp
                else "Generated code (Python wrapper)",
                "text": code,
                "artifact": _artifact_info(renderer, unit, code_artifact, path),
            },
        ],
        mappings=mappings_json(view.mappings),
        linked=linked,
    )
    title = f"Provenance {unit.display} {label}".strip()
    md = render_markdown(
        "provenance.md",
        title=title,
        unit=unit,
        function=renderer.function_of(unit),
        unit_href=_rel(path, f"{unit.dirname}/index.md"),
        mapping=_artifact_info(renderer, unit, inputs.node_mappings, path),
        index=index,
        others=others,
        valid=bool(view.mappings),
        empty_mapping=_empty(inputs.node_mappings),
        linked=linked,
        pre_logged=bool(pre),
        is_cpp=view.is_cpp,
        kind=graph_kind(view),
        kernels=None if view.is_cpp else kernel_names(code),
        kernel_href=kernel_href,
        also=[{"display": u.display, "href": _rel(path, f"{u.dirname}/index.md")} for u in also],
        panes=Markup(panes),
    )
    return Page(path, md, title)


def _empty(artifact: Artifact | None) -> bool:
    return artifact is not None and (artifact.payload is None or artifact.payload.size == 0)


# -- kernel stack traces ----------------------------------------------------------------------
def _kernel_trace_page(
    renderer: ReportRenderer,
    unit: CompileUnit,
    sources: list[tuple[Artifact, list[KernelTraces]]],
    views: list[ProvenanceView],
) -> tuple[Page, int]:
    """The readable page; a kernel in several artifacts (forward and backward) is listed once
    with all its traces, in log order (as :func:`kernel_stack_traces` merges them).
    """
    merged: dict[str, list[str]] = {}
    for _, kernels in sources:
        for entry in kernels:
            merged.setdefault(entry.kernel, []).extend(entry.traces)
    path = kernel_traces_path(unit)
    title = f"Kernel stack traces {unit.display}"
    md = render_markdown(
        "kernel_traces.md",
        title=title,
        unit=unit,
        function=renderer.function_of(unit),
        kernels=[KernelTraces(kernel, merged[kernel]) for kernel in sorted(merged)],
        sources=[_artifact_info(renderer, unit, artifact, path) for artifact, _ in sources],
        provenance=[{"label": v.label or "provenance", "href": _rel(path, v.path)} for v in views],
    )
    return Page(path, md, title), len(merged)


def provenance_index(renderer: ReportRenderer) -> Page | None:
    """The list of every compile id with provenance or kernel stack traces (None if none)."""
    state = _state(renderer)
    rows = []
    for unit in renderer.trace.units.values():
        first = state.same.get(id(unit))
        owner = unit if first is None else first
        views = state.views.get(id(owner), [])
        kernels = state.kernel_pages.get(id(owner))
        if not views and kernels is None:
            continue
        rows.append(
            {
                "unit": unit,
                "unit_href": f"{unit.dirname}/index.md",
                "function": renderer.function_of(unit),
                "views": [{"label": _index_label(v, first), "href": v.path} for v in views],
                "kernels_href": kernels[0].path if kernels else None,
                "kernels": kernels[1] if kernels else 0,
            }
        )
    if not rows:
        return None
    return Page(PROVENANCE_INDEX, render_markdown("provenance_index.md", rows=rows), "Provenance")


def _index_label(view: ProvenanceView, first: CompileUnit | None) -> str:
    if first is None:
        return view.label or "provenance"
    return f"same as {first.display}'s" + (f" ({view.label})" if view.label else "")


def unit_links(renderer: ReportRenderer, unit: CompileUnit) -> list[dict[str, str]]:
    """Links from a compile-id page (``<D>/index.md``) to its provenance and kernel pages."""
    state = _state(renderer)
    first = state.same.get(id(unit))
    owner = unit if first is None else first
    shared = [] if first is None else [f"same page as {first.display}'s: {_why(renderer, unit)}"]
    links = []
    for view in state.views.get(id(owner), []):
        notes = "; ".join([view.label, *shared] if view.label else shared)
        text = f"Provenance ({notes})" if notes else "Provenance"
        links.append({"text": text, "href": "../" + view.path})
    kernels = state.kernel_pages.get(id(owner))
    if kernels is not None:
        page, count = kernels
        notes = "; ".join([f"{count} kernel{'s' if count != 1 else ''}", *shared])
        href = page.path.rsplit("/", 1)[-1] if first is None else "../" + page.path
        links.append({"text": f"Kernel stack traces ({notes})", "href": href})
    return links


def _why(renderer: ReportRenderer, unit: CompileUnit) -> str:
    """Why a unit's provenance is another's: a cache hit with its key, or plain identity."""
    key = fx_cache_hit_key(renderer.trace, unit)
    if key is None:
        return "identical graphs, code and node mapping"
    return f"FX graph cache hit, key {key[:12]}…"


# -- draft export -----------------------------------------------------------------------------
def _report(renderer: ReportRenderer) -> export_mod.ExportReport | None:
    if not renderer.trace.export_mode:
        return None
    return export_mod.export_report(renderer.trace)


def export_pages(renderer: ReportRenderer) -> tuple[list[Page], list[Any]]:
    """The draft-export report page (export traces only) and its navigation entry."""
    report = _report(renderer)
    if report is None:
        return [], []
    blocks: dict[str, CodeBlock] = {}
    program = _program_view(renderer, report.exported_program, blocks)
    failures = [_failure_view(renderer, f, n) for n, f in enumerate(report.failures, 1)]
    md = render_markdown(
        "export_report.md",
        failures=failures,
        counts=Counter(f["type"] for f in failures).most_common(),
        guards=[_failure_view(renderer, g, 0) for g in report.guards],
        failed_exports=[c for c in renderer.exports if c.failed],
        program=program,
        types=_TYPES,
    )
    page = Page(EXPORT_REPORT, md, "Draft export report", blocks)
    return [page], [{"Draft export report": renderer.prefix + EXPORT_REPORT}]


_TYPES = {
    "guard": export_mod.GUARD_EVALUATED,
    "data_dependent": export_mod.DATA_DEPENDENT_ERROR,
    "missing": export_mod.MISSING_FAKE_KERNEL,
    "mismatched": export_mod.MISMATCHED_FAKE_KERNEL,
    "not_logged": export_mod.NOT_LOGGED,
}


def _program_view(
    renderer: ReportRenderer, program: Artifact | Event | None, blocks: dict[str, CodeBlock]
) -> dict[str, Any] | None:
    if program is None or program.payload is None:
        return None
    store = renderer.trace.store
    ref = program.payload
    head = INLINE_HEAD_LINES if ref.size > INLINE_LIMIT else None
    token = "exported-program"
    blocks[token] = CodeBlock(store.pack_file, ref.offset, ref.size, ref.md5, "python", head)
    path = program.path if isinstance(program, Artifact) else None
    return {
        "block": Markup(CODE_PLACEHOLDER.format(token=token)),
        "raw_href": path,
        "line": program.line,
        "truncated": head is not None,
        "shown_lines": head,
    }


def _failure_view(
    renderer: ReportRenderer, failure: export_mod.ExportFailure, number: int
) -> dict[str, Any]:
    user = failure.user_stack[-1].describe() if failure.user_stack else ""
    symbols = dict(failure.symbols)
    sources = {k: v for k, v in failure.symbol_to_sources.items() if symbols.get(k) != v}
    return {
        "number": number,
        "type": failure.type,
        "is_guard": failure.is_guard,
        "expr": failure.expr,
        "result": failure.result,
        "op": failure.op,
        "mismatch": failure.mismatch,
        "doc_url": failure.doc_url,
        "line": failure.line,
        "unit": failure.unit,
        "unit_href": f"{failure.unit.dirname}/index.md",
        "source_line": (failure.source_line or "").strip(),
        "user": user,
        "locals": sorted(failure.locals.items()),
        "symbols": sorted(symbols.items()),
        "symbol_sources": sorted(sources.items()),
        "user_stack": failure.user_stack,
        "stack": failure.stack,
        "tree": expr_tree_html(failure.expr_tree) if failure.expr_tree else None,
        "tree_size": sum(1 for _ in failure.expr_tree.walk()) if failure.expr_tree else 0,
        "page_href": failure.page.path if failure.page and failure.page.path else None,
        "occurrences": failure.occurrences,
    }


def expr_tree_html(root: export_mod.ExprNode) -> Markup:
    """The symbolic-expression tree as nested lists, built without recursion (trees can be deep).

    Every value is HTML-escaped: expressions and stacks come from the trace.
    """
    parts = ['<ul class="tlsite-expr-tree">']
    depth = -1
    for level, node in root.walk():
        if level > depth:
            parts.append("<ul><li>" if depth >= 0 else "<li>")
        else:
            parts.append("</li>" + "</ul></li>" * (depth - level) + "<li>")
        depth = level
        parts.append(_node_html(node))
    parts.append("</li>" + "</ul></li>" * max(depth, 0) + "</ul>")
    return Markup("".join(parts))


def _node_html(node: export_mod.ExprNode) -> str:
    text = f"<code>{h(node.result)}</code>"
    if node.kind == "create_unbacked_symbol":
        text += " unbacked symbol"
        if node.value_range:
            text += f", range <code>{h(node.value_range)}</code>"
    elif node.method:
        arguments = ", ".join(node.arguments)
        text += f" ← <code>{h(node.method)}({h(arguments)})</code>"
    if node.user_stack:
        frame = node.user_stack[-1]
        text += f' <span class="tlsite-expr-at">at <code>{h(frame.describe())}</code></span>'
    return text


def export_lead(renderer: ReportRenderer) -> dict[str, Any] | None:
    """What the overview of an export trace shows first: the issues and a link to the report."""
    report = _report(renderer)
    if report is None:
        return None
    return {
        "href": EXPORT_REPORT,
        "failures": [_failure_view(renderer, f, n) for n, f in enumerate(report.failures, 1)],
        "counts": list(Counter(f.type for f in report.failures).items()),
        "has_program": report.exported_program is not None,
        "types": _TYPES,
        "failed_exports": [c for c in renderer.exports if c.failed],
    }


# -- the tree ---------------------------------------------------------------------------------
def extend_tree(renderer: ReportRenderer, tree: SiteTree) -> None:
    """Add the extra pages to ``tree``: the export report leads the navigation of an export
    trace; provenance and kernel stack traces get one "Provenance" section.
    """
    p = renderer.prefix
    export, export_nav = export_pages(renderer)
    tree.extend(export)
    tree.nav[:0] = export_nav
    vllm, vllm_nav = vllm_pages(renderer)
    tree.extend(vllm)
    at = next((i for i, entry in enumerate(tree.nav) if "Overview" in entry), -1)
    tree.nav[at + 1 : at + 1] = vllm_nav  # right after the overview
    index = provenance_index(renderer)
    if index is None:
        return
    tree.add(index)
    entries: list[Any] = []
    for pages, nav in _per_unit(renderer):
        tree.extend(pages)
        entries.extend(nav)
    section: list[Any] = [{"All compile ids": p + PROVENANCE_INDEX}]
    if len(entries) <= MAX_NAV_ENTRIES:
        section += entries
    tree.nav.append({"Provenance": section})


def _per_unit(renderer: ReportRenderer) -> Iterator[tuple[list[Page], list[Any]]]:
    """Each unit's provenance pages then its kernel page, so the nav groups them by unit."""
    state = _state(renderer)
    p = renderer.prefix
    for unit in renderer.trace.units.values():
        pages: list[Page] = []
        nav: list[Any] = []
        for view in state.views.get(id(unit), []):
            pages.append(view.page)
            nav.append({f"{unit.display} {view.label}".strip(): p + view.path})
        kernels = state.kernel_pages.get(id(unit))
        if kernels is not None:
            pages.append(kernels[0])
            nav.append({f"{unit.display} kernel stack traces": p + kernels[0].path})
        if pages:
            yield pages, nav

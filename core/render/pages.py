"""Build each report page: gather its facts from the model, render its Markdown template.

One function per page kind. Paths are relative to the docs root (``prefix`` lets the tree
live under a sub-folder when it is embedded in another MkDocs site).
"""

from __future__ import annotations

import contextlib
import html
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from markupsafe import Markup

from ..analysis import artifact_details, views
from ..analysis import status as status_mod
from ..analysis.compile_time import CompileTime, compile_times, self_time_by_phase
from ..analysis.config import RunConfig
from ..analysis.export_report import export_failures
from ..analysis.exports import (
    AOTI_BUILD,
    AOTI_CODE,
    export_calls,
    export_of,
    failures_with_exports,
    outside_compiles,
)
from ..analysis.graph_size import fx_node_count
from ..analysis.interrupted import interrupted
from ..analysis.patterns import failure_groups, recompile_pattern
from ..analysis.stack_trie import compile_trie, unknown_trie
from ..analysis.symbols import unit_symbols
from ..handlers import SYMBOLIC_TYPES
from ..limits import ITEMS_PER_SECTION, ROWS, SECTIONS, Shown, shown
from ..model import BODY_JSON, Artifact, CompileUnit, Event, Trace
from ..records import is_whole_number, loads_bounded
from ..stats import FINDING_REASONS, SKIP_REASONS, count_text
from ..store import PayloadRef
from . import extra_pages
from .code_terms import CodeSection, code_terms, kernel_names, metric_terms
from .compat import is_metrics_page, kernel_stack_traces, pretty_json
from .escape import safe_url, url_path
from .highlight import BLOCK_ID, CodeBlock, Highlighter, highlight_html
from .long_tables import cut_long_tables
from .page import (  # noqa: F401 (re-exported)
    CODE_PLACEHOLDER,
    INLINE_HEAD_LINES,
    INLINE_LIMIT,
    PART_PLACEHOLDER,
    PLACEHOLDER_PATTERN,
    Block,
    CodePart,
    HtmlBlock,
    Page,
    PagePart,
    SiteTree,
)
from .templating import html_macro, macro, render, render_markdown
from .trie_html import trie_html

#: Artifacts open by default when small.
OPEN_KINDS = {
    "dynamo_output_graph",
    "aot_forward_graph",
    "aot_backward_graph",
    "aot_inference_graph",
    "aot_joint_graph",
    "inductor_post_grad_graph",
    "inductor_output_code",
    "bytecode_dump",
}
OPEN_LINE_LIMIT = 300
#: The landing page of a multi-rank site, from a rank report's root (``DIR/rank_<N>/``). A
#: plain ``.html`` link: the landing is outside the rank's docs, and ``file://`` needs a file.
LANDING_HREF = "../index.html"

#: JSON artifacts shown as tables above their raw JSON: name -> reader of the decoded JSON.
DETAIL_READERS: dict[str, Callable[[Any], Any]] = {
    "min_cut_information": artifact_details.min_cut,
    "triton_kernel_info": artifact_details.triton_kernels,
    "memoizer_artifacts": artifact_details.memoizer,
}

#: Artifacts open whatever their size: the traceback is what a failed compile's page is for.
ALWAYS_OPEN = {"dynamo_error"}
#: Artifacts of one compile shown as sections (heading, facts, code); the rest are listed in
#: one table, each row linking its raw file (metrics records past it are only counted).
MAX_ARTIFACT_SECTIONS = SECTIONS
#: Items of each kind "Worst problems first" lists before "and N more".
MAX_PROBLEMS = 5
#: Artifacts that are printed FX graphs (their node count is shown).
GRAPH_KINDS = {
    "dynamo_output_graph",
    "optimize_ddp_split_graph",
    "optimize_ddp_split_child",
    "compiled_autograd_graph",
    "aot_forward_graph",
    "aot_backward_graph",
    "aot_inference_graph",
    "aot_joint_graph",
    "inductor_pre_grad_graph",
    "inductor_post_grad_graph",
}
#: ``artifact`` records that hold a graph: ``before_post_grad_graph``,
#: ``compiled_autograd_graph_pre_reordering``, ... (not ``fx_graph_runnable``, a script).
_GRAPH_ARTIFACT = re.compile(r"_graph(?:_pre_reordering)?$")
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>.+)_at_(?P<line>\d+)$")
#: With more frames than this, the navigation lists only the frames index, and a frame that
#: was never recompiled has no page of its own (see :meth:`ReportRenderer.has_frame_page`).
MAX_FRAMES_IN_NAV = 40


@dataclass(slots=True)
class ArtifactView:
    """What a compile page shows of one artifact (attributes, not a dict: templates read
    them many times per page, and Jinja tries an attribute before a key)."""

    number: int
    name: str
    title: str
    link_url: str | None
    raw_href: str | None
    cache: str | None
    role: str | None
    size_text: str
    kernels: list[str] = field(default_factory=list)
    block: Markup | None = None  # the code block's placeholder
    open: bool = False
    truncated: bool = False
    shown_lines: int = 0
    total_lines: int = 0
    nodes: int | None = None
    lines: int = 0
    code: CodeSection | None = None
    detail: Any = None
    text_view: Any = None
    facts: Markup | None = None
    metrics_page: bool = False  # its raw file is tlparse's page of a metrics record


class ReportRenderer:
    """Renders the pages of one trace; analyses are computed once and shared."""

    def __init__(self, trace: Trace, *, prefix: str = "") -> None:
        self.trace = trace
        self.prefix = prefix
        #: tlparse's copies of artifacts whose text their compile page shows in full, by path
        #: in the site (a zip bundle over GitHub's limit may leave them out)
        self.artifact_copies: list[str] = []
        self.exports = export_calls(trace)
        self._export_of = export_of(self.exports)
        self.statuses = status_mod.statuses(trace, self.exports)
        self.frames = views.frames(trace)
        for frame in self.frames:  # an export's "frame" has no function name: it is the call
            if frame.function == "?" and any(id(u) in self._export_of for u in frame.units):
                frame.function = "torch.export"
        self.labels = function_labels(self.frames)  # frame titles, told apart
        self.graph_breaks = views.graph_breaks(trace)
        self.failures = failures_with_exports(trace, self.exports)
        self.times = compile_times(trace, outside_compiles(trace, self.exports))
        self.recompiles = [r for f in self.frames for r in f.recompiles]
        self._frame_of = {id(u): f for f in self.frames for u in f.units}
        self._times_of: dict[int, list[CompileTime]] = {}
        for time in self.times:
            self._times_of.setdefault(id(time.unit), []).append(time)
        self._recompile_of = {id(r.unit): r for r in self.recompiles}
        # per-unit lookups prepared once: a page must not scan every unit or failure (a
        # recompile storm has thousands of compile ids in one frame)
        self._position = {id(u): i for f in self.frames for i, u in enumerate(f.units)}
        self._failures_of: dict[int, list[views.Failure]] = {}
        for failure in self.failures:
            self._failures_of.setdefault(id(failure.unit), []).append(failure)
        self.interrupted = interrupted(trace, self.statuses)
        self.config = RunConfig(trace)
        self.autograd = self._autograd_units()  # listed on three pages
        self._interrupted_of = {id(cut.unit): cut for cut in self.interrupted}
        self._function_of: dict[int, str] = {}
        #: node count (graphs) and line count of each artifact shown, from its unit page
        self._sizes: dict[int, tuple[int | None, int]] = {}  # artifact number -> its size
        #: what :func:`_code_facts` finds in an artifact's code, by code, name and kind
        self._code_facts: dict[tuple[str, str, str], CodeFacts] = {}
        self._metric_terms: dict[tuple[str, ...], tuple[str, ...]] = {}  # by field names
        self._breaks_of: dict[int, list[views.GraphBreak]] = {}
        for gb in self.graph_breaks:
            for unit in gb.units:
                self._breaks_of.setdefault(id(unit), []).append(gb)

    # -- helpers ---------------------------------------------------------------------------
    def _time_of(self, unit: CompileUnit) -> CompileTime | None:
        """The unit's compile time, when one compile is timed there (a compile id holding
        several export calls shows each call's time in its table instead)."""
        times = self._times_of.get(id(unit), [])
        plain = [t for t in times if not t.label]  # its own compile, beside an AOTI build
        return times[0] if len(times) == 1 else plain[0] if len(plain) == 1 else None

    def _seconds_of(self, unit: CompileUnit) -> float | None:
        """All compile time shown on the unit's page (each export call's, when several)."""
        times = self._times_of.get(id(unit))
        return sum(t.total for t in times) if times else None

    def status(self, unit: CompileUnit) -> str:
        return self.statuses.get(unit.display, status_mod.MISSING)

    @staticmethod
    def unit_path(unit: CompileUnit) -> str:
        return f"{unit.dirname}/index.md"

    def href(self, unit: CompileUnit, *, depth: int) -> str:
        """A raw-HTML link (``.html``) from a page ``depth`` folders deep."""
        return "../" * depth + f"{unit.dirname}/index.html"

    def function_of(self, unit: CompileUnit) -> str:
        """The function compiled (kept: several pages ask)."""
        name = self._function_of.get(id(unit))
        if name is None:
            name = self._function_of[id(unit)] = self._find_function(unit)
        return name

    def _find_function(self, unit: CompileUnit) -> str:
        name = unit.metric("co_name")
        if name:
            return str(name)
        if unit.stack:
            return unit.stack[-1].name
        if id(unit) in self._export_of:
            return "torch.export"
        frame = self._frame_of.get(id(unit))
        return frame.function if frame else ""

    def location_of(self, unit: CompileUnit) -> str:
        filename = unit.metric("co_filename")
        if filename:
            return f"{filename}:{unit.metric('co_firstlineno', '?')}"
        if unit.stack:
            last = unit.stack[-1]
            return f"{last.short_filename}:{last.line}"
        call = self._export_of.get(id(unit))
        if call is not None and call.call_site is not None:
            return f"{call.call_site.short_filename}:{call.call_site.line}"
        return ""

    # -- the tree --------------------------------------------------------------------------
    def found(self) -> str:
        """What the report found, with the overview's counts: the end-of-build line says it."""
        lead = [f"the log ends inside {cut.unit.display} (interrupted)" for cut in self.interrupted]
        if self.trace.export_mode:
            issues = len(export_failures(self.trace))
            lead.append(
                count_text(issues, "draft-export issue") if issues else "no draft-export issues"
            )
        breaks = len(self.graph_breaks)
        hits = sum(b.count for b in self.graph_breaks)
        errors = sum(1 for f in self.failures if not f.is_restart)
        if not (breaks or errors or self.recompiles):
            return ", ".join([*lead, "no graph breaks, compilation failures or recompiles"])
        parts = [count_text(breaks, "graph break")]
        if hits != breaks:
            parts[0] += f" (hit {hits:,} times)"
        parts.append(count_text(errors, "compilation failure"))
        parts.append(count_text(len(self.recompiles), "recompile"))
        return ", ".join([*lead, *parts])

    def render_tree(self, sink: Callable[[Page], None] | None = None) -> SiteTree:
        tree = SiteTree(sink=sink, found=self.found())
        p = self.prefix
        add = tree.add
        add(self.overview())
        add(self.graph_breaks_page())
        add(self.recompiles_page())
        add(self.failures_page())
        add(self.compile_time_page())
        add(self.symbolic_shapes_page())
        add(self.chromium_page())
        add(self.health_page())
        if self.config:
            add(self.config_page())
        if self.trace.unknown_stacks:
            add(self.unknown_stacks_page())
        frame_nav = []  # (title, path): the pages themselves go as they are rendered
        for frame in filter(self.has_frame_page, self.frames):
            page = self.frame_page(frame)
            frame_nav.append((page.title, page.path))
            add(page)
        tree.extend(self.unit_page(u) for u in self.trace.units.values())
        add(self.compile_ids_page())  # after the unit pages: it shows the sizes they measured
        tree.nav = [
            {"Overview": f"{p}index.md"},
            {"All compile ids": f"{p}compile_ids.md"},
            {"Graph breaks": f"{p}graph_breaks.md"},
            {"Recompiles": f"{p}recompiles.md"},
            {"Failures and restarts": f"{p}failures.md"},
            {"Compile time": f"{p}compile_time.md"},
            {"Symbolic shapes": f"{p}symbolic_shapes.md"},
            {"Chromium events": f"{p}chromium.md"},
            {"Parse health": f"{p}health.md"},
        ]
        if self.config:
            tree.nav.insert(-2, {"Config": f"{p}config.md"})
        if self.trace.unknown_stacks:
            tree.nav.append({"Unknown stacks": f"{p}unknown_stacks.md"})
        if self.frames:
            add(self.frames_index())
            entries: list[Any] = [{"All frames": f"{p}frames/index.md"}]
            if self.frames_in_nav:  # else only the index: the navigation stays small
                entries += [{title: f"{p}{path}"} for title, path in frame_nav]
            tree.nav.append({"Frames": entries})
        extra_pages.extend_tree(self, tree)  # provenance, kernel traces, draft-export report
        if self.trace.job_ranks is not None:  # a rank of a multi-rank site: back to its landing
            tree.nav.insert(0, {"All ranks": f"{p}{LANDING_HREF}"})
        tree.nav = escaped_nav(tree.nav)
        tree.artifact_copies = self.artifact_copies
        return tree

    @property
    def frames_in_nav(self) -> bool:
        """Whether the navigation lists each frame (not only the frames index)."""
        return len(self.frames) <= MAX_FRAMES_IN_NAV

    def has_frame_page(self, frame: views.FrameCompiles) -> bool:
        """Whether ``frame`` gets a page. In a report of more frames than the navigation
        lists (a graph-break storm: a frame per break, most compiled once), a frame never
        recompiled has none: it would repeat the frame's row of the index and the chain of
        its compile ids that its first compile's page shows; the index links that page."""
        return self.frames_in_nav or bool(frame.recompiles)

    def frames_index(self) -> Page:
        rows = [
            (
                f,
                f"frame_{_frame_slug(f)}.md"
                if self.has_frame_page(f)
                else f"../{self.unit_path(f.units[0])}",
                sum(1 for _ in f.recompiles),
                self.labels[id(f)],
            )
            for f in self.frames
        ]
        paged = all(self.has_frame_page(f) for f in self.frames)
        blocks: dict[str, Block] = {}
        md = render_markdown(
            "frames_index.md",
            rows=rows,
            autograd=self.autograd,
            prefix="../",
            paged=paged,
            part=self._parts(blocks),
        )
        return Page("frames/index.md", md, "All frames", blocks)

    def _autograd_units(self) -> list[CompileUnit]:
        """Compile ids of compiled autograd's own graphs (``[!0/-/-]``): in no frame."""
        return [
            u
            for u in self.trace.units.values()
            if u.id is not None and u.id.compiled_autograd_id is not None and u.id.frame_id is None
        ]

    def compile_ids_page(self) -> Page:
        """tlparse's index: every compile id in first-seen order with its artifacts."""
        rows = []
        for unit in self.trace.units.values():
            framed = unit.id is not None and unit.id.frame_id is not None
            status = self.status(unit) if framed else None
            artifacts = []
            for a in islice(unit.artifacts, SECTIONS):  # its own page lists them all
                nodes, lines = self._sizes.get(a.number, (None, 0))
                artifacts.append(
                    {
                        "number": a.number,
                        "name": a.name,
                        "role": a.graph_role,
                        "cache": a.cache,
                        "nodes": nodes,
                        "lines": lines,
                        "size": _size_text(a.payload.size) if a.payload else "",
                        "subgraph": a.subgraph,
                    }
                )
            rows.append(
                {
                    "display": unit.display,
                    "dirname": unit.dirname,
                    "href": self.href(unit, depth=0),
                    "status": status,
                    "status_label": status_mod.LABELS[status] if status else "",
                    "status_short": status_mod.SHORT_LABELS[status] if status else "",
                    "function": self.function_of(unit) if framed else "",
                    "seconds": self._seconds_of(unit),
                    "artifacts": artifacts,
                    "more_artifacts": len(unit.artifacts) - len(artifacts),
                    "groups": _by_subgraph(artifacts),
                }
            )
        blocks: dict[str, Block] = {}
        table = self._html_block("compile-ids", render("compile_ids_table.html", rows=rows), blocks)
        md = render_markdown(
            "compile_ids.md", table=table, autograd=self.autograd, unit_path=self.unit_path
        )
        return Page("compile_ids.md", md, "All compile ids", blocks)

    # -- pages -----------------------------------------------------------------------------
    def overview(self) -> Page:
        trace = self.trace
        units = list(trace.units.values())
        compiled = [u for u in units if u.id is not None and u.id.frame_id is not None]
        cache = Counter(a.cache for u in units for a in u.artifacts if a.cache)
        total_time = sum(t.total for t in self.times)
        restarts = sum(1 for f in self.failures if f.is_restart)
        errors = [f for f in self.failures if not f.is_restart]
        recompiled = sorted(
            (f for f in self.frames if f.recompiles), key=lambda f: -len(f.recompiles)
        )
        trie = compile_trie(units, {key: call.call_stack for key, call in self._export_of.items()})
        blocks: dict[str, Block] = {}
        context = {
            "trace": trace,
            "stats": trace.stats,
            "n_frames": len(self.frames),
            "n_units": len(compiled),
            "n_breaks": len(self.graph_breaks),
            "n_break_hits": sum(b.count for b in self.graph_breaks),
            "n_recompiles": len(self.recompiles),
            "errors": errors,
            "failure_groups": failure_groups(errors),
            "interrupted": self.interrupted,
            "max_items": MAX_PROBLEMS,
            "n_restarts": restarts,
            "total_time": total_time,
            "slowest": self.times[:5],
            "cache": cache,
            "graph_breaks": self.graph_breaks,
            "recompiled": [(f, recompile_pattern(f)) for f in recompiled[:MAX_PROBLEMS]],
            "n_recompiled": len(recompiled),
            "has_trie": bool(trie.root.children),
            # a part: it links every compile id, which Python-Markdown need not parse
            "trie": self._part(
                "trie",
                trie_html(
                    trie.root,
                    status_of=self.status,
                    href_of=lambda u: self.href(u, depth=0),
                    stand_ins=trie.stand_ins,
                ),
                blocks,
            ),
            "no_stack": trie.unplaced,
            "legend": {
                key: label
                for key, label in status_mod.LABELS.items()
                if key != status_mod.INTERRUPTED or self.interrupted
                if key != status_mod.EXPORT or status_mod.EXPORT in self.statuses.values()
                if key != status_mod.OUTSIDE  # [-/-] is in no stack
            },
            "exports": self.exports,
            "unit_path": self.unit_path,
            "status": self.status,
            "function_of": self.function_of,
            "notes": trace.notes,
            "landing_href": LANDING_HREF,
            "job_article": _article(trace.job_ranks or 0),
            "export_lead": extra_pages.export_lead(self),
            "vllm_lead": extra_pages.vllm_lead(self),
            "autograd": self.autograd,
        }
        md = render_markdown("overview.md", **context)
        return Page("index.md", md, "Overview", blocks)

    def unit_page(self, unit: CompileUnit) -> Page:
        frame = self._frame_of.get(id(unit))
        previous = following = None
        position = 0
        if frame is not None:
            index = self._position[id(unit)]
            position = index + 1
            previous = frame.units[index - 1] if index > 0 else None
            following = frame.units[index + 1] if index + 1 < len(frame.units) else None
        blocks: dict[str, Block] = {}
        own = self._failures_of.get(id(unit), [])
        failures = [f for f in own if not f.is_restart]
        restart_reasons = [f.description for f in own if f.is_restart]
        status = self.status(unit)
        outside = status == status_mod.OUTSIDE
        recompile, restart_of = self._recompile_of.get(id(unit)), None
        if recompile is None and unit.id is not None and unit.id.attempt:
            # a restart is the same compile, tried again: torch logs the compile's reason
            # once (on its first attempt, or its metrics on the last), and it holds for all
            first = self.trace.units.get(replace(unit.id, attempt=0))
            recompile = self._recompile_of.get(id(first)) if first is not None else None
            restart_of = first if recompile is not None else None
        context = {
            "unit": unit,
            "function": self.function_of(unit),
            "location": self.location_of(unit),
            "status": status,
            "status_label": status_mod.LABELS[status],
            "frame": frame,
            "position": position,
            "previous": previous,
            "next": following,
            "failures": failures,
            "exports": [c for c in self.exports if unit in c.units or (outside and not c.units)],
            "unit_path": self.unit_path,
            "restart_reasons": restart_reasons,
            "graph_breaks": self._breaks_of.get(id(unit), []),
            "interrupted": self._interrupted_of.get(id(unit)),
            "recompile": recompile,
            "restart_of": restart_of,
            "all_reasons": self._all_reasons(recompile, blocks),
            "time": self._time_of(unit),
            "outside": [t for t in self.times if t.label] if outside else [],
            "aoti_code": [a for a in unit.artifacts if a.name.startswith(AOTI_CODE)],
            "aoti_times": [
                t for t in self._times_of.get(id(unit), []) if t.label.startswith(AOTI_BUILD)
            ],
            "summary_rows": self._summary_rows(unit, metrics=not outside),
            "artifacts": [
                self._artifact_view(unit, a, blocks) for a in unit.artifacts[:MAX_ARTIFACT_SECTIONS]
            ],
            "more_artifacts": self._artifact_rows(
                unit.artifacts[MAX_ARTIFACT_SECTIONS : MAX_ARTIFACT_SECTIONS + ROWS], blocks
            ),
            "artifact_count": len(unit.artifacts),
            "guards": self._guards(unit),
            "symbolic": unit_symbols(unit),
            "other_events": _event_rows(
                [e for e in unit.events if not _is_symbolic(e) and e.type != "export"]
            ),
            "event_counts": sorted(unit.event_counts.items()),
            "provenance_links": extra_pages.unit_links(self, unit),
            "metrics_tables": [
                self._metrics_table(m, f"metrics-{index}", blocks)
                for index, m in enumerate(unit.metrics[:MAX_ARTIFACT_SECTIONS])
            ],
            "more_metrics": max(len(unit.metrics) - MAX_ARTIFACT_SECTIONS, 0),
            "config": self.config.of(unit) if self.config else None,
            "kernel_times": artifact_details.kernel_compile_times(
                unit.metric("triton_kernel_compile_times_us")
            ),
        }
        facts_of = html_macro("artifact_facts.html", "facts")
        for a in context["artifacts"]:
            if a.link_url:
                continue
            href = url_path(a.raw_href) if a.raw_href else None
            copy = bool(href and (a.metrics_page or (a.block and not a.truncated)))
            if copy:
                self.artifact_copies.append(self.prefix + a.raw_href.removeprefix("../"))
            facts = str(facts_of(a, href, copy))
            a.facts = self._part(f"facts-{a.number}", facts, blocks)
        stack = macro("_macros.md", "stack_block")(
            unit.stack, "Stack that triggered this compile", open=False
        )
        context["stack"] = self._part("stack", stack, blocks) if unit.stack else ""
        context["summary_table"] = self._part(
            "summary", render("unit_summary.html", **context), blocks
        )
        context["restart_code"] = [
            self._code_part(f"restart-{n}", text, "text", blocks, "tlsite-wrap")
            for n, text in enumerate(restart_reasons)
        ]
        context["failure_code"] = [
            self._code_part(f"failure-{n}", f.description, "text", blocks, "tlsite-wrap")
            for n, f in enumerate(failures)
        ]
        recompile = context["recompile"]
        if recompile is not None:
            code = {"reason": (recompile.reason, "text")}
            if recompile.guard_diff:
                code["guard_diff"] = ("\n".join(recompile.guard_diff), "diff")
            context["recompile_code"] = {
                name: self._code_part(f"recompile-{name}", text, lang, blocks)
                for name, (text, lang) in code.items()
            }
        time = context["time"]
        context["time_tables"] = [
            self._part(
                f"time-{direction}",
                render("time_phases.html", direction=direction, rows=time.rows(direction)),
                blocks,
            )
            for direction in ("forward", "backward")
            if time and getattr(time, direction)
        ]
        title = f"{unit.display} {context['function']}".strip()
        if outside:
            title = f"{unit.display} records outside any compile"
        markdown = render_markdown("compile_unit.md", heading=title, **context)
        code = [a.code for a in context["artifacts"] if a.code is not None]
        code += [m["code"] for m in context["metrics_tables"]]
        return Page(self.unit_path(unit), markdown, title, blocks, code)

    def graph_breaks_page(self) -> Page:
        blocks: dict[str, Block] = {}
        md = render_markdown(
            "graph_breaks.md",
            rows=shown(self.graph_breaks, ROWS),
            sections=shown(self.graph_breaks, SECTIONS),
            status=self.status,
            unit_path=self.unit_path,
            part=self._parts(blocks),
            code_part=self._text_parts(blocks),
        )
        return Page("graph_breaks.md", md, "Graph breaks", blocks)

    def recompiles_page(self) -> Page:
        frames = sorted((f for f in self.frames if f.recompiles), key=lambda f: -len(f.recompiles))
        md = render_markdown(
            "recompiles.md",
            frames=shown(frames, SECTIONS),
            status=self.status,
            unit_path=self.unit_path,
        )
        return Page("recompiles.md", md, "Recompiles")

    def failures_page(self) -> Page:
        failures = self.failures
        blocks: dict[str, Block] = {}
        md = render_markdown(
            "failures.md",
            rows=shown(failures, ROWS),
            sections=shown([f for f in failures if not f.is_restart], SECTIONS),
            exports=self.exports,
            status=self.status,
            unit_path=self.unit_path,
            part=self._parts(blocks),
            code_part=self._text_parts(blocks),
        )
        return Page("failures.md", md, "Failures and restarts", blocks)

    def compile_time_page(self) -> Page:
        rows = _chart_rows(self.times[:40])
        label_ch = max((len(r["label"]) for r in rows), default=0)
        named_kinds = {
            _outside_kind(t, self.status(t.unit) == status_mod.OUTSIDE)
            for t in self.times
            if t.label
        }
        word = "compile" if named_kinds else "compile id"
        chart = render("time_chart.html", rows=rows, label_ch=label_ch, word=word)
        md = render_markdown(
            "compile_time.md",
            times=self.times,
            named_kinds=named_kinds,
            total=sum(t.total for t in self.times),
            phases=self_time_by_phase(self.times),
            interrupted=self.interrupted,
            chart=Markup("".join(line.strip() for line in chart.splitlines())),
            status=self.status,
            unit_path=self.unit_path,
            function_of=self.function_of,
        )
        return Page("compile_time.md", md, "Compile time")

    def symbolic_shapes_page(self) -> Page:
        """Every compile's symbols, :data:`ITEMS_PER_SECTION` of each kind per compile, for
        compiles until :data:`ROWS` items are listed (each compile's page has all its own)."""
        groups = [g for g in map(unit_symbols, self.trace.units.values()) if g is not None]
        count = listed = 0
        for group in groups[:SECTIONS]:
            if listed >= ROWS:
                break
            listed += min(len(group.symbols), ITEMS_PER_SECTION) * 9  # + 8 constraints each
            listed += min(len(group.other), ITEMS_PER_SECTION)
            count += 1
        md = render_markdown(
            "symbolic_shapes.md",
            groups=Shown(groups[:count], len(groups)),
            items=ITEMS_PER_SECTION,
            unit_path=self.unit_path,
            function_of=self.function_of,
        )
        return Page("symbolic_shapes.md", md, "Symbolic shapes")

    def chromium_page(self) -> Page:
        md = render_markdown("chromium.md", count=self.trace.chromium_events)
        return Page("chromium.md", md, "Chromium events")

    def health_page(self) -> Page:
        stats = self.trace.stats
        read = [(k, stats.outcomes.get(k, 0)) for k in ("record", "payload", "interned", "blank")]
        skipped = [
            (reason, SKIP_REASONS[reason], stats.outcomes[reason])
            for reason in SKIP_REASONS
            if stats.outcomes.get(reason)
        ]
        findings = [
            (reason, FINDING_REASONS[reason], n) for reason, n in stats.findings.items() if n
        ]
        md = render_markdown(
            "health.md",
            stats=stats,
            read=read,
            skipped=skipped,
            findings=findings,
            samples=sorted(stats.samples, key=lambda s: s.line),  # the damage's line too
            reasons={**SKIP_REASONS, **FINDING_REASONS},
            unknown_events=stats.unknown_events.most_common(),
            unknown_keys=stats.unknown_keys.most_common(),
            elsewhere=sorted(self.trace.strings.elsewhere),
        )
        return Page("health.md", md, "Parse health")

    def config_page(self) -> Page:
        differing, count = self.config.differing()
        md = render_markdown(
            "config.md",
            config=self.config,
            rows=self.config.baseline_rows(),
            differing=differing,
            differing_count=count,
            unit_path=self.unit_path,
            function_of=self.function_of,
        )
        return Page("config.md", md, "Config")

    def unknown_stacks_page(self) -> Page:
        trie = unknown_trie(self.trace.unknown_stacks)
        html = trie_html(trie, status_of=self.status, href_of=lambda u: self.href(u, depth=0))
        md = render_markdown(
            "unknown_stacks.md", trie=html, count=self.trace.unknown_stacks.total()
        )
        return Page("unknown_stacks.md", md, "Unknown stacks")

    def frame_page(self, frame: views.FrameCompiles) -> Page:
        title = f"Frame {frame.frame}: {self.labels[id(frame)]}"
        md = render_markdown(
            "frame.md",
            frame=frame,
            title=title,
            status=self.status,
            seconds_of=self._seconds_of,
            recompile_of=lambda u: self._recompile_of.get(id(u)),
        )
        return Page(f"frames/frame_{_frame_slug(frame)}.md", md, title)

    # -- pieces ----------------------------------------------------------------------------
    def _summary_rows(self, unit: CompileUnit, *, metrics: bool = True) -> list[tuple[str, Any]]:
        """The unit's facts; ``metrics``: with those its metrics give (not for [-/-], whose
        metrics are other compiles', each said by name)."""
        rows: list[tuple[str, Any]] = []
        labels = (
            ("graph_op_count", "Graph ops"),
            ("graph_node_count", "Graph nodes"),
            ("graph_input_count", "Graph inputs"),
            ("guard_count", "Guards"),
            ("shape_env_guard_count", "Shape-env guards"),
            ("cache_size", "Cache size"),
            ("num_graph_breaks", "Graph breaks in this frame"),
        )
        for key, label in labels if metrics else ():
            value = unit.metric(key)
            if value is not None:
                rows.append((label, value))
        params = unit.metric("param_numel") if metrics else None
        if is_whole_number(params):  # torch 2.10+: the nn.Parameters the compile guards
            text = count_text(params, "element")
            size, count = unit.metric("param_bytes"), unit.metric("param_count")
            if is_whole_number(size):
                text += f" ({_size_text(size)})"
            if is_whole_number(count):
                text += f" in {count_text(count, 'tensor')}"
            rows.append(("Parameters", text))
        subgraphs = list(dict.fromkeys(a.subgraph for a in unit.artifacts if a.subgraph))
        if subgraphs:
            rows.append(("Subgraphs (regional Inductor)", ", ".join(subgraphs)))
        marks = [f"{a.name}: {a.cache}" for a in unit.artifacts if a.cache]
        if marks:
            rows.append(("Caches", ", ".join(marks)))
        return rows

    def _artifact_view(
        self, unit: CompileUnit, artifact: Artifact, blocks: dict[str, CodeBlock]
    ) -> ArtifactView:
        title = artifact.name
        if artifact.graph_role:
            title = f"{title} ({artifact.graph_role})"
        if artifact.kind == "inductor_output_code":
            filename = artifact.metadata.get("filename")
            title = f"{title} {filename.rsplit('/', 1)[-1]}" if filename else title
        if artifact.kind == "bytecode_dump":
            meta = artifact.metadata
            title = f"Bytecode of {meta.get('co_name')} ({meta.get('bytecode_type')})"
        if artifact.subgraph:
            title = f"{title} (subgraph {artifact.subgraph})"
        view = ArtifactView(
            number=artifact.number,
            name=artifact.name,
            title=title,
            link_url=artifact.url if artifact.is_link else None,
            raw_href=f"../{artifact.raw_file or artifact.path}" if artifact.path else None,
            cache=artifact.cache,
            role=artifact.graph_role,
            size_text=_size_text(artifact.payload.size if artifact.payload else 0),
            metrics_page=is_metrics_page(artifact),
        )
        shown = artifact_code(self.trace, artifact)
        if shown is None:
            return view
        block, text = shown
        reader = DETAIL_READERS.get(artifact.name)
        if reader is not None and artifact.encoding == "json":
            with contextlib.suppress(ValueError):  # a damaged payload: its raw text only
                view.detail = reader(loads_bounded(text))
        elif artifact.encoding == "string":
            view.text_view = artifact_details.text_view(artifact.name, text)
        key = (block.md5, artifact.name, artifact.kind)
        found = self._code_facts.get(key)
        if found is None:  # a recompile storm shows the same code thousands of times
            found = self._code_facts[key] = _code_facts(artifact, text)
        terms, view.kernels, lines, nodes = found
        view.code = CodeSection(artifact.number, title, terms)
        self._sizes[artifact.number] = (nodes, lines)
        view.nodes, view.lines = nodes, lines
        if block.head_lines is not None:
            view.truncated, view.shown_lines, view.total_lines = True, block.head_lines, lines
        token = f"artifact-{artifact.number}"
        blocks[token] = block
        view.block = Markup(CODE_PLACEHOLDER.format(token=token))
        view.open = artifact.name in ALWAYS_OPEN or (
            artifact.kind in OPEN_KINDS and lines <= OPEN_LINE_LIMIT
        )
        return view

    def _artifact_rows(self, artifacts: list[Artifact], blocks: dict) -> Markup | None:
        """Artifacts past :data:`MAX_ARTIFACT_SECTIONS` as one HTML table of raw-file links."""
        if not artifacts:
            return None
        rows = [
            {
                "number": a.number,
                "title": f"{a.name} ({a.graph_role})" if a.graph_role else a.name,
                "href": f"../{a.raw_file or a.path}" if a.path else None,
                "url": safe_url(a.url) if a.is_link else None,
                "role": a.graph_role,
                "cache": a.cache,
                "size": _size_text(a.payload.size) if a.payload else "",
            }
            for a in artifacts
        ]
        return self._html_block("artifact-rows", render("artifact_rows.html", rows=rows), blocks)

    def _all_reasons(self, recompile: Any, blocks: dict[str, Block]) -> Markup | None:
        """The guard that failed for every cache entry checked, as a code block kept in the
        store and put in after search indexing, like an artifact's: compile ``[f/k]`` of a
        storm checked ``k`` entries, so these blocks grow with the square of the compile
        count, and a Markdown code block's per-line anchors were most of a storm's pages."""
        if recompile is None or len(recompile.all_reasons) < 2:
            return None
        block = highlight_html("\n".join(recompile.all_reasons), "text")  # plain: no lexer
        return self._html_block("all-reasons", block.replace(BLOCK_ID, "all-reasons"), blocks)

    def _html_block(self, token: str, html: str, blocks: dict) -> Markup:
        """Keep ``html`` in the store; the page gets a placeholder for it."""
        store = self.trace.store
        ref = store.put(html)
        blocks[token] = HtmlBlock(store.pack_file, ref.offset, ref.size)
        return Markup(CODE_PLACEHOLDER.format(token=token))

    @staticmethod
    def _part(token: str, html: str, blocks: dict[str, Block]) -> Markup:
        """``html``, a part of the page's text, as a :class:`~.page.PagePart`: the page gets a
        placeholder that the build replaces as soon as it has converted the page."""
        blocks[token] = PagePart(html.strip())
        return Markup(PART_PLACEHOLDER.format(token=token))

    @classmethod
    def _parts(cls, blocks: dict[str, Block]) -> Callable[..., Markup]:
        """For templates, ``{% call part(token) %}HTML{% endcall %}``: the HTML (a long
        list's table, cut into pieces) as a :class:`~.page.PagePart`, which Markdown does
        not parse (Python-Markdown took a second over a storm's thousands of rows)."""

        def part(token: str, caller: Callable[[], str]) -> Markup:
            return cls._part(token, cut_long_tables(str(caller())), blocks)

        return part

    @classmethod
    def _text_parts(cls, blocks: dict[str, Block]) -> Callable[[str, str], Markup]:
        """For templates, ``code_part(token, text)``: trace text as a wrapped code block
        (:meth:`_code_part`), which Markdown does not parse and whose lines get no anchors
        (hundreds of a storm's graph breaks and failures each have one)."""
        return lambda token, text: cls._code_part(token, text, "text", blocks, "tlsite-wrap")

    @staticmethod
    def _code_part(
        token: str, text: str, lang: str, blocks: dict[str, Block], css: str = ""
    ) -> Markup:
        """A short code block as a :class:`~.page.CodePart` (see :meth:`_part`)."""
        blocks[token] = CodePart(text, lang, css)
        return Markup(PART_PLACEHOLDER.format(token=token))

    def _metrics_table(self, event: Event, token: str, blocks: dict) -> dict[str, Any]:
        rows = _metrics_rows(event)
        html = render("metrics_table.html", rows=rows)
        title = _metrics_title(event)
        keys = tuple(key for key, _ in rows)
        terms = self._metric_terms.get(keys)
        if terms is None:  # a storm's metrics records have the same fields
            terms = self._metric_terms[keys] = tuple(metric_terms(keys))
        return {
            "title": title,
            "anchor": token,
            "count": len(rows),
            "block": self._html_block(token, html, blocks),
            "code": CodeSection(token, title, terms),
        }

    def _guards(self, unit: CompileUnit) -> list[str]:
        return [
            code
            for artifact in unit.artifacts
            if artifact.kind == "dynamo_guards" and artifact.payload is not None
            for code in views.guard_codes(self.trace.read_payload(artifact.payload))
        ]


def artifact_code(trace: Trace, artifact: Artifact) -> tuple[CodeBlock, str] | None:
    """The code block an artifact's section shows, and the full text it is cut from.

    Called again for the same artifact while the trace is read (to highlight ahead, see
    :func:`artifact_block`), so it must depend only on the artifact and its payload.
    """
    found = _artifact_source(trace, artifact)
    if found is None:
        return None
    source, lexer = found
    text = trace.store.read(source)
    return _code_block(trace, source, lexer, len(text)), text


def artifact_block(trace: Trace, artifact: Artifact) -> CodeBlock | None:
    """:func:`artifact_code`'s block, without reading its text back from the store when its
    size in bytes already says it is not cut (a character is one byte or more): a storm's
    thousands of small artifacts were each read and decoded only to be measured."""
    found = _artifact_source(trace, artifact)
    if found is None:
        return None
    source, lexer = found
    chars = source.size if source.size <= INLINE_LIMIT else len(trace.store.read(source))
    return _code_block(trace, source, lexer, chars)


def _artifact_source(trace: Trace, artifact: Artifact) -> tuple[PayloadRef, str] | None:
    """The stored text an artifact's section shows, and its lexer (None: no code)."""
    if artifact.is_link or artifact.payload is None:
        return None
    store = trace.store
    source = artifact.payload
    lexer = "python" if artifact.kind == "dump_file" else artifact.lexer
    if artifact.readable_path:
        source, lexer = store.derived(source, _readable_traces), "text"
    elif artifact.body == BODY_JSON:
        source = store.derived(source, pretty_json)
    return source, lexer


def _code_block(trace: Trace, source: PayloadRef, lexer: str, chars: int) -> CodeBlock:
    """The block of ``source``'s text, ``chars`` characters long (cut when too long)."""
    head = INLINE_HEAD_LINES if chars > INLINE_LIMIT else None
    return CodeBlock(trace.store.pack_file, source.offset, source.size, source.md5, lexer, head)


#: Artifacts of fewer bytes than this are not handed to the highlighter while the trace is
#: read (the pages ask for their code later): a storm's thousands of small ones cost the
#: reading process more to hand over than highlighting them early saves, while a big
#: trace's code is mostly in artifacts above it.
AHEAD_MIN_ARTIFACT_BYTES = 16 << 10


def highlight_ahead(highlighter: Highlighter) -> Callable[[Trace, Artifact], None]:
    """A reader callback (``load_source(on_artifact=...)``) that hands each artifact's code
    block to ``highlighter`` as soon as the artifact is read (an artifact of
    :data:`AHEAD_MIN_ARTIFACT_BYTES` or more), so that its workers highlight while the rest of
    the trace is read. The pages later ask for the same blocks."""

    counts: Counter[object] = Counter()

    def submit(trace: Trace, artifact: Artifact) -> None:
        unit = None if artifact.compile_id is None else artifact.compile_id.directory_key()
        counts[unit] += 1
        if counts[unit] > MAX_ARTIFACT_SECTIONS:
            return  # listed without its code (see unit_page)
        if artifact.payload is None or artifact.payload.size < AHEAD_MIN_ARTIFACT_BYTES:
            return
        block = artifact_block(trace, artifact)
        if block is not None:
            # the workers read the code from the pack file: flushed before blocks go to them
            highlighter.before_sending = trace.store.flush
            highlighter.submit(block)

    return submit


def function_label(frame: views.FrameCompiles, nth: int = 1) -> str:
    """A frame's function for titles: dynamo's resume functions
    (``torch_dynamo_resume_in_forward_at_22``) read ``forward (resume at line 22)``, since
    long names that share their start are cut to look alike in the navigation. The ``nth``
    frame of one resume name (two breaks on one line) reads ``(2nd resume at line 22)``."""
    match = _RESUME.match(frame.function)
    if match is None:
        return frame.function
    which = f"{_ordinal(nth)} resume" if nth > 1 else "resume"
    return f"{match['name']} ({which} at line\u00a0{match['line']})"  # "line 22" stays whole


def function_labels(frames: list[views.FrameCompiles]) -> dict[int, str]:
    """``id(frame) → label``, telling apart frames that resume one function at one line."""
    seen: Counter[str] = Counter()
    labels = {}
    for frame in frames:
        seen[frame.function] += 1
        labels[id(frame)] = function_label(frame, seen[frame.function])
    return labels


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _by_subgraph(artifacts: list[dict[str, Any]]) -> list[tuple[str | None, list[dict]]]:
    """Artifacts grouped by subgraph name (regional Inductor), first-seen order; those of no
    subgraph come first, under None."""
    groups: dict[str | None, list[dict]] = {None: []}
    for artifact in artifacts:
        groups.setdefault(artifact["subgraph"], []).append(artifact)
    return [(name, items) for name, items in groups.items() if items]


#: An artifact's search terms, kernels, line count and node count (graphs).
CodeFacts = tuple[tuple[str, ...], list[str], int, int | None]


def _code_facts(artifact: Artifact, text: str) -> CodeFacts:
    """What a compile page tells of an artifact's code (``text``, as the page shows it):
    these depend only on the code, the artifact's name and its kind."""
    kernels = sorted(kernel_names(text)) if artifact.kind == "inductor_output_code" else []
    nodes = fx_node_count(text) if _is_graph(artifact) else None
    return tuple(code_terms(artifact.name, text)), kernels, text.count("\n") + 1, nodes


def _is_graph(artifact: Artifact) -> bool:
    if artifact.kind == "artifact":
        return bool(_GRAPH_ARTIFACT.search(artifact.name))
    return artifact.kind in GRAPH_KINDS


def _frame_slug(frame: views.FrameCompiles) -> str:
    return frame.frame.replace("!", "ca").replace("/", "_")


def _is_symbolic(event: Event) -> bool:
    return event.type in SYMBOLIC_TYPES


def _event_rows(events: list[Event]) -> Shown[dict[str, Any]]:
    """The first :data:`ROWS` events as table rows."""
    return Shown([_event_row(e) for e in events[:ROWS]], len(events))


def _event_row(event: Event) -> dict[str, Any]:
    summary = json.dumps(event.metadata, ensure_ascii=False, default=str)
    if len(summary) > 300:
        summary = summary[:300] + "…"
    return {"type": event.type, "line": event.line, "summary": summary}


def _metrics_title(event: Event) -> str:
    return {
        "compilation_metrics": "Compilation metrics",
        "bwd_compilation_metrics": "Backward compilation metrics",
        "compilation_metrics_runtime": "Runtime compilation metrics",
        "bwd_compilation_metrics_runtime": "Runtime backward compilation metrics",
    }.get(event.type, event.type)


_to_json = json.JSONEncoder(default=str).encode  # json.dumps(value, default=str), made once


def _metrics_rows(event: Event) -> list[tuple[str, str]]:
    rows = [(key, "a config snapshot: see Config on this page") for key in event.configs or ()]
    for key, value in event.meta.items():
        if value is None or value == [] or value == {}:
            continue
        text = value if isinstance(value, str) else _to_json(value)
        if len(text) > 2000:
            text = text[:2000] + "… (see raw.jsonl)"
        rows.append((key, text))
    return rows


def _readable_traces(text: str) -> str:
    parts = []
    for kernel, traces in kernel_stack_traces(text).items():
        parts.append(f"== {kernel}")
        parts.extend(traces)
        parts.append("")
    return "\n".join(parts) or text


def _size_text(size: int) -> str:
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    if size >= 1_000:
        return f"{size / 1_000:.1f} kB"
    return f"{size} bytes"


def _outside_kind(time: CompileTime, outside: bool) -> str:
    """What a compile of no compile id of its own was: an export call, an AOTInductor build
    (on [-/-] when ``outside``, else timed by its span under another compile id), other."""
    if time.function == "torch.export":
        return "export"
    if time.label.startswith(AOTI_BUILD):
        return "aoti" if outside else "aoti_span"
    return "other"


def _chart_rows(times: Iterable[CompileTime]) -> list[dict[str, Any]]:
    times = list(times)
    longest = max((t.total for t in times), default=0.0) or 1.0
    return [
        {
            "label": t.name,
            "href": f"{t.unit.dirname}/index.html",
            "forward": t.seconds / longest,
            "backward": t.backward_seconds / longest,
            "forward_seconds": t.seconds,
            "backward_seconds": t.backward_seconds,
            "seconds": t.total,
            "autograd": t.compiled_autograd,
        }
        for t in times
    ]


def _article(number: int) -> str:
    """``a`` or ``an`` before a number said aloud: an 8-, 11-, 18-, 80- or 11000-rank job."""
    digits = str(number)
    lead = digits[: (len(digits) - 1) % 3 + 1]  # the first group of three, as it is read
    return "an" if lead.startswith("8") or lead in ("11", "18") else "a"


def escaped_nav(nav: Any) -> Any:
    """The navigation with HTML-escaped titles: MkDocs themes print nav titles unescaped, and
    some are built from trace text (function names)."""
    if isinstance(nav, list):
        return [escaped_nav(item) for item in nav]
    if isinstance(nav, dict):
        return {html.escape(str(title)): escaped_nav(value) for title, value in nav.items()}
    return nav


def render_tree(
    trace: Trace, *, prefix: str = "", sink: Callable[[Page], None] | None = None
) -> SiteTree:
    """Every page of the report for ``trace`` (each handed to ``sink`` if given, see
    :class:`SiteTree`)."""
    return ReportRenderer(trace, prefix=prefix).render_tree(sink)

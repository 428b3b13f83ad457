"""``tlsite diff``: what changed between two runs, from their two models.

Frame ids and line numbers are not identities across runs: compile order changes, and a fix
that adds a line at the top of a file shifts every line. So

- frames are matched by code identity: the function's name (a resume function's without its
  ``_at_<line>``) and the file's base name; frames that share both are paired by the source
  line their compile stack shows, then in order;
- compiles within a matched frame are paired in order when both sides have as many, else each
  AFTER compile with the BEFORE compile whose guards it shares most;
- graph breaks are matched by reason, file, function and the source line of the break (its
  text, not its number), failures by exception, message and file.

Everything here is a pure function of two :class:`~tlsite.core.model.Trace` objects; pages
are rendered in :mod:`tlsite.core.render.diff_pages`. :meth:`TraceDiff.as_json` is the
documented ``diff.json``.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from ..model import Artifact, CompileUnit, Trace
from .compile_time import CompileTime
from .config import RunConfig
from .exports import export_calls, export_of
from .fx_diff import GraphDiff, code_diff, graph_diff, normalise
from .status import INTERRUPTED, LABELS, statuses
from .views import Failure, FrameCompiles, GraphBreak, frames, guard_lines

SCHEMA = "tlsite.diff/1"
#: What the report calls an export call's "frame" (it has no function of its own).
EXPORT = "torch.export"
#: Compile-time changes smaller than this share of the time, or than MIN_SECONDS, are noise:
#: two runs of one program differ by that much.
NOISE_SHARE = 0.10
MIN_SECONDS = 0.5
#: Above this many (BEFORE, AFTER) compile combinations in one frame (a recompile storm),
#: compiles are paired in order: comparing every pair's guards would be quadratic.
MAX_GUARD_PAIRINGS = 40_000
#: Compile pairs given a page of their own; beyond it (a recompile storm) only those whose
#: status changed, the rest are in the summary's table and diff.json.
MAX_COMPILE_PAGES = 300
#: Attempts of one compile searched for the function's name.
MAX_ATTEMPTS_LOOKED_AT = 8
#: Graphs compared on a compile's page, in the order a compile logs them.
GRAPHS = (
    "dynamo_output_graph",
    "aot_joint_graph",
    "aot_forward_graph",
    "aot_backward_graph",
    "aot_inference_graph",
    "inductor_pre_grad_graph",
    "inductor_post_grad_graph",
)
#: compilation_metrics fields that differ between any two runs (times, ids, the JSON configs
#: compared on their own): left out of "metrics that changed".
_UNCOMPARED = re.compile(
    r"(_time|_us|_s|_ms|_config|^compile_id|^frame_key|^start_time|^end_time|^stack_trace"
    r"|^co_firstlineno|^python_version|^pytorch_version|_keys|^graph_node_shapes"
    r"|^restart_reasons|^recompile_reason|^fail_reason|^exception_stack_trace)$|_time_"
)
_RESUME_AT = re.compile(r"^(torch_dynamo_resume_in_.+)_at_\d+$")
_TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')
_GUARD_COMMENT = re.compile(r"\s+#\s.*$")
#: Lines of torch's guard dump that measure the run rather than say what is guarded.
_GUARD_NOISE = ("Guard latency",)

T = TypeVar("T")


def base_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def function_identity(name: str) -> str:
    """A function's name as code identity: a resume function's without its line number."""
    match = _RESUME_AT.match(name)
    return match[1] if match else name


# -- one compile and one frame of one side -----------------------------------------------------
@dataclass
class Compile:
    """One compile of a frame on one side: its first attempt and any restarted ones."""

    trace: Trace
    units: list[CompileUnit]
    status: str
    seconds: float
    times: list[CompileTime]

    @property
    def unit(self) -> CompileUnit:
        return self.units[0]

    @property
    def display(self) -> str:
        return self.unit.display

    def guards(self) -> list[str]:
        """The guards it installed (the last attempt's), noise and source comments removed."""
        for unit in reversed(self.units):
            lines = guard_lines(self.trace, unit)
            if lines:
                return [
                    normalise(_GUARD_COMMENT.sub("", ln))
                    for ln in lines
                    if ln.strip() and not ln.startswith(_GUARD_NOISE)
                ]
        return []

    def artifacts(self, name: str) -> list[Artifact]:
        """Its artifacts called ``name``, over all attempts (the last attempt's when several
        attempts logged one)."""
        found: list[Artifact] = []
        for unit in self.units:
            mine = [a for a in unit.artifacts if a.name == name and a.payload is not None]
            if mine:
                found = mine
        return found

    def text(self, artifact: Artifact) -> str:
        assert artifact.payload is not None
        return self.trace.read_payload(artifact.payload)

    def output_code(self) -> list[Artifact]:
        return [
            a
            for unit in self.units
            for a in unit.artifacts
            if a.kind == "inductor_output_code" and a.payload is not None
        ]

    def metrics(self) -> dict[str, Any]:
        """Its compilation_metrics fields (the last record's value of each)."""
        merged: dict[str, Any] = {}
        for unit in self.units:
            for event in unit.compilation_metrics:
                merged.update({k: v for k, v in event.meta.items() if v is not None})
        return merged


@dataclass
class Frame:
    """One frame (code object) of one side, with its compiles in order."""

    function: str  # as the trace names it
    file: str  # full path, as logged
    first_line: int | None
    source: str  # the source line its compile stack shows ("" when none)
    frame_id: str  # "0", "!0/3"
    compiles: list[Compile]
    recompiles: int

    @property
    def identity(self) -> tuple[str, str]:
        return (function_identity(self.function), base_name(self.file))

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.compiles)

    @property
    def label(self) -> str:
        where = base_name(self.file) or "?"
        if self.function == EXPORT and self.first_line is not None:
            where += f":{self.first_line}"  # the call site: one file makes several calls
        return f"{function_identity(self.function)} ({where})"

    @property
    def cache_misses(self) -> int:
        """Cache lookups of its compiles that missed: a miss compiles what a hit loads, so it
        often explains a slower compile of the same frame."""
        return sum(
            artifact.cache == "miss"
            for c in self.compiles
            for unit in c.units
            for artifact in unit.artifacts
        )

    @property
    def timed(self) -> bool:
        """Every compile logged its metrics: a compile the log ends in has no time to compare."""
        return all(c.status not in ("missing", "interrupted") for c in self.compiles)


def _frames(trace: Trace, rows: list[CompileTime]) -> list[Frame]:
    """The frames as the report shows them: its compile times (export calls and AOTInductor
    builds their own rows) and an export call's "frame" named ``torch.export`` at its call."""
    calls = export_calls(trace)
    status = statuses(trace, calls)
    call_of = export_of(calls)
    times: dict[int, list[CompileTime]] = {}
    for time in rows:
        times.setdefault(id(time.unit), []).append(time)
    result = []
    for group in frames(trace):
        frame = _frame(trace, group, status, times)
        call = next((call_of[id(u)] for u in group.units if id(u) in call_of), None)
        if frame.function == "?" and call is not None:
            frame.function = EXPORT
            if call.call_site is not None:
                frame.file, frame.first_line = call.call_site.filename, call.call_site.line
        result.append(frame)
    return result


def _frame(
    trace: Trace,
    group: FrameCompiles,
    status: dict[str, str],
    times: dict[int, list[CompileTime]],
) -> Frame:
    by_compile: dict[Any, list[CompileUnit]] = {}
    for unit in group.units:
        assert unit.id is not None
        by_compile.setdefault(unit.id.frame_compile_id, []).append(unit)
    compiles = []
    for units in by_compile.values():
        mine = [t for u in units for t in times.get(id(u), [])]
        compiles.append(
            Compile(
                trace,
                units,
                _status(units, status),
                sum(t.total for t in mine),
                mine,
            )
        )
    filename, _, line = group.location.rpartition(":")
    source = ""
    for unit in group.units:
        for stack in unit.stacks:
            if stack and stack[-1].loc:
                source = stack[-1].loc.strip()
                break
        if source:
            break
    return Frame(
        function=group.function,
        file=filename,
        first_line=int(line) if line.isdigit() else None,
        source=source,
        frame_id=group.frame,
        compiles=compiles,
        recompiles=len(group.recompiles),
    )


def _status(units: list[CompileUnit], status: dict[str, str]) -> str:
    """A compile's status: its first attempt's, or interrupted when the log ends in any."""
    if any(status.get(u.display) == INTERRUPTED for u in units):
        return INTERRUPTED
    return status.get(units[0].display, "missing")


# -- pairing ------------------------------------------------------------------------------------
def pair_by_key(
    before: Sequence[T],
    after: Sequence[T],
    key: Callable[[T], Hashable | None],
    *,
    prefer: Callable[[T], Hashable] | None = None,
) -> tuple[list[tuple[T, T]], list[T], list[T]]:
    """Pair items of equal ``key`` (None: never paired): first those whose ``prefer`` also
    matches, then in order.

    Returns the pairs (in BEFORE order), the unpaired BEFORE and the unpaired AFTER items.
    """
    free: dict[Hashable, list[int]] = {}
    for index, item in enumerate(before):
        mine = key(item)
        if mine is not None:
            free.setdefault(mine, []).append(index)
    chosen: dict[int, int] = {}  # after index → before index
    if prefer is not None:
        for j, item in enumerate(after):
            bucket = free.get(key(item), []) if key(item) is not None else []
            wanted = prefer(item)
            hit = next((i for i in bucket if prefer(before[i]) == wanted), None)
            if hit is not None:
                bucket.remove(hit)
                chosen[j] = hit
    for j, item in enumerate(after):
        if j in chosen or key(item) is None:
            continue
        bucket = free.get(key(item), [])
        if bucket:
            chosen[j] = bucket.pop(0)
    pairs = [(before[chosen[j]], after[j]) for j in sorted(chosen, key=lambda j: chosen[j])]
    used = set(chosen.values())
    return (
        pairs,
        [b for i, b in enumerate(before) if i not in used],
        [a for j, a in enumerate(after) if j not in chosen],
    )


def pair_compiles(
    before: list[Compile], after: list[Compile]
) -> list[tuple[Compile | None, Compile | None]]:
    """Compiles of one matched frame: in order when both sides have as many (or in a
    recompile storm), else each AFTER compile with the free BEFORE compile whose guards it
    shares most (earliest on a tie, none when it shares none)."""
    if len(before) == len(after) or len(before) * len(after) > MAX_GUARD_PAIRINGS:
        rows: list[tuple[Compile | None, Compile | None]] = list(zip(before, after, strict=False))
        rows += [(b, None) for b in before[len(after) :]]
        return rows + [(None, a) for a in after[len(before) :]]
    guards_before = [set(c.guards()) for c in before]
    free = list(range(len(before)))
    chosen: dict[int, int] = {}
    for j, compile_ in enumerate(after):
        mine = set(compile_.guards())
        best, score = None, -1.0
        for i in free:
            union = guards_before[i] | mine
            share = len(guards_before[i] & mine) / len(union) if union else 1.0
            if share > score:
                best, score = i, share
        if best is not None and score > 0:
            chosen[best] = j
            free.remove(best)
    rows = []
    placed = set()
    for i, compile_ in enumerate(before):
        if i in chosen:
            rows.append((compile_, after[chosen[i]]))
            placed.add(chosen[i])
        else:
            rows.append((compile_, None))
    rows.extend((None, c) for j, c in enumerate(after) if j not in placed)
    return rows


# -- the comparisons ----------------------------------------------------------------------------
@dataclass
class Change:
    """A before → after figure of something matched on both sides (or only on one)."""

    what: str
    before: float | int | str | None
    after: float | int | str | None


@dataclass
class BreakSite:
    """A distinct graph break of one side, with what identifies it across runs."""

    reason: str
    file: str
    line: int | None
    function: str
    source: str  # the source line of the break, as the user stack shows it
    count: int
    compile_ids: list[str]
    detail: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.reason, base_name(self.file), function_identity(self.function))

    @property
    def code_key(self) -> tuple[str, str] | None:
        """The same line of code, however torch words the reason."""
        return (base_name(self.file), self.source) if self.source else None

    @property
    def line_key(self) -> tuple[str, int] | None:
        """The same line number (for an old torch that logs no source line)."""
        return (base_name(self.file), self.line) if self.file and self.line else None

    @property
    def where(self) -> str:
        line = "" if self.line is None else f":{self.line}"
        return f"{base_name(self.file)}{line}" if self.file else "(location not logged)"

    def as_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "file": base_name(self.file),
            "line": self.line,
            "function": self.function,
            "source": self.source,
            "count": self.count,
            "compile_ids": self.compile_ids,
        }


def _break_site(trace: Trace, gb: GraphBreak) -> BreakSite:
    filename, _, line = gb.location.rpartition(":")
    function, source = "", ""
    lines = gb.user_stack.split("\n")
    for index, text in enumerate(lines):
        match = _TRACEBACK_FRAME.match(text)
        if match:  # the last frame of the user stack is where it broke
            function = match["name"].strip()
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            source = "" if _TRACEBACK_FRAME.match(following) else following
            if not filename:
                filename, line = match["file"], match["line"]
    if not function and gb.units:
        function = _function_of(trace, gb.units[0])
    return BreakSite(
        reason=gb.reason,
        file=filename,
        line=int(line) if line.isdigit() else None,
        function=function,
        source=source,
        count=gb.count,
        compile_ids=gb.compile_ids,
        detail=gb.detail,
    )


def _function_of(trace: Trace, unit: CompileUnit) -> str:
    """The function a compile traced: its ``co_name`` or another attempt's (torch <= 2.5
    logs it on the restarted attempt only), else the last frame of its stack."""
    for attempt in range(MAX_ATTEMPTS_LOOKED_AT):
        other = trace.units.get(replace(unit.id, attempt=attempt)) if unit.id else None
        name = (other or unit).metric("co_name")
        if name:
            return str(name)
        if other is None:
            break
    return unit.stack[-1].name if unit.stack else ""


@dataclass
class FailureSite:
    kind: str
    summary: str
    file: str
    compile_id: str
    frame: str  # the function and file of the compile that failed

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, re.sub(r"\d+", "N", normalise(self.summary)), base_name(self.file))

    @property
    def frame_key(self) -> str:
        return self.frame

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "file": base_name(self.file),
            "compile_id": self.compile_id,
        }


def _failure_site(trace: Trace, failure: Failure) -> FailureSite:
    where = failure.source or failure.function_source
    unit = failure.unit
    frame_file = str(unit.metric("co_filename") or (unit.stack[-1].filename if unit.stack else ""))
    return FailureSite(
        failure.kind,
        failure.headline,
        where.rpartition(":")[0] or where,
        unit.display,
        f"{function_identity(_function_of(trace, unit))} ({base_name(frame_file)})",
    )


@dataclass
class Matched(Generic[T]):
    """Items found on both sides (``unchanged``, BEFORE's with AFTER's) and on one only."""

    unchanged: list[tuple[T, T]]
    fixed: list[T]  # only BEFORE: gone
    new: list[T]  # only AFTER


def _match(
    before: list[T],
    after: list[T],
    keys: Sequence[Callable[[T], Hashable | None]],
    *,
    prefer: Callable[[T], Hashable] | None = None,
) -> Matched[T]:
    """Pair by the first key (``prefer`` first), then what is left by each next key."""
    unchanged: list[tuple[T, T]] = []
    for level, key in enumerate(keys):
        pairs, before, after = pair_by_key(before, after, key, prefer=prefer if not level else None)
        unchanged += pairs
    return Matched(unchanged, before, after)


@dataclass
class CompilePair:
    """A compile of a matched frame on both sides, or on one side only."""

    frame: FramePair
    before: Compile | None
    after: Compile | None
    page: str  # the page's path in the site, "" for a compile on one side only

    @property
    def label(self) -> str:
        b = self.before.display if self.before else "—"
        a = self.after.display if self.after else "—"
        return f"{b} → {a}"

    @property
    def status_changed(self) -> bool:
        return bool(self.before and self.after and self.before.status != self.after.status)

    def guard_diff(self) -> list[str]:
        if self.before is None or self.after is None:
            return []
        return list(
            difflib.unified_diff(
                self.before.guards(),
                self.after.guards(),
                f"guards {self.before.display} (before)",
                f"guards {self.after.display} (after)",
                n=1,
                lineterm="",
            )
        )

    def graph_diffs(self) -> list[GraphDiff]:
        if self.before is None or self.after is None:
            return []
        result = []
        for name in GRAPHS:
            old, new = self.before.artifacts(name), self.after.artifacts(name)
            if old or new:
                text_old = self.before.text(old[-1]) if old else ""
                text_new = self.after.text(new[-1]) if new else ""
                result.append(graph_diff(name, text_old, text_new))
        return result

    def code_diffs(self) -> list[tuple[str, list[str], int]]:
        """Each generated module's unified diff (paired in order), with lines left out."""
        if self.before is None or self.after is None:
            return []
        old, new = self.before.output_code(), self.after.output_code()
        result = []
        for index in range(max(len(old), len(new))):
            a = self.before.text(old[index]) if index < len(old) else ""
            b = self.after.text(new[index]) if index < len(new) else ""
            label = (new[index] if index < len(new) else old[index]).filename
            lines, left_out = code_diff(a, b, label=label)
            result.append((label, lines, left_out))
        return result

    def time_rows(self) -> list[tuple[int, str, float | None, float | None]]:
        """The compile-time trees side by side: (depth, timer, before s, after s)."""
        rows: dict[tuple[str, int, str], list[float | None]] = {}
        for side, compile_ in enumerate((self.before, self.after)):
            if compile_ is None:
                continue
            for timed in compile_.times:
                for direction in ("forward", "backward"):
                    for depth, phase in timed.rows(direction):
                        row = rows.setdefault((direction, depth, phase.label), [None, None])
                        row[side] = (row[side] or 0.0) + phase.seconds
        return [(depth, label, b, a) for (_, depth, label), (b, a) in rows.items()]

    def metric_changes(self) -> list[Change]:
        if self.before is None or self.after is None:
            return []
        old, new = self.before.metrics(), self.after.metrics()
        changes = []
        for key in sorted(old.keys() | new.keys()):
            if _UNCOMPARED.search(key):
                continue
            a, b = old.get(key), new.get(key)
            if a != b and not isinstance(a, (dict, list)) and not isinstance(b, (dict, list)):
                changes.append(Change(key, a, b))
        return changes

    def as_json(self) -> dict[str, Any]:
        b, a = self.before, self.after
        return {
            "before": b.display if b else None,
            "after": a.display if a else None,
            "status_before": b.status if b else None,
            "status_after": a.status if a else None,
            "seconds_before": _round(b.seconds) if b else None,
            "seconds_after": _round(a.seconds) if a else None,
            "page": self.page or None,
        }


@dataclass
class FramePair:
    before: Frame | None
    after: Frame | None
    compiles: list[CompilePair] = field(default_factory=list)

    @property
    def any(self) -> Frame:
        frame = self.after or self.before
        assert frame is not None
        return frame

    @property
    def label(self) -> str:
        return self.any.label

    @property
    def recompiles(self) -> tuple[int | None, int | None]:
        return (
            self.before.recompiles if self.before else None,
            self.after.recompiles if self.after else None,
        )

    @property
    def seconds(self) -> tuple[float | None, float | None]:
        return (
            self.before.seconds if self.before else None,
            self.after.seconds if self.after else None,
        )

    def as_json(self) -> dict[str, Any]:
        b, a = self.before, self.after
        return {
            "function": function_identity(self.any.function),
            "file": base_name(self.any.file),
            "frame_before": b.frame_id if b else None,
            "frame_after": a.frame_id if a else None,
            "line_before": b.first_line if b else None,
            "line_after": a.first_line if a else None,
            "compiles_before": len(b.compiles) if b else 0,
            "compiles_after": len(a.compiles) if a else 0,
            "recompiles_before": b.recompiles if b else 0,
            "recompiles_after": a.recompiles if a else 0,
            "seconds_before": _round(b.seconds) if b else None,
            "seconds_after": _round(a.seconds) if a else None,
            "compiles": [c.as_json() for c in self.compiles],
        }


@dataclass
class SideFacts:
    """What the summary says about one side on its own."""

    source: str
    torch_version: str | None
    parse_summary: str
    clean: bool
    why_not_clean: str
    compiles: int
    frames: int
    seconds: float
    cache: dict[str, int]
    graph_breaks: int  # distinct
    recompiles: int
    failures: int
    incomplete: str = ""  # where its input or run breaks off, in words ("" when whole)
    trusted_to: int | None = None  # its lines after this one may be garbage (damaged data)

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "torch_version": self.torch_version,
            "parse": {
                "clean": self.clean,
                "summary": self.parse_summary,
                "problem": self.why_not_clean or None,
            },
            "compiles": self.compiles,
            "frames": self.frames,
            "compile_seconds": _round(self.seconds),
            "cache": self.cache,
            "graph_breaks": self.graph_breaks,
            "recompiles": self.recompiles,
            "failures": self.failures,
            "incomplete": self.incomplete or None,
        }


@dataclass
class Finding:
    """One line of the verdict: a regression or an improvement, worst first."""

    kind: str  # failure, graph_break, recompiles, compile_time, status, frame
    text: str
    weight: float  # orders findings of one kind
    link: str = ""  # a page of the diff site

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "page": self.link or None}


#: Kinds of finding, most serious first (the summary lists regressions in this order).
KIND_ORDER = ("failure", "graph_break", "status", "recompiles", "compile_time", "frame")


@dataclass
class TraceDiff:
    before: SideFacts
    after: SideFacts
    frames: list[FramePair]
    graph_breaks: Matched[BreakSite]
    failures: Matched[FailureSite]
    config: list[Change]
    regressions: list[Finding]
    improvements: list[Finding]

    @property
    def compile_pages(self) -> list[CompilePair]:
        return [c for f in self.frames for c in f.compiles if c.page]

    @property
    def seconds_change(self) -> float:
        return self.after.seconds - self.before.seconds

    @property
    def seconds_share(self) -> float | None:
        """The compile-time change as a share of BEFORE's (None when BEFORE has none)."""
        return self.seconds_change / self.before.seconds if self.before.seconds else None

    @property
    def time_changed(self) -> bool:
        return _time_changed(self.before.seconds, self.after.seconds)

    @property
    def unchanged(self) -> bool:
        """No regression, no improvement, no difference in torch, config or cache use, and
        neither side stops short."""
        same_setup = (
            self.before.torch_version == self.after.torch_version
            and self.before.cache == self.after.cache
        )
        changed = self.regressions or self.improvements or self.config or self.incomplete
        return not changed and same_setup

    @property
    def incomplete(self) -> list[str]:
        """Which side breaks off where, in words (empty when both are whole)."""
        return [
            f"{name} breaks off ({side.incomplete})"
            for name, side in (("BEFORE", self.before), ("AFTER", self.after))
            if side.incomplete
        ]

    @property
    def cache_change(self) -> str:
        """How the two sides' cache lookups differ, in words ("" when alike):
        ``cache misses 2 → 5, hits 7 → 4``."""
        b, a = self.before.cache, self.after.cache
        words = (("miss", "cache misses"), ("hit", "hits"), ("bypass", "bypasses"))
        parts = [f"{word} {b[key]} → {a[key]}" for key, word in words if b[key] != a[key]]
        if parts and not parts[0].startswith("cache"):
            parts[0] = "cache " + parts[0]
        return ", ".join(parts)

    @property
    def setup_changes(self) -> list[str]:
        """What differs besides the compiles themselves: torch, config, cache use."""
        changes = []
        if self.before.torch_version != self.after.torch_version:
            before, after = self.before.torch_version or "?", self.after.torch_version or "?"
            changes.append(f"torch {before} → {after}")
        if self.config:
            n = len(self.config)
            changes.append(f"{n} config value{'s' if n != 1 else ''}")
        if self.cache_change:
            changes.append(self.cache_change)
        return changes

    @property
    def verdict(self) -> str:
        if self.incomplete:
            return "incomplete"
        if self.unchanged:
            return "no change"
        if self.regressions and self.improvements:
            return "mixed"
        if self.regressions:
            return "worse"
        if self.improvements:
            return "better"
        return "same results, different setup"

    def as_json(self) -> dict[str, Any]:
        share = self.seconds_share
        return {
            "schema": SCHEMA,
            "verdict": self.verdict,
            "incomplete": self.incomplete,
            "before": self.before.as_json(),
            "after": self.after.as_json(),
            "regressions": [f.as_json() for f in self.regressions],
            "improvements": [f.as_json() for f in self.improvements],
            "graph_breaks": _matched_json(self.graph_breaks),
            "failures": _matched_json(self.failures),
            "recompiles": {
                "before": self.before.recompiles,
                "after": self.after.recompiles,
            },
            "compile_time": {
                "before_seconds": _round(self.before.seconds),
                "after_seconds": _round(self.after.seconds),
                "change_seconds": _round(self.seconds_change),
                "change_percent": None if share is None else round(100 * share, 1),
            },
            "cache": {"before": self.before.cache, "after": self.after.cache},
            "torch_version": {
                "before": self.before.torch_version,
                "after": self.after.torch_version,
            },
            "config": [{"key": c.what, "before": c.before, "after": c.after} for c in self.config],
            "frames": [f.as_json() for f in self.frames],
        }


def _matched_json(matched: Matched[Any]) -> dict[str, Any]:
    return {
        "fixed": [item.as_json() for item in matched.fixed],
        "new": [item.as_json() for item in matched.new],
        "unchanged": [{"before": b.as_json(), "after": a.as_json()} for b, a in matched.unchanged],
    }


def _round(seconds: float) -> float:
    return round(seconds, 4)


def _time_changed(before: float, after: float) -> bool:
    change = abs(after - before)
    return change >= MIN_SECONDS and change >= NOISE_SHARE * max(before, 1e-9)


# -- the whole diff -----------------------------------------------------------------------------
def diff_traces(before: Trace, after: Trace) -> TraceDiff:
    """Compare BEFORE with AFTER (each a loaded trace)."""
    times_before, times_after = before.compile_times, after.compile_times
    frames_before, frames_after = _frames(before, times_before), _frames(after, times_after)
    matched = _match(
        frames_before, frames_after, [lambda f: f.identity], prefer=lambda f: f.source or None
    )
    pairs: list[FramePair] = [FramePair(b, a) for b, a in matched.unchanged]
    pairs += [FramePair(b, None) for b in matched.fixed]
    pairs += [FramePair(None, a) for a in matched.new]
    pairs.sort(key=_frame_order)
    pages = 0
    for number, frame in enumerate(pairs):
        compiles = pair_compiles(
            frame.before.compiles if frame.before else [],
            frame.after.compiles if frame.after else [],
        )
        for index, (b, a) in enumerate(compiles):
            page = ""
            if b and a and (pages < MAX_COMPILE_PAGES or b.status != a.status):
                page = f"compiles/{number}_{index}.md"
                pages += 1
            frame.compiles.append(CompilePair(frame, b, a, page))
    # across torch versions a reason is worded anew: the same code line (or line) is the
    # same break, and a failure of the same compile the same failure
    other_torch = before.torch_version != after.torch_version
    break_keys: list[Callable[[BreakSite], Hashable | None]] = [
        lambda s: s.key,
        lambda s: s.code_key,
    ]
    fail_keys: list[Callable[[FailureSite], Hashable | None]] = [lambda s: s.key]
    if other_torch:
        break_keys.append(lambda s: s.line_key)
        fail_keys.append(lambda s: s.frame_key)
    breaks_before, breaks_after = before.graph_breaks, after.graph_breaks
    fails_before = [f for f in before.failures if not f.is_restart]
    fails_after = [f for f in after.failures if not f.is_restart]
    breaks = _match(
        [_break_site(before, gb) for gb in breaks_before],
        [_break_site(after, gb) for gb in breaks_after],
        break_keys,
        prefer=lambda s: s.source or None,
    )
    fails = _match(
        [_failure_site(before, f) for f in fails_before],
        [_failure_site(after, f) for f in fails_after],
        fail_keys,
    )
    diff = TraceDiff(
        before=_side(before, frames_before, times_before, len(breaks_before), len(fails_before)),
        after=_side(after, frames_after, times_after, len(breaks_after), len(fails_after)),
        frames=pairs,
        graph_breaks=breaks,
        failures=fails,
        config=_config_changes(before, after),
        regressions=[],
        improvements=[],
    )
    diff.regressions, diff.improvements = _findings(diff)
    return diff


def _frame_order(frame: FramePair) -> tuple[Any, ...]:
    """AFTER's order, then the frames AFTER lost in BEFORE's order."""
    if frame.after is not None:
        return (0, frame.after.compiles[0].unit.order if frame.after.compiles else 0)
    assert frame.before is not None
    return (1, frame.before.compiles[0].unit.order if frame.before.compiles else 0)


def _side(
    trace: Trace,
    frames_: list[Frame],
    times: list[CompileTime],
    graph_breaks: int,
    failures: int,
) -> SideFacts:
    """One side's facts; its compile time is the report's total (an AOTInductor build of no
    frame counts too)."""
    cache: Counter[str] = Counter()
    for unit in trace.units.values():
        for artifact in unit.artifacts:
            if artifact.cache is not None:
                cache[artifact.cache] += 1
    incomplete, trusted_to = _breaks_off(trace, frames_)
    return SideFacts(
        source=trace.source,
        torch_version=trace.torch_version,
        parse_summary=trace.stats.summary(),
        clean=trace.stats.is_clean,
        why_not_clean=trace.stats.why_not_clean() if not trace.stats.is_clean else "",
        compiles=sum(len(f.compiles) for f in frames_),
        frames=len(frames_),
        seconds=sum(t.total for t in times),
        cache={k: cache[k] for k in ("hit", "miss", "bypass")},
        graph_breaks=graph_breaks,
        recompiles=sum(f.recompiles for f in frames_),
        failures=failures,
        incomplete=incomplete,
        trusted_to=trusted_to,
    )


def _breaks_off(trace: Trace, frames_: list[Frame]) -> tuple[str, int | None]:
    """Where one side stops short, in words, and its last line to trust (None: all).

    Its input broke off (a cut download, damaged compressed data: the parse stats say where),
    or its run did (a compile still open at the log's end: the process was killed).
    """
    stats = trace.stats
    if stats.garbage_from is not None:
        return stats.break_text(), stats.garbage_from - 1
    open_ = [c.display for f in frames_ for c in f.compiles if c.status == INTERRUPTED]
    if open_:
        running = ", ".join(open_[:3])
        ends = f"line {stats.total_lines:,} of {stats.source}"
        return f"its log ends at {ends} while {running} was compiling", None
    return "", None


def _config(trace: Trace) -> dict[str, Any]:
    """The run's baseline configs (``config.RunConfig``: per config, the snapshot most compile
    ids ran with), flattened to ``dynamo_config.key``."""
    run = RunConfig(trace)
    flat: dict[str, Any] = {}
    for name, ref in run.baseline.items():
        flat.update((f"{name}.{key}", item) for key, item in run.settings(ref).items())
    return flat


def _config_changes(before: Trace, after: Trace) -> list[Change]:
    """Config keys set differently (a key only one torch has counts only when both sides
    logged that config)."""
    old, new = _config(before), _config(after)
    logged = {k.split(".", 1)[0] for k in old} & {k.split(".", 1)[0] for k in new}
    changes = []
    for key in sorted(old.keys() | new.keys()):
        if key.split(".", 1)[0] not in logged:
            continue
        a, b = old.get(key), new.get(key)
        if a != b and key in old and key in new:
            changes.append(Change(key, _short(a), _short(b)))
    return changes


def _short(value: Any) -> Any:
    text = value if isinstance(value, (int, float, bool)) or value is None else str(value)
    if isinstance(text, str) and len(text) > 120:
        return text[:119] + "…"
    return text


def _findings(diff: TraceDiff) -> tuple[list[Finding], list[Finding]]:
    """Regressions and improvements, worst first.

    A side that stops short (see :func:`_breaks_off`) lacks what came after its break: what
    only the other side has, and a smaller figure on its side, may be that missing part. So
    with a cut AFTER nothing it lacks counts as fixed, removed or faster, and with a cut
    BEFORE nothing AFTER adds counts as new or slower; a damaged side's compiles first seen
    past the damage (garbage read as records) count for nothing.
    """
    worse: list[Finding] = []
    better: list[Finding] = []
    cut_before, cut_after = bool(diff.before.incomplete), bool(diff.after.incomplete)

    def add(finding: Finding, is_worse: bool) -> None:
        # a finding is worse when AFTER has more (or BEFORE less): a cut BEFORE may explain it
        if is_worse and not cut_before:
            worse.append(finding)
        elif not is_worse and not cut_after:
            better.append(finding)

    for site in diff.failures.new:
        add(Finding("failure", f"new failure in {site.compile_id}: {site.summary}", 1), True)
    for site in diff.failures.fixed:
        text = f"failure fixed: {site.summary} (was {site.compile_id})"
        add(Finding("failure", text, 1), False)
    for site in diff.graph_breaks.new:
        text = f"new graph break: {site.reason} at {site.where} in {site.function or '?'}"
        add(Finding("graph_break", text, site.count), True)
    for site in diff.graph_breaks.fixed:
        text = f"graph break fixed: {site.reason} (was at {site.where})"
        add(Finding("graph_break", text, site.count), False)
    for old, new in diff.graph_breaks.unchanged:
        if new.count != old.count:
            text = f"graph break {new.reason} at {new.where} hit {old.count} → {new.count} times"
            add(Finding("graph_break", text, abs(new.count - old.count)), new.count > old.count)
    for frame in diff.frames:
        if _unreliable(frame.before, diff.before) or _unreliable(frame.after, diff.after):
            continue
        b, a = frame.recompiles
        if b is not None and a is not None and a != b:
            text = f"recompiles of {frame.label}: {b} → {a}"
            add(Finding("recompiles", text, abs(a - b)), a > b)
        for pair in frame.compiles:
            if pair.status_changed:
                assert pair.before and pair.after
                if INTERRUPTED in (pair.before.status, pair.after.status):
                    continue  # the break, said as the verdict, not a change of the code
                text = (
                    f"{frame.label} {pair.label}: {LABELS[pair.before.status]} → "
                    f"{LABELS[pair.after.status]}"
                )
                error_now = pair.after.status == "error"
                fixed = pair.before.status == "error"
                if error_now or (not fixed and pair.after.status != "ok"):
                    worse.append(Finding("status", text, 1, pair.page))
                else:
                    better.append(Finding("status", text, 1, pair.page))
        sb, sa = frame.seconds
        timed = frame.before and frame.after and frame.before.timed and frame.after.timed
        if timed and sb is not None and sa is not None and _time_changed(sb, sa):
            text = f"compile time of {frame.label}: {sb:.2f} s → {sa:.2f} s"
            assert frame.before and frame.after
            mb, ma = frame.before.cache_misses, frame.after.cache_misses
            if mb != ma:
                text += f" (cache misses {mb} → {ma})"
            add(Finding("compile_time", text, abs(sa - sb)), sa > sb)
        if frame.before is None:
            add(Finding("frame", f"new compiled frame: {frame.label}", 0), True)
        elif frame.after is None:
            add(Finding("frame", f"frame no longer compiled: {frame.label}", 0), False)
    if diff.time_changed:
        share = diff.seconds_share
        percent = "" if share is None else f" ({100 * share:+.0f}%)"
        text = (
            f"total compile time {diff.before.seconds:.2f} s → {diff.after.seconds:.2f} s{percent}"
        )
        add(Finding("compile_time", text, float("inf")), diff.seconds_change > 0)
    return _ordered(worse), _ordered(better)


def _unreliable(frame: Frame | None, side: SideFacts) -> bool:
    """Whether a frame of a side that stops short tells nothing: first seen past the damage
    (garbage read as records), or running when its log ended, unnamed (its records cut)."""
    if frame is None or not side.incomplete or not frame.compiles:
        return False
    if side.trusted_to is not None and frame.compiles[0].unit.first_line > side.trusted_to:
        return True
    return frame.function == "?" and all(c.status == INTERRUPTED for c in frame.compiles)


def _ordered(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (KIND_ORDER.index(f.kind), -f.weight, f.text))


# -- --fail-on ----------------------------------------------------------------------------------
FAIL_ON = ("graph-breaks", "recompiles", "failures", "compile-time")


def parse_fail_on(text: str) -> dict[str, float]:
    """``graph-breaks,recompiles,compile-time=+20%`` → {check: threshold}; raises ValueError.

    Only compile-time takes a threshold (a percentage; default +10%); an increase under
    :data:`MIN_SECONDS` never fails it (two runs of one program differ by that much).
    """
    checks: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if name not in FAIL_ON:
            raise ValueError(f"--fail-on: unknown check {name!r} (use {', '.join(FAIL_ON)})")
        if value and name != "compile-time":
            raise ValueError(f"--fail-on: {name} takes no value")
        threshold = 0.0
        if name == "compile-time":
            number = value.strip().lstrip("+").rstrip("%") if value else "10"
            try:
                threshold = float(number) / 100
            except ValueError:
                raise ValueError(f"--fail-on: compile-time=+N% expected, not {value!r}") from None
        checks[name] = threshold
    if not checks:
        raise ValueError("--fail-on: name at least one check")
    return checks


def failed_checks(diff: TraceDiff, checks: dict[str, float]) -> list[str]:
    """The checks AFTER fails, each said in words (empty: it passes).

    A side that stops short fails every gate: what it lacks cannot be compared.
    """
    failed = [
        f"{','.join(checks)}: cannot tell, the comparison is incomplete: {where}"
        for where in diff.incomplete
        if checks
    ]
    if "graph-breaks" in checks:
        grown = [n for o, n in diff.graph_breaks.unchanged if n.count > o.count]
        if diff.graph_breaks.new or grown:
            failed.append(
                f"graph-breaks: {len(diff.graph_breaks.new)} new, {len(grown)} hit more often"
            )
    if "recompiles" in checks and diff.after.recompiles > diff.before.recompiles:
        failed.append(f"recompiles: {diff.before.recompiles} → {diff.after.recompiles}")
    if "failures" in checks and diff.failures.new:
        failed.append(f"failures: {len(diff.failures.new)} new")
    if "compile-time" in checks:
        limit = diff.before.seconds * (1 + checks["compile-time"])
        if diff.after.seconds > limit and diff.seconds_change >= MIN_SECONDS:
            share = diff.seconds_share
            percent = "" if share is None else f" ({100 * share:+.0f}%)"
            failed.append(
                f"compile-time: {diff.before.seconds:.2f} s → {diff.after.seconds:.2f} s{percent}, "
                f"over +{100 * checks['compile-time']:.0f}%"
            )
    return failed

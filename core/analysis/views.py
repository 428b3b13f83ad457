"""The questions users arrive with, answered from the model.

Distinct graph breaks, recompiles per frame (with the failed guard and the guard diff),
failures and restarts. Pure functions of a :class:`Trace` (compile times: compile_time.py).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..records import loads_bounded

if TYPE_CHECKING:  # the model imports these views (see Trace.graph_breaks)
    from ..model import Artifact, CompileUnit, Trace
    from .exports import ExportCall

_BREAK_AT = re.compile(r"Graph break in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
#: torch <= 2.6 puts the reason on a "Reason: Unsupported: ..." line under the location.
_REASON_LINE = re.compile(r"^Reason:[ \t]*(?:Unsupported:[ \t]*)?", re.M)
_GB_LINK = re.compile(r"https?://\S+/gb/(?P<code>gb\d+)\.html")


# -- graph breaks ------------------------------------------------------------------------------
#: Lines of torch's reason blocks that carry a label: never a reason's title.
_LABELLED = re.compile(r"^\s*(?:Explanation|Hint|Developer debug context)\s*:\s*")
_EXPLANATION = re.compile(r"^\s*Explanation\s*:\s*(?P<text>.*)$", re.M)
_TICKED = re.compile(r"`([^`\n]+)`")


@dataclass
class GraphBreak:
    """One distinct graph break: a reason at a user location, and every compile that hit it."""

    title: str  # torch's title of the break ("Failed to trace builtin operator")
    location: str  # "file.py:21", or "" when the trace does not say
    detail: str  # explanation and hints
    user_stack: str
    doc_url: str | None
    names: tuple[str, ...] = ()  # the `names` its explanation quotes (`print`, ...)
    subject: str = ""  # what tells it from other breaks with the same title ("print")
    units: list[CompileUnit] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)

    @property
    def reason(self) -> str:
        """The title, with the subject when other breaks share that title."""
        return f"{self.title}: `{self.subject}`" if self.subject else self.title

    @property
    def count(self) -> int:
        return len(self.units)

    @property
    def short_location(self) -> str:
        """``file.py:21`` without the folders, for tables."""
        return self.location.rsplit("/", 1)[-1]

    @property
    def compile_ids(self) -> list[str]:
        return [u.display for u in self.units]


def reason_title(block: str, *, preamble: bool = False) -> tuple[str, str]:
    """The title of one of torch's reason blocks, and the block from the title on.

    After "Graph Break Reason:" (``preamble``) torch 2.13 writes a line ending in ':'
    ("Encountered graph break when ...:"), then the title; later versions put the title on
    that line itself. Lines labelled "Explanation:", "Hint:" ... are detail, never the title.
    """
    lines = block.strip("\n").split("\n")
    if preamble and lines[0].rstrip().endswith(":") and any(ln.strip() for ln in lines[1:]):
        lines = lines[1:]  # "Encountered graph break when ...:"
    while lines and not lines[0].strip():
        lines = lines[1:]
    detail = "\n".join(lines).strip("\n")
    for line in lines:
        if line.strip() and not _LABELLED.match(line):
            return line.strip(), detail
    for line in lines:  # only labelled lines: the explanation without its label
        if line.strip():
            return _LABELLED.sub("", line).strip(), detail
    return "", detail


def quoted_names(detail: str) -> tuple[str, ...]:
    """The `names` the explanation quotes, in order: where breaks of one title differ."""
    match = _EXPLANATION.search(detail)
    if not match:
        return ()
    names = (n.strip().rstrip(".") for n in _TICKED.findall(match["text"]))
    return tuple(dict.fromkeys(n for n in names if n))


def distinguishing_names(quoted: list[tuple[str, ...]]) -> list[str]:
    """For reasons sharing a title, the first name each quotes that not all of them quote
    ("" for a lone reason, or when they all quote the same names)."""
    if len(quoted) < 2:
        return [""] * len(quoted)
    common = set.intersection(*(set(names) for names in quoted))
    return [next((n for n in names if n not in common), "") for names in quoted]


def parse_graph_break(text: str) -> dict[str, str]:
    """Split a ``dynamo_graph_break_reason`` payload into reason, location, detail, stack."""
    location = ""
    match = _BREAK_AT.search(text)
    if match:
        location = f"{match['file']}:{match['line']}"
    body = text.split("\nUser code traceback:", 1)
    head = body[0]
    stack = body[1].split("\n\nTraceback (most recent call last):", 1)[0] if len(body) > 1 else ""
    after = head.split("Graph Break Reason:", 1)
    labelled = _REASON_LINE.search(head)
    if len(after) > 1:
        title, detail = reason_title(after[1], preamble=True)
    elif labelled:
        title, detail = reason_title(head[labelled.end() :])
        title = _first_sentence(title)
    else:
        title, detail = reason_title(head)
    doc = _GB_LINK.search(text)
    return {
        "reason": title or "(no reason given)",
        "location": location,
        "detail": detail,
        "user_stack": stack.strip("\n"),
        "doc_url": doc.group(0) if doc else "",
    }


def _first_sentence(reason: str) -> str:
    """The first sentence of a paragraph-long reason (torch <= 2.6 put its advice in it; the
    whole text stays in the detail)."""
    if len(reason) <= 100:
        return reason
    return reason.split(". ", 1)[0].rstrip(".")


def graph_breaks(trace: Trace) -> list[GraphBreak]:
    """Distinct graph breaks, most frequent first, deduplicated by reason, the names its
    explanation quotes (`open` and `print` at one line are two breaks) and location."""
    found: dict[tuple[str, str, tuple[str, ...]], GraphBreak] = {}
    for unit in trace.units.values():
        for artifact in unit.artifacts:
            if artifact.name != "dynamo_graph_break_reason" or artifact.payload is None:
                continue
            info = parse_graph_break(trace.read_payload(artifact.payload))
            _add_break(found, info, unit, artifact)
    breaks = list(found.values()) or _restart_breaks(trace)
    by_title: dict[str, list[GraphBreak]] = {}
    for gb in breaks:
        by_title.setdefault(gb.title, []).append(gb)
    for same in by_title.values():
        for gb, subject in zip(same, distinguishing_names([gb.names for gb in same]), strict=True):
            gb.subject = subject
    return sorted(breaks, key=lambda b: (-b.count, b.units[0].order))


def _add_break(
    found: dict[tuple[str, str, tuple[str, ...]], GraphBreak],
    info: dict[str, str],
    unit: CompileUnit,
    artifact: Artifact | None,
) -> None:
    names = quoted_names(info["detail"])
    key = (info["reason"], info["location"], names)
    entry = found.get(key)
    if entry is None:
        entry = found[key] = GraphBreak(
            title=info["reason"],
            location=info["location"],
            detail=info["detail"],
            user_stack=info["user_stack"],
            doc_url=info["doc_url"] or None,
            names=names,
        )
    entry.units.append(unit)
    if artifact is not None:
        entry.artifacts.append(artifact)


def _restart_breaks(trace: Trace) -> list[GraphBreak]:
    """Graph breaks of torch <= 2.5, which logs no break record: only the reasons dynamo
    restarted for, on the restarted attempt's metrics.

    A break is charged to the attempt that hit it (``[1/0]``, not ``[1/0_1]``) and placed at
    the line dynamo resumed after (its resume function's name says it). One reason hit by
    several frames (a helper inlined into each caller) is one break, at the line most hits
    name.
    """
    resumes = _resume_lines(trace)
    found: dict[tuple[str, str, tuple[str, ...]], GraphBreak] = {}
    lines: dict[int, Counter[str]] = {}
    for unit in trace.units.values():
        for reason in _restart_reasons(unit):
            title, detail = reason_title(reason)
            title = _first_sentence(title)
            info = dict(reason=title, location="", detail=detail, user_stack="", doc_url="")
            hit = _first_attempt(trace, unit)
            _add_break(found, info, hit, None)
            entry = found[(title, "", quoted_names(detail))]
            lines.setdefault(id(entry), Counter())[_break_line(unit, resumes)] += 1
    for entry in found.values():
        known = [(n, loc) for loc, n in lines[id(entry)].items() if loc]
        entry.location = max(known)[1] if known else ""
    explained = {loc for counts in lines.values() for loc in counts}
    for unit in trace.units.values():  # a break that did not restart (a data-dependent jump)
        where = _break_line(unit, resumes) if unit.id and not unit.id.attempt else ""
        if where and where not in explained and _resumed_at(where, resumes):
            explained.add(where)
            info = dict(reason=UNLOGGED_BREAK, location=where, detail="", user_stack="", doc_url="")
            _add_break(found, info, unit, None)
    return list(found.values())


#: A torch <= 2.5 break dynamo resumed after without restarting, so logged no reason for.
UNLOGGED_BREAK = "Graph break (this torch logs no reason for it)"


def _resumed_at(where: str, resumes: dict[tuple[str, str], list[int]]) -> bool:
    filename, _, line = where.rpartition(":")
    return any(f == filename and int(line) in ns for (f, _), ns in resumes.items())


_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>.+)_at_(?P<line>\d+)$")


def _resume_lines(trace: Trace) -> dict[tuple[str, str], list[int]]:
    """(file, function) → the lines dynamo resumed that function after, from the names of
    the resume functions it compiled."""
    found: dict[tuple[str, str], list[int]] = {}
    for unit in trace.units.values():
        match = _RESUME.match(str(unit.metric("co_name") or ""))
        if match:
            key = (str(unit.metric("co_filename")), match["name"])
            found.setdefault(key, []).append(int(match["line"]))
    return found


def _break_line(unit: CompileUnit, resumes: dict[tuple[str, str], list[int]]) -> str:
    """``file:line`` where this frame's compile broke: the first resume point after the
    frame's first line, else the frame's first line."""
    filename, name = unit.metric("co_filename"), str(unit.metric("co_name") or "")
    first = unit.metric("co_firstlineno")
    if not filename:
        return ""
    match = _RESUME.match(name)
    base = match["name"] if match else name
    lines = resumes.get((str(filename), base), [])
    after = [n for n in lines if isinstance(first, int) and n > first]
    return f"{filename}:{min(after) if after else first}"


def _first_attempt(trace: Trace, unit: CompileUnit) -> CompileUnit:
    """The attempt that hit a break (attempt 0), when the restarted one logs its reason."""
    if unit.id is None or not unit.id.attempt:
        return unit
    return trace.units.get(replace(unit.id, attempt=0), unit)


def _restart_reasons(unit: CompileUnit) -> list[str]:
    reasons: list[str] = []
    for event in unit.compilation_metrics:
        value = event.meta.get("restart_reasons")
        if isinstance(value, list):
            reasons.extend(str(r) for r in value)
    return reasons


def _unit_location(unit: CompileUnit) -> str:
    filename = unit.metric("co_filename")
    line = unit.metric("co_firstlineno")
    return f"{filename}:{line}" if filename else ""


# -- recompiles --------------------------------------------------------------------------------
@dataclass
class Recompile:
    """One recompile of a frame: why, and how its guards differ from the previous compile's."""

    unit: CompileUnit
    previous: CompileUnit | None
    reason: str
    all_reasons: list[str]
    guard_diff: list[str]  # unified-diff lines, previous → this compile


@dataclass
class FrameCompiles:
    """All compiles of one frame (one code object), in order."""

    frame: str  # "0" or "!0/3"
    function: str
    location: str
    units: list[CompileUnit]
    recompiles: list[Recompile]


def frames(trace: Trace) -> list[FrameCompiles]:
    """Compile units grouped by frame, each with its recompile chain."""
    groups: dict[tuple[Any, Any], list[CompileUnit]] = {}
    for unit in trace.units.values():
        if unit.id is None or unit.id.frame_id is None:
            continue
        groups.setdefault((unit.id.compiled_autograd_id, unit.id.frame_id), []).append(unit)
    result = []
    for (ca, frame_id), units in groups.items():
        label = str(frame_id) if ca is None else f"!{ca}/{frame_id}"
        chain: list[Recompile] = []
        previous: CompileUnit | None = None
        for unit in units:
            if unit.id is not None and unit.id.attempt not in (0, None):
                continue  # restarts of one compile are not recompiles
            if previous is not None and (unit.id.frame_compile_id or 0) > 0:
                chain.append(_recompile(trace, unit, previous))
            previous = unit
        first = units[0]
        function = next((u.metric("co_name") for u in units if u.metric("co_name")), "")
        if not function and first.stack:
            function = first.stack[-1].name
        result.append(FrameCompiles(label, function or "?", _frame_location(units), units, chain))
    return result


def recompiles(trace: Trace) -> list[Recompile]:
    return [r for frame in frames(trace) for r in frame.recompiles]


def _frame_location(units: list[CompileUnit]) -> str:
    for unit in units:
        loc = _unit_location(unit)
        if loc:
            return loc
    for unit in units:
        if unit.stack:
            last = unit.stack[-1]
            return f"{last.filename}:{last.line}"
    return ""


def _recompile(trace: Trace, unit: CompileUnit, previous: CompileUnit) -> Recompile:
    reasons = recompile_reasons(trace, unit)
    reason = unit.metric("recompile_reason") or (reasons[0] if reasons else "")
    before = _final_guards(trace, previous)
    after = _final_guards(trace, unit)
    if not before or not after:  # a failed compile has no guards: a diff would mislead
        return Recompile(unit, previous, str(reason), reasons, [])
    diff = list(
        difflib.unified_diff(
            before, after, f"guards {previous.display}", f"guards {unit.display}", n=1, lineterm=""
        )
    )
    if not reason:  # torch <= 2.4 logs no reason: the first guard of the previous compile
        reason = _changed_guard(previous, diff)  # that this one no longer has
    return Recompile(unit, previous, str(reason).rstrip(), reasons, diff)


#: A C++ guard-tree line: the tree drawing and the guard kind ("| | +- EQUALS_MATCH: ").
_GUARD_TREE = re.compile(r"^[-|+ ]*(?:[A-Z_]+:\s*)?")


def _changed_guard(previous: CompileUnit, diff: list[str]) -> str:
    """``0/0: L['mode'] == 'relu'``, in torch's own reason format, from a guard diff."""
    for line in diff:
        if line.startswith("-") and not line.startswith("---"):
            code = _GUARD_TREE.sub("", line[1:]).split("  #", 1)[0].strip()
            if code and not code.startswith("GuardManager"):
                return f"{previous.display.strip('[]')}: {code}"
    return ""


def recompile_reasons(trace: Trace, unit: CompileUnit) -> list[str]:
    """The ``recompile_reasons`` artifact as a list of strings (it is a string or a list)."""
    for artifact in unit.artifacts:
        if artifact.name == "recompile_reasons" and artifact.payload is not None:
            text = trace.read_payload(artifact.payload)
            try:
                value = loads_bounded(text)
            except ValueError:
                return [text]
            if isinstance(value, list):
                return [str(v) for v in value]
            return [str(value)]
    reason = unit.metric("recompile_reason")
    return [str(reason)] if reason else []


def _final_guards(trace: Trace, unit: CompileUnit) -> list[str]:
    """The guards a compile installed: a compile restarted after a graph break logs them
    on its last attempt (``[1/0_1]``), not on ``[1/0]``."""
    lines = guard_lines(trace, unit)
    attempt = 1
    while not lines and unit.id is not None:
        retry = trace.units.get(replace(unit.id, attempt=attempt))
        if retry is None:
            break
        lines = guard_lines(trace, retry)
        attempt += 1
    return lines


def guard_codes(payload: str) -> list[str]:
    """The guards a ``dynamo_guards`` payload lists, each as its code (none when the payload
    is not a JSON list): the one reader of that payload, for every page that shows guards."""
    try:
        value = loads_bounded(payload)
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    return [str(guard.get("code")) for guard in value if isinstance(guard, dict)]


def guard_lines(trace: Trace, unit: CompileUnit) -> list[str]:
    """The guards of a compile, one per line (dynamo_guards, else the C++ guard tree)."""
    for artifact in unit.artifacts:
        if artifact.kind == "dynamo_guards" and artifact.payload is not None:
            codes = guard_codes(trace.read_payload(artifact.payload))
            if codes:  # torch 2.4 logs an empty list here and the guards in C++ form
                return codes
    for artifact in unit.artifacts:
        if artifact.kind == "dynamo_cpp_guards_str" and artifact.payload is not None:
            return [ln.rstrip() for ln in trace.read_payload(artifact.payload).split("\n")]
    return []


# -- failures and restarts ---------------------------------------------------------------------
#: "got RuntimeError('a and b must ...')" inside an explanation: the exception that was raised.
_GOT_EXCEPTION = re.compile(r"got (?P<type>\w+)\((?P<q>['\"])(?P<message>.+?)(?P=q)\)\s*$", re.M)
_BACKEND_RAISED = re.compile(r"^backend='(?P<name>[^']*)' raised$")
SUMMARY_LIMIT = 300


@dataclass
class Failure:
    """A row of tlparse's Failures and Restarts table."""

    unit: CompileUnit
    kind: str  # "RestartAnalysis" or the exception type
    description: str
    source: str  # "file:line" where a compilation failed, "" when the trace does not say
    is_restart: bool
    backward: bool = False
    function_source: str = ""  # where the compiled function starts, when `source` is ""
    subject: str = ""  # the name its title leaves out, or tells it from others ("print")
    line: int = 0  # the record that says it failed
    export_call: ExportCall | None = None  # the torch.export call that failed, if one did

    @property
    def summary(self) -> str:
        """One line that says what went wrong: the exception, not a line ending in ':'."""
        return failure_summary(self.description)

    @property
    def headline(self) -> str:
        """The summary, with the subject (`print`) when there is one."""
        return f"{self.summary}: `{self.subject}`" if self.subject else self.summary

    @property
    def short_source(self) -> str:
        return self.source.rsplit("/", 1)[-1]

    @property
    def short_function_source(self) -> str:
        return self.function_source.rsplit("/", 1)[-1]


def failure_summary(description: str) -> str:
    """The meaningful line of a failure's message.

    "backend='x' raised:" is followed by the exception ("MyBackendError: boom"): both are
    said; a graph-break style message gives its title, plus the exception its explanation
    quotes ("got RuntimeError('...')"), when it has one.
    """
    lines = [ln.strip() for ln in description.strip().split("\n") if ln.strip()]
    if not lines:
        return "(no reason logged)"
    first = lines[0]
    if first.endswith(":") and len(lines) > 1 and not _LABELLED.match(lines[1]):
        head = first[:-1].rstrip()
        backend = _BACKEND_RAISED.match(head)
        if backend:
            head = f"backend '{backend['name']}' raised"
        summary = f"{head} {lines[1]}"
    else:
        title, detail = reason_title(description)
        summary = title or first
        explanation = _EXPLANATION.search(detail)
        got = _GOT_EXCEPTION.search(explanation["text"]) if explanation else None
        if got:  # "RuntimeError when ...": the type is said already
            said = got["type"] in summary
            summary = f"{summary}: {'' if said else got['type'] + ': '}{got['message']}"
    if len(summary) > SUMMARY_LIMIT:
        summary = summary[: SUMMARY_LIMIT - 1].rstrip() + "…"
    return summary


#: Failures of a whole frame, whatever record torch logs them in.
_FRAME_LIMITS = frozenset({"RecompileLimitExceeded", "CacheLimitExceeded"})
_CLASS_REPR = re.compile(r"^<class '(?:[\w.]+\.)?(?P<name>\w+)'>$")


def exception_name(fail_type: Any) -> str:
    """The exception's class name: torch 2.4 logs ``<class 'torch._dynamo.exc.Unsupported'>``."""
    text = str(fail_type or "").strip()
    match = _CLASS_REPR.match(text)
    return match["name"] if match else text


#: What a failed ``make_fx`` trace (a non-strict ``torch.export`` that raised) logs: the
#: graph it had traced, never the exception.
PARTIAL_GRAPH = "make_fx_fail_partial"
MAKE_FX_FAILED = "make_fx raised"


def failures(trace: Trace) -> list[Failure]:
    rows: list[Failure] = []
    starts = _frame_starts(trace)
    for unit in trace.units.values():
        if any(a.name == PARTIAL_GRAPH for a in unit.artifacts) and not unit.metrics:
            rows.append(
                Failure(
                    unit,
                    MAKE_FX_FAILED,
                    "the traced code raised (a non-strict torch.export, for one); the trace "
                    f"logs the graph traced so far ({PARTIAL_GRAPH}), not the exception",
                    "",
                    False,
                    line=next(a.line for a in unit.artifacts if a.name == PARTIAL_GRAPH),
                )
            )
        for event in unit.metrics:
            if event.type not in ("compilation_metrics", "bwd_compilation_metrics"):
                continue
            meta = event.meta
            fail_type = exception_name(meta.get("fail_type"))
            # torch 2.6 logs the recompile limit (a frame's, never a backward's) as bwd metrics
            backward = event.type.startswith("bwd") and fail_type not in _FRAME_LIMITS
            for reason in meta.get("restart_reasons") or []:
                rows.append(
                    Failure(
                        unit, "RestartAnalysis", str(reason), "", True, backward, line=event.line
                    )
                )
            if fail_type:
                filename = meta.get("fail_user_frame_filename")
                line = meta.get("fail_user_frame_lineno")
                source = f"{filename}:{line}" if filename and line else ""
                rows.append(
                    Failure(
                        unit,
                        fail_type,
                        str(meta.get("fail_reason") or "(no reason logged)"),
                        source,
                        False,
                        backward,
                        function_source="" if source else starts.get(_frame_key(unit), ""),
                        line=event.line,
                    )
                )
    _name_subjects([r for r in rows if r.is_restart])
    _name_subjects([r for r in rows if not r.is_restart])
    return rows


def _frame_key(unit: CompileUnit) -> tuple[Any, Any]:
    if unit.id is None:
        return (None, None)
    return (unit.id.compiled_autograd_id, unit.id.frame_id)


def _frame_starts(trace: Trace) -> dict[tuple[Any, Any], str]:
    """Where each frame's function starts (from any of its compiles): a failure whose user
    frame the trace does not record (a backend error, the recompile limit) points there."""
    starts: dict[tuple[Any, Any], str] = {}
    for unit in trace.units.values():
        key = _frame_key(unit)
        if key[1] is None or starts.get(key):
            continue
        location = _unit_location(unit)
        if not location and unit.stack:
            location = f"{unit.stack[-1].filename}:{unit.stack[-1].line}"
        starts[key] = location
    return starts


def _name_subjects(rows: list[Failure]) -> None:
    """Rows whose reasons share a title get the name that differs (`open`, `print`); a title
    that names nothing ("Failed to trace builtin operator") gets the first name its
    explanation quotes, so that it says what failed."""
    by_title: dict[str, list[tuple[Failure, tuple[str, ...]]]] = {}
    for row in rows:
        title, detail = reason_title(row.description)
        by_title.setdefault(title, []).append((row, quoted_names(detail)))
    for title, same in by_title.items():
        subjects = distinguishing_names([n for _, n in same])
        for (row, names), subject in zip(same, subjects, strict=True):
            if not subject and names and "`" not in title and names[0] not in title:
                subject = names[0]
            row.subject = subject

"""Read every rank of a distributed job into compact summaries, in parallel.

A 64-rank job is 64 logs, each as large as a single-rank trace. Holding 64 :class:`Trace`
models at once would make memory grow with the sum of the logs, so each rank is read by
:func:`~tlsite.core.load_source` in a worker (a helper process, or this one), reduced there to
a :class:`RankSummary` (compile ids, cache statuses, collective schedules, runtime totals,
tensor-metadata fingerprints, execution order, compile times, parity findings: a few hundred
bytes per compile id), and the model is closed before the worker's next rank starts. Memory
is then bounded by the largest rank plus the summaries, not by the sum.

Bulk data the file writers need later (chromium events, per-op runtime estimates) is spilled
by the worker into ``workdir`` and only its path and count travel back.

Damaged data never stops the job: an artifact that does not parse is noted in
``RankSummary.problems``, and a log that cannot be read at all gives a summary with
``error`` set, so the other ranks are still compared.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from . import load_source
from .analysis.collectives import parity
from .cleanup import make_scratch, remove_scratch
from .compile_id import parse_compile_id_string
from .model import Artifact, CompileUnit, Trace
from .records import is_finite_number, loads_bounded
from .source import LogSource, ResolvedInput, _rank_of
from .worker import TaskPool

#: Cache statuses from strongest to weakest (a compile id's status is its strongest lookup).
CACHE_STRENGTH = ("miss", "hit", "bypass")

RUNTIME_ARTIFACT = "inductor_runtime_and_tensor_meta"
SCHEDULE_ARTIFACT = "inductor_collective_schedule"
EXECUTION_ARTIFACT = "graph_execution"

#: Per-rank hook run in the worker while the rank's model is still open (see load_ranks).
RankHook = Callable[[Trace, "RankSummary", LogSource], Any]


# -- the summary --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CacheEvent:
    """One cache lookup of a compile id: ``miss``/``hit``/``bypass`` and the artifact saying so."""

    status: str
    name: str  # artifact name, e.g. "fx_graph_cache_miss"
    number: int  # artifact number (the anchor on the compile-id page)


@dataclass(slots=True)
class UnitSummary:
    """What the cross-rank analyses need of one compile id on one rank."""

    key: str  # compile_directory.json key, e.g. "[0/1]"
    dirname: str  # the compile-id page folder, e.g. "-_0_1_0"
    order: int  # first-seen order in this rank's log
    is_compile: bool  # a real compile id (not "[-/-]" or "unknown")
    cache: tuple[CacheEvent, ...] = ()
    schedule: tuple[str, ...] | None = None  # collective ops, all schedules of the id in order
    schedule_folder: str | None = None
    schedule_artifact: int | None = None
    runtime_ns: float | None = None  # total estimated runtime of the id's graphs
    runtime_ops: int = 0
    runtime_artifact: int | None = None
    tensor_meta: str | None = None  # fingerprint of the tensor metadata (runtimes excluded)
    tensor_meta_artifact: int | None = None
    compile_seconds: float | None = None
    has_output_code: bool = False
    recompile_reason: str | None = None  # the guard that failed, first line, source comment cut

    @property
    def cache_sequence(self) -> str:
        """The lookups in words, ``miss, hit``: tlparse's ❌✅ need an emoji font to show."""
        return ", ".join(event.status for event in self.cache)

    @property
    def cache_status(self) -> str | None:
        """The strongest status among the lookups (miss > hit > bypass), as tlparse ranks them."""
        statuses = {event.status for event in self.cache}
        return next((s for s in CACHE_STRENGTH if s in statuses), None)


@dataclass(frozen=True, slots=True)
class ParityFinding:
    """A graph whose output code departs from its collective schedule (collectives_parity.json)."""

    graph: str  # folder name
    compile_id: str
    offset: int
    missing_waits: int
    scheduled: int
    called: int
    waits: int
    artifact: int | None = None  # the schedule artifact, for a link


@dataclass
class RankSummary:
    """One rank, reduced to what the landing page and the multi-rank files need."""

    rank: int
    source: str  # the log's display name
    units: list[UnitSummary] = field(default_factory=list)
    execution_order: list[str] | None = None  # compile ids, as "[0/1]"
    execution_artifact: tuple[str, int] | None = None  # (folder, number) of the order used
    chromium_events: int = 0
    #: JSON lines, one event each with its ``pid`` the rank's (in the load's workdir)
    chromium_path: str | None = None
    runtime_path: str | None = None  # JSON lines {"graph", "compile_id", "ops"} per graph
    parity: list[ParityFinding] = field(default_factory=list)
    parity_checked: int = 0  # graphs that logged both a schedule and output code
    compile_seconds: float = 0.0
    records: int = 0
    skipped_lines: int = 0
    parse_summary: str = ""
    torch_version: str | None = None
    problems: list[str] = field(default_factory=list)  # malformed artifacts, noted and skipped
    error: str | None = None  # the log could not be read at all
    empty: bool = False  # the rank's log is empty: it logged nothing
    extra: Any = None  # what the per-rank hook returned

    @property
    def ok(self) -> bool:
        """Whether this rank's log was read (an empty log counts: it says the rank did nothing)."""
        return self.error is None

    @property
    def compile_units(self) -> list[UnitSummary]:
        return [u for u in self.units if u.is_compile]

    def unit_map(self) -> dict[str, UnitSummary]:
        return {u.key: u for u in self.units}

    @property
    def cache_counts(self) -> Counter[str]:
        return Counter(e.status for u in self.units for e in u.cache)

    @property
    def runtime_graphs(self) -> int:
        return sum(1 for u in self.units if u.runtime_ns is not None)


# -- summarising one trace ----------------------------------------------------------------------
def summarize_trace(trace: Trace, rank: int, workdir: str | os.PathLike[str]) -> RankSummary:
    """Reduce one rank's model to its summary; bulk data is spilled into ``workdir``.

    Runs in the worker, so it may read payloads freely: only the summary crosses back.
    """
    work = Path(workdir)
    summary = RankSummary(
        rank=rank,
        source=trace.source,
        chromium_events=trace.chromium_events,
        records=trace.stats.records,
        skipped_lines=trace.stats.skipped_lines,
        parse_summary=trace.stats.summary(),
        torch_version=trace.torch_version,
    )
    seconds: dict[int, float] = {}  # a unit's export calls are timed one by one: summed here
    for timed in trace.compile_times:
        seconds[id(timed.unit)] = seconds.get(id(timed.unit), 0.0) + timed.total
    summary.compile_seconds = sum(seconds.values())
    runtime_lines: list[str] = []
    reasons: dict[tuple[int | None, ...], str] = {}  # per frame compile, for every attempt
    for unit in trace.units.values():
        summary.units.append(_summarize_unit(trace, unit, summary, runtime_lines))
        summary.units[-1].compile_seconds = seconds.get(id(unit))
        if summary.units[-1].recompile_reason and unit.id is not None:
            reasons.setdefault(_frame_compile(unit), summary.units[-1].recompile_reason)
    for unit, unit_summary in zip(trace.units.values(), summary.units, strict=True):
        if unit_summary.recompile_reason is None and unit.id is not None:
            unit_summary.recompile_reason = reasons.get(_frame_compile(unit))
    _execution_order(trace, summary)
    if runtime_lines:
        path = work / f"rank_{rank}.runtime.jsonl"
        path.write_text("".join(runtime_lines), encoding="utf-8")
        summary.runtime_path = str(path)
    if trace.chromium_events and trace.chromium_path.exists():
        path = work / f"rank_{rank}.chromium.jsonl"
        _chromium_of_rank(trace.chromium_path, path, rank)
        summary.chromium_path = str(path)
    return summary


def _chromium_of_rank(spill: Path, dest: Path, rank: int) -> None:
    """The rank's chromium events as the job's ``chromium_events.json`` holds them, one a line:
    ``pid`` set to the rank, encoded here, in the rank's process, so that the build process
    only joins the ranks' lines. An event that is not a JSON object cannot carry a pid and
    is left out."""
    with open(spill, encoding="utf-8") as lines, open(dest, "w", encoding="utf-8") as out:
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                event["pid"] = rank
                out.write(json.dumps(event, ensure_ascii=False))
                out.write("\n")


def _is_compile(unit: CompileUnit) -> bool:
    return unit.id is not None and not unit.id.is_empty


def _folder(artifact: Artifact, unit: CompileUnit) -> str:
    return (
        artifact.path.split("/", 1)[0] if artifact.path and "/" in artifact.path else unit.dirname
    )


#: Where torch appends the guard's source line to a reason: ``___stack0 == 3.3   # if h > 1:``.
_SOURCE_COMMENT = re.compile(r"\s{2,}#")


#: A guard longer than this is cut on the landing page (one per rank's extra compile id: a
#: trace's megabyte-long guard would otherwise repeat there for every rank that logged it).
GUARD_LINE_MAX = 300


def _guard_line(reason: Any) -> str | None:
    """The failed guard of a ``recompile_reason``: its first line, without the source comment
    and user stack torch appends (the rank's compile page shows those), cut to
    :data:`GUARD_LINE_MAX` characters."""
    if not isinstance(reason, str) or not reason.strip():
        return None
    line = _SOURCE_COMMENT.split(reason.strip().splitlines()[0], maxsplit=1)[0].rstrip()
    return line if len(line) <= GUARD_LINE_MAX else line[: GUARD_LINE_MAX - 1] + "…"


def _frame_compile(unit: CompileUnit) -> tuple[int | None, ...]:
    """A compile id without its attempt: torch logs a recompile's reason once, on the attempt
    that finished, so a graph break's first attempt takes it from there."""
    assert unit.id is not None
    return (unit.id.compiled_autograd_id, unit.id.frame_id, unit.id.frame_compile_id)


def _summarize_unit(
    trace: Trace, unit: CompileUnit, summary: RankSummary, runtime_lines: list[str]
) -> UnitSummary:
    result = UnitSummary(
        key=unit.key, dirname=unit.dirname, order=unit.order, is_compile=_is_compile(unit)
    )
    result.recompile_reason = _guard_line(unit.metric("recompile_reason"))
    result.cache = tuple(
        CacheEvent(a.cache, a.name, a.number) for a in unit.artifacts if a.cache and a.path
    )
    schedules: list[str] = []
    seen_schedule = False
    runtime_ops: list[dict[str, Any]] = []
    metas: list[str] = []
    codes: list[str] = []
    runtime_folder = None
    for artifact in unit.artifacts:
        if artifact.payload is None or artifact.path is None:
            continue
        if artifact.name.startswith(SCHEDULE_ARTIFACT):
            ops = _schedule_ops(trace, artifact, unit, summary)
            if ops is None:
                continue
            seen_schedule = True
            if result.schedule_artifact is None:
                result.schedule_artifact = artifact.number
                result.schedule_folder = _folder(artifact, unit)
            schedules.extend(ops)
        elif artifact.name.startswith(RUNTIME_ARTIFACT) and artifact.path.endswith(".json"):
            parsed = _runtime_and_meta(trace, artifact, unit, summary)
            if parsed is None:
                continue
            ops, meta = parsed
            if ops:
                runtime_ops.extend(ops)
                if result.runtime_artifact is None:
                    result.runtime_artifact = artifact.number
                    runtime_folder = _folder(artifact, unit)
            metas.append(meta)
            if result.tensor_meta_artifact is None:
                result.tensor_meta_artifact = artifact.number
        elif artifact.kind == "inductor_output_code":
            codes.append(trace.read_payload(artifact.payload))
    if schedules:
        result.schedule = tuple(schedules)
    if runtime_ops:
        result.runtime_ns = sum(op["estimated_runtime_ns"] for op in runtime_ops)
        result.runtime_ops = len(runtime_ops)
        line = {"graph": runtime_folder, "compile_id": unit.key, "ops": runtime_ops}
        runtime_lines.append(json.dumps(line, ensure_ascii=False) + "\n")
    if metas:
        result.tensor_meta = hashlib.md5(",".join(metas).encode("utf-8")).hexdigest()
    result.has_output_code = bool(codes)
    if seen_schedule and codes:
        summary.parity_checked += 1
        check = parity(schedules, "\n".join(codes))
        if not check.ok:
            summary.parity.append(
                ParityFinding(
                    graph=result.schedule_folder or unit.dirname,
                    compile_id=unit.key,
                    offset=check.offset,
                    missing_waits=check.missing_waits,
                    scheduled=check.scheduled,
                    called=check.called,
                    waits=check.waits,
                    artifact=result.schedule_artifact,
                )
            )
    return result


def _problem(summary: RankSummary, unit: CompileUnit, artifact: Artifact, what: str) -> None:
    summary.problems.append(f"{unit.display} {artifact.filename}: {what}")


def _json(trace: Trace, artifact: Artifact) -> tuple[Any, str | None]:
    """The artifact's payload as JSON, or (None, why not)."""
    text = trace.read_payload(artifact.payload) if artifact.payload else ""
    try:
        return loads_bounded(text), None
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"


def _schedule_ops(
    trace: Trace, artifact: Artifact, unit: CompileUnit, summary: RankSummary
) -> list[str] | None:
    value, error = _json(trace, artifact)
    if error is not None:
        _problem(summary, unit, artifact, error + "; schedule ignored")
        return None
    if not isinstance(value, list) or not all(isinstance(op, str) for op in value):
        _problem(summary, unit, artifact, "not a list of op names; schedule ignored")
        return None
    return value


#: Runtime estimates at or above this many nanoseconds (31 years) are not taken: sums of them
#: would overflow to infinity, which JSON cannot hold.
MAX_RUNTIME_NS = 1e18


def _runtime_value(value: object) -> bool:
    """A JSON number that is a plausible runtime: not a bool, infinity (``1e400`` reads as
    one), NaN or absurdly large."""
    return is_finite_number(value) and abs(value) < MAX_RUNTIME_NS  # type: ignore[operator]


def _runtime_and_meta(
    trace: Trace, artifact: Artifact, unit: CompileUnit, summary: RankSummary
) -> tuple[list[dict[str, Any]], str] | None:
    """The ops' runtime estimates, and the canonical JSON of the metadata without them.

    tlparse fingerprinted the whole file, so runtime-estimate noise looked like diverging
    tensor metadata; the estimates are taken out before fingerprinting.
    """
    value, error = _json(trace, artifact)
    if error is not None:
        _problem(summary, unit, artifact, error + "; runtime and tensor metadata ignored")
        return None
    ops_value = value.get("ops") if isinstance(value, dict) else None
    if not isinstance(ops_value, list):
        _problem(summary, unit, artifact, "no 'ops' list; runtime and tensor metadata ignored")
        return None
    ops: list[dict[str, Any]] = []
    bad = 0
    stripped: list[Any] = []
    for op in ops_value:
        if not isinstance(op, dict):
            bad += 1
            stripped.append(op)
            continue
        name, ns = op.get("name"), op.get("estimated_runtime_ns")
        if isinstance(name, str) and _runtime_value(ns):
            ops.append({"name": name, "estimated_runtime_ns": float(ns)})  # f64, as tlparse
        else:
            bad += 1
        stripped.append({k: v for k, v in op.items() if k != "estimated_runtime_ns"})
    if bad:
        what = f"{bad} op(s) without a name and a plausible runtime; those ops ignored"
        _problem(summary, unit, artifact, what)
    meta = {**value, "ops": stripped}
    canonical = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return ops, canonical


def _execution_order(trace: Trace, summary: RankSummary) -> None:
    """The newest ``graph_execution`` artifact that holds an order.

    tlparse took the highest-numbered artifact whose name contains ``graph_execution``, which
    can be ``inductor_graph_execution`` (a different payload), and then dropped the rank.
    """
    candidates = [
        (artifact, unit)
        for unit in trace.units.values()
        for artifact in unit.artifacts
        if EXECUTION_ARTIFACT in artifact.name
        and artifact.path
        and artifact.path.endswith(".json")
        and artifact.payload is not None
    ]
    candidates.sort(key=lambda pair: pair[0].number, reverse=True)
    for artifact, unit in candidates:
        value, _error = _json(trace, artifact)
        order = value.get("graph_execution_order") if isinstance(value, dict) else None
        if not isinstance(order, list):
            continue
        ids: list[str] = []
        for item in order:
            text = item.get("compile_id") if isinstance(item, dict) else item
            if isinstance(text, str):
                ids.append(normalize_compile_id(text))
        summary.execution_order = ids
        summary.execution_artifact = (_folder(artifact, unit), artifact.number)
        return
    named = [a for a, _ in candidates if a.name == EXECUTION_ARTIFACT]
    if named:
        summary.problems.append(
            f"{named[0].filename}: no readable 'graph_execution_order' list; "
            "execution order unavailable for this rank"
        )


def normalize_compile_id(text: str) -> str:
    """``"0/1"`` → ``"[0/1]"``, the compile_directory key the id's artifacts are under."""
    parsed = parse_compile_id_string(text)
    if parsed is None:
        return text if text.startswith("[") else f"[{text}]"
    return parsed.directory_key().display


# -- loading all ranks --------------------------------------------------------------------------
@dataclass
class RankSet:
    """The summaries of every rank, sorted by rank, and the folder holding their spill files.

    Close it (or use it as a context manager) to remove a folder that ``load_ranks`` created.
    """

    ranks: list[RankSummary]
    workdir: Path
    owned: bool = False
    ignored: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[RankSummary]:
        return iter(self.ranks)

    def __len__(self) -> int:
        return len(self.ranks)

    def __getitem__(self, index: int) -> RankSummary:
        return self.ranks[index]

    def close(self) -> None:
        if self.owned:
            remove_scratch(self.workdir)

    def __enter__(self) -> RankSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class _Task:
    rank: int
    source: LogSource
    workdir: str
    export_mode: bool | None
    hook: RankHook | None


_RUN_TASK = "tlsite.core.multirank:_run_task"


def _run_task(task: _Task) -> RankSummary:
    """Worker entry point: read one rank, summarise it, close the model."""
    try:
        trace = load_source(task.source, export_mode=task.export_mode)
    except Exception as exc:  # one unreadable rank must not stop the others
        return RankSummary(rank=task.rank, source=task.source.display_name, error=str(exc))
    try:
        summary = summarize_trace(trace, task.rank, task.workdir)
        summary.source = task.source.display_name
        if task.hook is not None:
            summary.extra = task.hook(trace, summary, task.source)
        return summary
    finally:
        trace.close()


def empty_rank_logs(resolved: ResolvedInput) -> dict[int, str]:
    """Rank logs the resolver skipped for being empty: rank → name.

    An empty rank log is evidence (the rank logged nothing: it crashed or never compiled), so
    the multi-rank report shows it as a rank rather than dropping it.
    """
    found: dict[int, str] = {}
    for entry in resolved.ignored:
        name, sep, reason = entry.rpartition(": ")
        if not sep or reason != "empty":
            continue
        rank = _rank_of(PurePosixPath(name.replace("\\", "/")).name)
        if rank is not None:
            found.setdefault(rank, name)
    return found


def _numbered_logs(resolved: ResolvedInput) -> list[tuple[int, LogSource]]:
    """Each log with its rank (its position when the name gives none)."""
    return [
        (log.rank if log.rank is not None else index, log)
        for index, log in enumerate(resolved.logs)
    ]


def job_ranks(resolved: ResolvedInput) -> list[int]:
    """The ranks :func:`load_ranks` reports on: every log's, and the empty rank logs'."""
    ranks = {rank for rank, _ in _numbered_logs(resolved)}
    return sorted(ranks | set(empty_rank_logs(resolved)))


def default_jobs() -> int:
    return os.cpu_count() or 1


def rank_pool(jobs: int | None) -> TaskPool:
    """The processes that read and build a job's ranks: ``jobs`` of them (default: one per
    core), this one among them, which saves starting one helper (an interpreter and its
    imports)."""
    return TaskPool(jobs or default_jobs(), here=True)


#: What a job's rank helpers import as soon as they start: the tasks' modules (reading and
#: building a rank: MkDocs, the theme, the pages).
RANK_MODULES = ("tlsite.core.multirank", "tlsite.mkdocs_plugin.multirank_build")


def early_rank_pool(path: str | os.PathLike[str], jobs: int | None) -> TaskPool | None:
    """:func:`rank_pool` with its helpers started now, when ``path`` is a folder holding two
    or more ranks' logs (the resolver decides later whether it is a job); else
    None. The build process then imports MkDocs while the helpers import it too."""
    pool = rank_pool(jobs)
    if pool.processes < 2:
        return None
    try:
        names = os.listdir(path)
    except OSError:  # not a folder: an archive or a log, read as usual
        return None
    ranks = len({_rank_of(name) for name in names} - {None})
    if ranks < 2:  # one rank's logs are not a job (the resolver says which to pick)
        return None
    pool.start(ranks, preload=RANK_MODULES)  # no more helpers than the ranks would start
    return pool


def load_ranks(
    resolved: ResolvedInput,
    *,
    jobs: int | None = None,
    workdir: str | os.PathLike[str] | None = None,
    export_mode: bool | None = None,
    per_rank: RankHook | None = None,
    on_rank: Callable[[RankSummary], None] | None = None,
    pool: TaskPool | None = None,
) -> RankSet:
    """Summarise every log of ``resolved`` (all ranks of a job), ``jobs`` at a time.

    ``workdir`` receives the spill files (a temporary folder by default, removed by
    ``RankSet.close()``). ``per_rank(trace, summary, source)`` runs in the worker while the rank's
    model is open (to write that rank's own report, say) and its picklable return value is
    kept in ``summary.extra``; it must be a module-level function (or a partial of one).
    ``on_rank(summary)`` is called in this process as each rank finishes (for progress).
    Empty rank logs, which the resolver skips, are included as ranks with ``empty=True``.
    ``pool`` runs the ranks (the caller's, to run more work in its helpers afterwards); by
    default one of ``jobs`` processes, this one among them.
    """
    owned = workdir is None
    work = make_scratch("ranks") if owned else Path(workdir)  # type: ignore[arg-type]
    work.mkdir(parents=True, exist_ok=True)
    tasks = [
        _Task(rank, log.portable(), str(work), export_mode, per_rank)
        for rank, log in _numbered_logs(resolved)
    ]
    summaries: list[RankSummary] = []
    known = {task.rank for task in tasks}
    empties = {r: name for r, name in empty_rank_logs(resolved).items() if r not in known}
    for rank, name in sorted(empties.items()):
        summaries.append(RankSummary(rank=rank, source=name, empty=True))
        if on_rank is not None:
            on_rank(summaries[-1])
    own_pool = pool is None
    if pool is None:
        pool = rank_pool(jobs)
    try:
        for summary in pool.run(_RUN_TASK, tasks):
            summaries.append(summary)
            if on_rank is not None:
                on_rank(summary)
    except BaseException:
        if owned:
            remove_scratch(work)
        raise
    finally:
        if own_pool:
            pool.close()
    summaries.sort(key=lambda s: s.rank)
    taken = {f"{name}: empty" for name in empties.values()}
    ignored = [entry for entry in resolved.ignored if entry not in taken]
    return RankSet(summaries, work, owned, ignored)

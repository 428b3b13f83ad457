"""Did the ranks do the same thing? The cross-rank analyses of a distributed job.

Each analysis compares the ranks' summaries (see :mod:`tlsite.core.multirank`), groups the
ranks that agree (largest group first, then by lowest rank, so the output is deterministic)
and, when they disagree, names the compile ids where they differ and which ranks have what.
Everything is matched **by compile id**: tlparse compared runtime estimates by position in
directory-listing order, fingerprinted tensor metadata together with the runtime estimates,
and printed groups in hash-map order.

Pure functions of the summaries; rendering is in :mod:`tlsite.core.render.landing`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..compile_id import parse_compile_id_string
from ..multirank import CacheEvent, ParityFinding, RankSummary, UnitSummary
from .collectives import short_op

Ranks = tuple[int, ...]

SCHEDULE_MISMATCH = "schedule_mismatch"
CACHE_MISMATCH = "cache_mismatch"

#: Execution-order steps kept for display (the counts cover all of them).
MAX_ORDER_ROWS = 50
#: Compile ids shown in the compile-time spread table.
TOP_COMPILE_SPREAD = 5


# -- grouping -----------------------------------------------------------------------------------
def group_ranks(signatures: Mapping[int, Hashable]) -> list[tuple[Ranks, Any]]:
    """Ranks with equal signatures, as ``(ranks, signature)``: largest group first, then by
    lowest rank; ranks ascending inside each group."""
    buckets: dict[Hashable, list[int]] = {}
    for rank in sorted(signatures):
        buckets.setdefault(signatures[rank], []).append(rank)
    groups = [(tuple(ranks), signature) for signature, ranks in buckets.items()]
    return sorted(groups, key=lambda group: (-len(group[0]), group[0][0]))


def format_ranks(ranks: Iterable[int]) -> str:
    """``0, 2`` as tlparse writes groups; runs of three or more are shortened: ``0–4, 6``."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        if end - start >= 2:
            parts.append(f"{ordered[start]}–{ordered[end]}")
        else:
            parts.extend(str(r) for r in ordered[start : end + 1])
        start = end + 1
    return ", ".join(parts)


def ranks_phrase(ranks: Iterable[int]) -> str:
    """``rank 3`` or ``ranks 0, 2`` for running text."""
    ordered = sorted(set(ranks))
    return f"rank {ordered[0]}" if len(ordered) == 1 else f"ranks {format_ranks(ordered)}"


def compile_id_sort_key(key: str) -> tuple[int, ...]:
    """Order compile ids numerically (``[0/2]`` before ``[0/10]``); ``unknown`` last."""
    parsed = parse_compile_id_string(key)
    if parsed is None:
        return (1 << 30,)
    return tuple(-1 if v is None else v for v in parsed.fields())


# -- the common shape of an answer --------------------------------------------------------------
@dataclass(frozen=True)
class Evidence:
    """Where to look: a rank's compile-id page, at an artifact when there is one."""

    rank: int
    dirname: str
    artifact: int | None = None

    @property
    def href(self) -> str:
        """Docs-relative link (rank pages live at ``rank_<N>/<dirname>/index.md``)."""
        anchor = f"#artifact-{self.artifact}" if self.artifact is not None else ""
        return f"rank_{self.rank}/{self.dirname}/index.md{anchor}"


@dataclass
class Variant:
    """What one group of ranks has for one compile id."""

    ranks: Ranks
    label: str
    evidence: Evidence | None = None


@dataclass
class Difference:
    """A compile id the ranks disagree on, with each group's version of it."""

    key: str
    variants: list[Variant]


@dataclass
class Comparison:
    """One "did the ranks do the same thing?" question, answered by compile id."""

    ranks: Ranks  # the ranks compared
    groups: list[Ranks]  # ranks with identical whole-run signatures, largest group first
    differences: list[Difference] = field(default_factory=list)  # in compile-id order

    @property
    def divergent(self) -> bool:
        return len(self.groups) > 1

    @property
    def outliers(self) -> Ranks:
        """Ranks outside the largest group."""
        return tuple(sorted(r for group in self.groups[1:] for r in group))


Describe = Callable[[str, list[tuple[Ranks, Any, UnitSummary | None]]], list[Variant]]


def compare_by_compile_id(
    ranks: Sequence[RankSummary],
    value: Callable[[UnitSummary], Hashable | None],
    describe: Describe,
) -> Comparison:
    """Group ranks by ``value`` over all their compile ids; list the ids where ranks differ.

    ``value(unit)`` is what is compared (None: the rank has nothing to compare for that id);
    ``describe(key, [(ranks, value, a unit of the first rank)])`` words each group's version.
    """
    per_rank: dict[int, dict[str, UnitSummary]] = {}
    signatures: dict[int, tuple[tuple[str, Hashable], ...]] = {}
    for summary in ranks:
        units = {u.key: u for u in summary.units if value(u) is not None}
        per_rank[summary.rank] = units
        ordered = sorted(units, key=compile_id_sort_key)
        signatures[summary.rank] = tuple((key, value(units[key])) for key in ordered)
    groups = group_ranks(signatures)
    comparison = Comparison(tuple(sorted(per_rank)), [g for g, _ in groups])
    if not comparison.divergent:
        return comparison
    keys = sorted({k for units in per_rank.values() for k in units}, key=compile_id_sort_key)
    for key in keys:
        values = {
            rank: (value(units[key]) if key in units else None) for rank, units in per_rank.items()
        }
        if len(set(values.values())) < 2:
            continue
        variants = [
            (group, signature, per_rank[group[0]].get(key))
            for group, signature in group_ranks(values)
        ]
        comparison.differences.append(Difference(key, describe(key, variants)))
    return comparison


# -- 1. compile ids -----------------------------------------------------------------------------
def _compiled(unit: UnitSummary) -> str:
    """ "compiled", with the guard that failed when it was a recompile: a rank that compiled
    what the others did not usually saw other inputs, and the guard names which."""
    reason = unit.recompile_reason
    return f"compiled (recompiled: {reason})" if reason else "compiled"


def compare_compile_ids(ranks: Sequence[RankSummary]) -> Comparison:
    """Which ranks compiled which compile ids (``[-/-]`` and ``unknown`` are not compiles)."""

    def describe(key: str, variants: list[tuple[Ranks, Any, UnitSummary | None]]) -> list[Variant]:
        return [
            Variant(group, _compiled(unit), Evidence(group[0], unit.dirname))
            if present and unit is not None
            else Variant(group, "not compiled")
            for group, present, unit in variants
        ]

    return compare_by_compile_id(ranks, lambda u: True if u.is_compile else None, describe)


# -- 2. cache hit/miss ----------------------------------------------------------------------------
def _first_difference(sequences: Sequence[Sequence[Any]]) -> int:
    """The first position where the sequences do not all agree (a missing item counts)."""
    longest = max((len(s) for s in sequences), default=0)
    for index in range(longest):
        items = {s[index] if index < len(s) else None for s in sequences}
        if len(items) > 1:
            return index
    return longest


def compare_cache(ranks: Sequence[RankSummary]) -> Comparison:
    """Cache hit/miss/bypass sequence of every compile id, compared across ranks."""

    def value(unit: UnitSummary) -> Hashable | None:
        return tuple((e.status, e.name) for e in unit.cache) or None

    def describe(key: str, variants: list[tuple[Ranks, Any, UnitSummary | None]]) -> list[Variant]:
        at = _first_difference([v or () for _, v, _ in variants])
        result = []
        for group, _, unit in variants:
            if unit is None or not unit.cache:
                result.append(Variant(group, "no cache lookups"))
                continue
            if at < len(unit.cache):
                event = unit.cache[at]
                label = f"{unit.cache_sequence} (lookup {at + 1}: {event.name})"
                evidence = Evidence(group[0], unit.dirname, event.number)
            else:
                label = f"{unit.cache_sequence} (no lookup {at + 1})"
                evidence = Evidence(group[0], unit.dirname, unit.cache[-1].number)
            result.append(Variant(group, label, evidence))
        return result

    return compare_by_compile_id(ranks, value, describe)


# -- 3. collective schedules ----------------------------------------------------------------------
SHOWN_OPS = 8


def ops_text(ops: Sequence[str], start: int = 0) -> str:
    """A schedule for display: short op names from ``start``, at most SHOWN_OPS of them."""
    shown = [short_op(op) for op in ops[start : start + SHOWN_OPS]]
    text = ", ".join(shown)
    if start:
        text = "…, " + text
    if start + SHOWN_OPS < len(ops):
        text += ", …"
    return text


def compare_collectives(ranks: Sequence[RankSummary]) -> Comparison:
    """The collective schedule Inductor planned for each compile id, compared across ranks."""

    def describe(key: str, variants: list[tuple[Ranks, Any, UnitSummary | None]]) -> list[Variant]:
        at = _first_difference([v or () for _, v, _ in variants])
        result = []
        for group, ops, unit in variants:
            if not ops or unit is None:
                result.append(Variant(group, "no collectives scheduled"))
                continue
            start = max(0, at - 1)
            label = f"{len(ops)} ops, from op {start + 1}: {ops_text(ops, start)}"
            evidence = Evidence(group[0], unit.dirname, unit.schedule_artifact)
            result.append(Variant(group, label, evidence))
        return result

    return compare_by_compile_id(ranks, lambda u: u.schedule, describe)


# -- 4. tensor metadata ---------------------------------------------------------------------------
def compare_tensor_meta(ranks: Sequence[RankSummary]) -> Comparison:
    """Inductor's tensor metadata (shapes, dtypes, strides) per compile id, runtimes excluded."""

    def describe(key: str, variants: list[tuple[Ranks, Any, UnitSummary | None]]) -> list[Variant]:
        result = []
        for index, (group, fingerprint, unit) in enumerate(variants):
            if fingerprint is None or unit is None:
                result.append(Variant(group, "no tensor metadata logged"))
                continue
            label = f"version {chr(ord('A') + index) if index < 26 else index + 1}"
            evidence = Evidence(group[0], unit.dirname, unit.tensor_meta_artifact)
            result.append(Variant(group, f"{label} (fingerprint {fingerprint[:10]})", evidence))
        return result

    return compare_by_compile_id(ranks, lambda u: u.tensor_meta, describe)


# -- 5. collectives parity (scheduler vs output code) ---------------------------------------------
@dataclass
class ParityGroup:
    """Ranks whose graphs show the same scheduler/code mismatches (none, for a clean group)."""

    ranks: Ranks
    findings: tuple[ParityFinding, ...]


@dataclass
class ParityAnalysis:
    checked: int  # graphs (over all ranks) that logged both a schedule and output code
    groups: list[ParityGroup]

    @property
    def ranks_with_findings(self) -> Ranks:
        return tuple(sorted(r for g in self.groups if g.findings for r in g.ranks))


def analyse_parity(ranks: Sequence[RankSummary]) -> ParityAnalysis:
    signatures = {
        r.rank: tuple(sorted(r.parity, key=lambda f: compile_id_sort_key(f.compile_id)))
        for r in ranks
    }
    keyed = {
        rank: tuple((f.compile_id, f.offset, f.missing_waits) for f in findings)
        for rank, findings in signatures.items()
    }
    groups = [ParityGroup(group, signatures[group[0]]) for group, _ in group_ranks(keyed)]
    return ParityAnalysis(sum(r.parity_checked for r in ranks), groups)


# -- 6. runtime estimates -------------------------------------------------------------------------
@dataclass(frozen=True)
class RuntimeRow:
    """The spread of one compile id's estimated runtime over the ranks that estimated it."""

    key: str
    ranks: int
    fastest_rank: int
    fastest_ns: float
    slowest_rank: int
    slowest_ns: float
    evidence: Evidence | None = None  # the slowest rank's estimate

    @property
    def fastest_ms(self) -> float:
        return round(self.fastest_ns / 1e6, 3)

    @property
    def slowest_ms(self) -> float:
        return round(self.slowest_ns / 1e6, 3)

    @property
    def delta_ms(self) -> float:
        return round((self.slowest_ns - self.fastest_ns) / 1e6, 3)

    @property
    def all_equal(self) -> bool:
        return self.slowest_ns == self.fastest_ns


def runtime_spread(totals: Mapping[int, Mapping[str, float]]) -> list[RuntimeRow]:
    """Per compile id estimated on two ranks or more: the fastest and slowest rank.

    Matched by compile id, not by position; ties go to the lowest rank on both sides, so an
    all-equal row names one rank twice only when every rank has the same estimate.
    """
    by_key: dict[str, list[tuple[int, float]]] = {}
    for rank in sorted(totals):
        for key, ns in totals[rank].items():
            by_key.setdefault(key, []).append((rank, ns))
    rows = []
    for key in sorted(by_key, key=compile_id_sort_key):
        entries = by_key[key]
        if len(entries) < 2:
            continue
        fastest = min(entries, key=lambda e: (e[1], e[0]))
        slowest = max(entries, key=lambda e: (e[1], -e[0]))
        rows.append(RuntimeRow(key, len(entries), fastest[0], fastest[1], slowest[0], slowest[1]))
    return rows


@dataclass
class RuntimeAnalysis:
    estimated: Ranks  # ranks that logged any runtime estimate
    coverage: Comparison  # which compile ids each rank estimated
    rows: list[RuntimeRow]

    @property
    def available(self) -> bool:
        return bool(self.estimated)

    @property
    def complete(self) -> bool:
        """Every rank estimated the same compile ids (tlparse's precondition for any row)."""
        return self.available and not self.coverage.divergent

    @property
    def largest(self) -> list[RuntimeRow]:
        return sorted(self.rows, key=lambda r: (-r.delta_ms, compile_id_sort_key(r.key)))


def analyse_runtime(ranks: Sequence[RankSummary]) -> RuntimeAnalysis:
    def describe(key: str, variants: list[tuple[Ranks, Any, UnitSummary | None]]) -> list[Variant]:
        return [
            Variant(group, "estimated", Evidence(group[0], unit.dirname, unit.runtime_artifact))
            if present and unit is not None
            else Variant(group, "no estimate")
            for group, present, unit in variants
        ]

    estimated = tuple(r.rank for r in ranks if r.runtime_graphs)
    considered = ranks if estimated else []
    coverage = compare_by_compile_id(
        considered, lambda u: True if u.runtime_ns is not None else None, describe
    )
    totals = {
        r.rank: {u.key: u.runtime_ns for u in r.units if u.runtime_ns is not None} for r in ranks
    }
    units = {(r.rank, u.key): u for r in ranks for u in r.units if u.runtime_ns is not None}
    rows = []
    for row in runtime_spread(totals):  # type: ignore[arg-type]
        unit = units[(row.slowest_rank, row.key)]
        evidence = Evidence(row.slowest_rank, unit.dirname, unit.runtime_artifact)
        rows.append(
            RuntimeRow(
                row.key,
                row.ranks,
                row.fastest_rank,
                row.fastest_ns,
                row.slowest_rank,
                row.slowest_ns,
                evidence,
            )
        )
    return RuntimeAnalysis(estimated, coverage, rows)


# -- 7. graph execution order ---------------------------------------------------------------------
@dataclass(frozen=True)
class ExecOrderRow:
    """One step of the execution orders, lined up by index across ranks."""

    index: int
    by_rank: Mapping[int, str]  # rank → compile id run at this step
    issues: frozenset[str]  # SCHEDULE_MISMATCH, CACHE_MISMATCH

    @property
    def order_differs(self) -> bool:
        return len(set(self.by_rank.values())) > 1

    def groups(self) -> list[tuple[Ranks, str]]:
        return group_ranks(self.by_rank)


def analyze_execution_order(
    orders: Mapping[int, Sequence[str]],
    schedules: Mapping[tuple[int, str], Sequence[str]],
    cache: Mapping[tuple[int, str], str],
) -> list[ExecOrderRow]:
    """Line the ranks' execution orders up by index and flag each step (tlparse's rules).

    At a step, the ranks that have an entry are compared: a *schedule mismatch* when two or
    more of them have a known collective schedule for the compile id they run and those
    schedules differ; a *cache mismatch* likewise with the compile ids' cache statuses. Two
    ranks running different graphs with different collectives at the same step can hang.
    """
    steps = max((len(order) for order in orders.values()), default=0)
    rows = []
    for index in range(steps):
        by_rank = {
            rank: order[index] for rank, order in sorted(orders.items()) if index < len(order)
        }
        if not by_rank:
            continue
        issues = set()
        known = [tuple(schedules[(r, c)]) for r, c in by_rank.items() if (r, c) in schedules]
        if len(known) >= 2 and len(set(known)) > 1:
            issues.add(SCHEDULE_MISMATCH)
        statuses = [cache[(r, c)] for r, c in by_rank.items() if cache.get((r, c))]
        if len(statuses) >= 2 and len(set(statuses)) > 1:
            issues.add(CACHE_MISMATCH)
        rows.append(ExecOrderRow(index, by_rank, frozenset(issues)))
    return rows


@dataclass
class ExecOrderAnalysis:
    ranks: Ranks  # ranks with a usable execution order
    missing: Ranks  # ranks without one
    steps: int = 0
    order_differs: bool = False
    schedule_mismatch_ranks: Ranks = ()
    cache_mismatch_ranks: Ranks = ()
    flagged: list[ExecOrderRow] = field(default_factory=list)  # first MAX_ORDER_ROWS shown
    flagged_total: int = 0
    mismatched: list[ExecOrderRow] = field(default_factory=list)  # the flagged with issues
    mismatched_total: int = 0
    evidence: dict[int, Evidence] = field(default_factory=dict)  # rank → its order artifact

    @property
    def available(self) -> bool:
        return len(self.ranks) >= 2


def analyse_execution_order(ranks: Sequence[RankSummary]) -> ExecOrderAnalysis:
    with_order = [r for r in ranks if r.execution_order is not None]
    analysis = ExecOrderAnalysis(
        ranks=tuple(r.rank for r in with_order),
        missing=tuple(r.rank for r in ranks if r.execution_order is None),
        evidence={
            r.rank: Evidence(r.rank, r.execution_artifact[0], r.execution_artifact[1])
            for r in with_order
            if r.execution_artifact is not None
        },
    )
    if not analysis.available:
        return analysis
    orders = {r.rank: r.execution_order or [] for r in with_order}
    schedules = {(r.rank, u.key): u.schedule for r in with_order for u in r.units if u.schedule}
    cache = {(r.rank, u.key): u.cache_status for r in with_order for u in r.units if u.cache_status}
    rows = analyze_execution_order(orders, schedules, cache)  # type: ignore[arg-type]
    schedule_ranks: set[int] = set()
    cache_ranks: set[int] = set()
    for row in rows:
        if row.order_differs:
            analysis.order_differs = True
        if SCHEDULE_MISMATCH in row.issues:
            schedule_ranks.update(row.by_rank)
        if CACHE_MISMATCH in row.issues:
            cache_ranks.update(row.by_rank)
        if row.order_differs or row.issues:
            analysis.flagged_total += 1
            if len(analysis.flagged) < MAX_ORDER_ROWS:
                analysis.flagged.append(row)
        if row.issues:
            analysis.mismatched_total += 1
            if len(analysis.mismatched) < MAX_ORDER_ROWS:
                analysis.mismatched.append(row)
    analysis.steps = len(rows)
    analysis.schedule_mismatch_ranks = tuple(sorted(schedule_ranks))
    analysis.cache_mismatch_ranks = tuple(sorted(cache_ranks))
    return analysis


# -- 8. compile time per rank ---------------------------------------------------------------------
@dataclass(frozen=True)
class CompileSpread:
    """A compile id whose compile time differs most between ranks."""

    key: str
    fastest_rank: int
    fastest_s: float
    slowest_rank: int
    slowest_s: float
    evidence: Evidence

    @property
    def spread_s(self) -> float:
        return self.slowest_s - self.fastest_s


@dataclass
class CompileTimeAnalysis:
    per_rank: list[tuple[int, float]]  # (rank, total compile seconds), by rank
    top: list[CompileSpread]  # compile ids with the widest spread, widest first

    @property
    def slowest(self) -> tuple[int, float] | None:
        return max(self.per_rank, key=lambda e: (e[1], -e[0]), default=None)

    @property
    def slowest_ranks(self) -> Ranks:
        """Every rank tied for the longest total."""
        slow = self.slowest
        return tuple(r for r, s in self.per_rank if slow is not None and s == slow[1])

    @property
    def fastest(self) -> tuple[int, float] | None:
        return min(self.per_rank, key=lambda e: (e[1], e[0]), default=None)

    @property
    def median(self) -> float:
        return statistics.median(s for _, s in self.per_rank) if self.per_rank else 0.0

    @property
    def skew_s(self) -> float:
        """Longest minus shortest total compile time: how long the others may wait."""
        if not self.per_rank:
            return 0.0
        return self.slowest[1] - self.fastest[1]  # type: ignore[index]

    @property
    def notable(self) -> bool:
        """A skew worth a warning: over a second and over a quarter of the median."""
        return len(self.per_rank) > 1 and self.skew_s > max(1.0, 0.25 * self.median)


def analyse_compile_time(ranks: Sequence[RankSummary]) -> CompileTimeAnalysis:
    per_rank = [(r.rank, r.compile_seconds) for r in ranks]
    by_key: dict[str, list[tuple[int, float, str]]] = {}
    for r in ranks:
        for u in r.units:
            if u.compile_seconds is not None:
                by_key.setdefault(u.key, []).append((r.rank, u.compile_seconds, u.dirname))
    spreads = []
    for key, entries in by_key.items():
        if len(entries) < 2:
            continue
        fast = min(entries, key=lambda e: (e[1], e[0]))
        slow = max(entries, key=lambda e: (e[1], -e[0]))
        if slow[1] > fast[1]:
            evidence = Evidence(slow[0], slow[2])
            spreads.append(CompileSpread(key, fast[0], fast[1], slow[0], slow[1], evidence))
    spreads.sort(key=lambda s: (-s.spread_s, compile_id_sort_key(s.key)))
    return CompileTimeAnalysis(per_rank, spreads[:TOP_COMPILE_SPREAD])


# -- the whole report ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Phrase:
    """A piece of a sentence: text, linked to its evidence when there is some."""

    text: str
    evidence: Evidence | None = None


Sentence = tuple[Phrase, ...]


@dataclass
class Divergence:
    """One line of the landing page's warning box."""

    anchor: str  # the section that has the evidence
    message: str  # starts with tlparse's wording where tlparse had one
    groups_title: str | None = None
    groups: list[Ranks] = field(default_factory=list)
    details: list[Sentence] = field(default_factory=list)  # what differs, in words (capped)
    more: int = 0  # sentences left out of ``details``


@dataclass
class MultiRankReport:
    """Everything the landing page shows, computed once from the rank summaries."""

    ranks: list[RankSummary]
    compile_ids: Comparison
    cache: Comparison
    collectives: Comparison
    tensor_meta: Comparison
    parity: ParityAnalysis
    runtime: RuntimeAnalysis
    exec_order: ExecOrderAnalysis
    compile_time: CompileTimeAnalysis
    chromium_events: int
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def unreadable(self) -> list[RankSummary]:
        return [r for r in self.ranks if not r.ok]

    @property
    def empty(self) -> list[RankSummary]:
        return [r for r in self.ranks if r.empty]

    @property
    def problems(self) -> list[tuple[int, str]]:
        return [(r.rank, p) for r in self.ranks for p in r.problems]


# -- what differs, in words ------------------------------------------------------------------
#: Sentences under one warning, and compile ids named in one sentence: the warning box says
#: what differs at a glance, the sections below list everything.
MAX_DETAILS = 4
MAX_IDS = 6

UnitMaps = Mapping[int, Mapping[str, UnitSummary]]

_CACHE_VERBS = {"miss": "missed", "hit": "hit", "bypass": "bypassed"}


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _capped(sentences: list[Sentence], total: int | None = None) -> tuple[list[Sentence], int]:
    total = len(sentences) if total is None else total
    return sentences[:MAX_DETAILS], max(0, total - MAX_DETAILS)


def _id_list(ids: Sequence[tuple[str, Evidence | None]]) -> list[Phrase]:
    """``[0/1], [0/2] and 3 more``, each id linked to its evidence."""
    phrases: list[Phrase] = []
    for index, (key, evidence) in enumerate(ids[:MAX_IDS]):
        if index:
            phrases.append(Phrase(", "))
        phrases.append(Phrase(key, evidence))
    if len(ids) > MAX_IDS:
        phrases.append(Phrase(f" and {len(ids) - MAX_IDS} more"))
    return phrases


def _capped_list(items: Sequence[str]) -> str:
    """``a; b; c and 2 more`` (at most ``MAX_DETAILS - 1`` items)."""
    shown = "; ".join(items[: MAX_DETAILS - 1])
    left = len(items) - (MAX_DETAILS - 1)
    return f"{shown} and {left} more" if left > 0 else shown


def _evidence(units: UnitMaps, rank: int, key: str, artifact: int | None = None) -> Evidence | None:
    unit = units.get(rank, {}).get(key)
    return Evidence(rank, unit.dirname, artifact) if unit is not None else None


def set_details(
    comparison: Comparison,
    units: UnitMaps,
    did: str,
    did_not: str,
    artifact: Callable[[UnitSummary], int | None] = lambda unit: None,
    reason: Callable[[UnitSummary], str | None] = lambda unit: None,
) -> tuple[list[Sentence], int]:
    """Which compile ids each group outside the largest has that the largest lacks, and the
    reverse (a variant with evidence *has* the id): "rank 1 compiled 2 compile ids that
    ranks 0, 2 did not: [3/0], [4/0]". Each id links to the rank the sentence names that has
    it (at ``artifact(unit)``). The extra ids' distinct ``reason(unit)`` follow ("; why: …"),
    so the warning says why those ranks did more, not only that they did."""

    def evidence(rank: int, key: str) -> Evidence | None:
        unit = units.get(rank, {}).get(key)
        return Evidence(rank, unit.dirname, artifact(unit)) if unit is not None else None

    if not comparison.divergent:
        return [], 0
    ref, others = comparison.groups[0], comparison.groups[1:]
    them = ranks_phrase(ref)
    extras: dict[Ranks, list[tuple[str, Evidence | None]]] = {g: [] for g in others}
    missings: dict[Ranks, list[tuple[str, Evidence | None]]] = {g: [] for g in others}
    for difference in comparison.differences:
        has = {r for v in difference.variants if v.evidence is not None for r in v.ranks}
        ref_has = ref[0] in has
        for group in others:
            if group[0] in has and not ref_has:
                extras[group].append((difference.key, evidence(group[0], difference.key)))
            elif ref_has and group[0] not in has:
                missings[group].append((difference.key, evidence(ref[0], difference.key)))
    sentences: list[Sentence] = []
    for group in others:
        extra, missing = extras[group], missings[group]
        who = ranks_phrase(group)
        if extra:
            lead = f"{who} {did} {_plural(len(extra), 'compile id')} that {them} did not: "
            mine = units.get(group[0], {})
            why = dict.fromkeys(
                text for key, _ in extra if key in mine and (text := reason(mine[key]))
            )
            tail = (Phrase("; why: " + _capped_list(list(why))),) if why else ()
            sentences.append((Phrase(lead), *_id_list(extra), *tail))
        if missing:
            lead = (
                f"{who} did not {did_not} {_plural(len(missing), 'compile id')} that {them} did: "
            )
            sentences.append((Phrase(lead), *_id_list(missing)))
    return _capped(sentences)


def _per_variant(
    comparison: Comparison, sentence: Callable[[str, Ranks, Ranks], Sentence]
) -> tuple[list[Sentence], int]:
    """One sentence per compile id and group that differs from the id's largest group."""
    sentences: list[Sentence] = []
    total = 0
    for difference in comparison.differences:
        ref = difference.variants[0].ranks
        for variant in difference.variants[1:]:
            total += 1
            if len(sentences) < MAX_DETAILS:
                sentences.append(sentence(difference.key, variant.ranks, ref))
    return _capped(sentences, total)


def cache_details(comparison: Comparison, units: UnitMaps) -> tuple[list[Sentence], int]:
    """Per compile id, the first lookup that differs: *rank 0 missed fx_graph_cache (lookup 1)
    for [1/0] where ranks 1–3 hit*."""

    def lookup(events: Sequence[CacheEvent], at: int) -> tuple[str, CacheEvent | None]:
        if at < len(events):
            event = events[at]
            return f"{_CACHE_VERBS[event.status]} {_cache_name(event.name)}", event
        if not events:
            return "made no cache lookup", None
        return f"made only {_plural(len(events), 'cache lookup')}", events[-1]

    def sentence(key: str, who: Ranks, ref: Ranks) -> Sentence:
        mine, theirs = units[who[0]].get(key), units[ref[0]].get(key)
        events = mine.cache if mine else ()
        ref_events = theirs.cache if theirs else ()
        at = _first_difference([[(e.status, e.name) for e in seq] for seq in (events, ref_events)])
        text, event = lookup(events, at)
        ref_text, ref_event = lookup(ref_events, at)
        if at < len(events):
            text += f" (lookup {at + 1})"
            same_cache = at < len(ref_events) and _cache_name(events[at].name) == _cache_name(
                ref_events[at].name
            )
            if same_cache:
                ref_text = _CACHE_VERBS[ref_events[at].status]  # "where rank 1 hit"
        return (
            Phrase(f"{ranks_phrase(who)} {text} for "),
            Phrase(key, _evidence(units, who[0], key, event.number if event else None)),
            Phrase(f" where {ranks_phrase(ref)} "),
            Phrase(
                ref_text, _evidence(units, ref[0], key, ref_event.number if ref_event else None)
            ),
        )

    return _per_variant(comparison, sentence)


def _cache_name(artifact_name: str) -> str:
    """``fx_graph_cache_miss`` → ``fx_graph_cache``."""
    stem, _, status = artifact_name.rpartition("_")
    return stem if status in _CACHE_VERBS and stem else artifact_name


def collective_details(comparison: Comparison, units: UnitMaps) -> tuple[list[Sentence], int]:
    """The first collective that differs: *rank 1 scheduled all_gather_into_tensor as
    collective 5 of 12 for [0/0] where ranks 0, 2 scheduled all_reduce_*."""

    def scheduled(ops: Sequence[str] | None, at: int, *, short: bool = False) -> str:
        if not ops:
            return "scheduled no collectives"
        if at < len(ops):
            where = "" if short else f" as collective {at + 1} of {len(ops)}"
            return f"scheduled {short_op(ops[at])}{where}"
        return f"scheduled only {_plural(len(ops), 'collective')}"

    def sentence(key: str, who: Ranks, ref: Ranks) -> Sentence:
        mine, theirs = units[who[0]].get(key), units[ref[0]].get(key)
        ops = mine.schedule if mine else None
        ref_ops = theirs.schedule if theirs else None
        at = _first_difference([ops or (), ref_ops or ()])
        both = bool(ops and ref_ops and at < len(ops) and at < len(ref_ops))
        return (
            Phrase(f"{ranks_phrase(who)} {scheduled(ops, at)} for "),
            Phrase(key, _evidence(units, who[0], key, mine.schedule_artifact if mine else None)),
            Phrase(f" where {ranks_phrase(ref)} "),
            Phrase(
                scheduled(ref_ops, at, short=both),
                _evidence(units, ref[0], key, theirs.schedule_artifact if theirs else None),
            ),
        )

    return _per_variant(comparison, sentence)


def tensor_meta_details(comparison: Comparison, units: UnitMaps) -> tuple[list[Sentence], int]:
    """Only fingerprints are kept, so which ids differ: *rank 1's tensor metadata (shapes,
    dtypes or strides) for [0/0] differs from ranks 0, 2's*."""

    def sentence(key: str, who: Ranks, ref: Ranks) -> Sentence:
        mine, theirs = units[who[0]].get(key), units[ref[0]].get(key)
        ev = _evidence(units, who[0], key, mine.tensor_meta_artifact if mine else None)
        ref_ev = _evidence(units, ref[0], key, theirs.tensor_meta_artifact if theirs else None)
        who_text, ref_text = ranks_phrase(who), ranks_phrase(ref)
        if mine is None or mine.tensor_meta is None:
            return (
                Phrase(f"{who_text} logged no tensor metadata for {key} where {ref_text} "),
                Phrase("did", ref_ev),
            )
        if theirs is None or theirs.tensor_meta is None:
            return (
                Phrase(f"{who_text} logged tensor metadata for "),
                Phrase(key, ev),
                Phrase(f" where {ref_text} logged none"),
            )
        return (
            Phrase(f"{who_text}'s tensor metadata (shapes, dtypes or strides) for "),
            Phrase(key, ev),
            Phrase(" differs from "),
            Phrase(f"{ref_text}'s", ref_ev),
        )

    return _per_variant(comparison, sentence)


def parity_details(parity: ParityAnalysis) -> tuple[list[Sentence], int]:
    """Each graph's mismatch: *rank 1: [0/0] calls 3 collectives where the schedule has 2 (1
    missing or extra by kind), 1 collective never waited for (no wait_tensor)*."""
    sentences: list[Sentence] = []
    total = 0
    for group in parity.groups:
        for finding in group.findings:
            total += 1
            if len(sentences) >= MAX_DETAILS:
                continue
            evidence = Evidence(group.ranks[0], finding.graph, finding.artifact)
            what = []
            if finding.offset:
                what.append(
                    f"calls {_plural(finding.called, 'collective')} where the schedule has "
                    f"{finding.scheduled} ({finding.offset} missing or extra by kind)"
                )
            if finding.missing_waits:
                what.append(
                    f"{_plural(finding.missing_waits, 'collective')} never waited for "
                    "(no wait_tensor)"
                )
            sentences.append(
                (
                    Phrase(f"{ranks_phrase(group.ranks)}: "),
                    Phrase(finding.compile_id, evidence),
                    Phrase(" " + ", ".join(what)),
                )
            )
    return _capped(sentences, total)


def execution_order_details(
    analysis: ExecOrderAnalysis, units: UnitMaps
) -> tuple[list[Sentence], int]:
    """The flagged steps: *at step 3, rank 1 ran [2/0] where ranks 0, 2 ran [1/0] (different
    collective schedules)*."""
    sentences: list[Sentence] = []
    for row in analysis.mismatched[:MAX_DETAILS]:
        issue = " and ".join(
            text
            for name, text in (
                (SCHEDULE_MISMATCH, "different collective schedules"),
                (CACHE_MISMATCH, "different cache outcomes"),
            )
            if name in row.issues
        )
        groups = row.groups()
        ref, ref_key = groups[0]
        step = f"at step {row.index + 1}, "
        if len(groups) == 1:
            sentences.append(
                (
                    Phrase(f"{step}{ranks_phrase(ref)} ran "),
                    Phrase(ref_key, _evidence(units, ref[0], ref_key)),
                    Phrase(f" with {issue}"),
                )
            )
            continue
        who, key = groups[1]
        sentences.append(
            (
                Phrase(f"{step}{ranks_phrase(who)} ran "),
                Phrase(key, _evidence(units, who[0], key)),
                Phrase(f" where {ranks_phrase(ref)} ran "),
                Phrase(ref_key, _evidence(units, ref[0], ref_key)),
                Phrase(f" ({issue})"),
            )
        )
    return _capped(sentences, analysis.mismatched_total)


def compile_time_details(analysis: CompileTimeAnalysis) -> tuple[list[Sentence], int]:
    """The compile id behind the skew: *the widest gap for one compile id is [4/0]: rank 0
    took 15.72 s where rank 1 took 15.57 s*."""
    if not analysis.top:
        return [], 0
    top = analysis.top[0]
    return [
        (
            Phrase("the widest gap for one compile id is "),
            Phrase(top.key, top.evidence),
            Phrase(
                f": rank {top.slowest_rank} took {top.slowest_s:.2f} s where "
                f"rank {top.fastest_rank} took {top.fastest_s:.2f} s"
            ),
        )
    ], 0


def analyse(ranks: Sequence[RankSummary]) -> MultiRankReport:
    """Run every cross-rank analysis (ranks whose log could not be read are left out)."""
    readable = [r for r in sorted(ranks, key=lambda r: r.rank) if r.ok]
    report = MultiRankReport(
        ranks=sorted(ranks, key=lambda r: r.rank),
        compile_ids=compare_compile_ids(readable),
        cache=compare_cache(readable),
        collectives=compare_collectives(readable),
        tensor_meta=compare_tensor_meta(readable),
        parity=analyse_parity(readable),
        runtime=analyse_runtime(readable),
        exec_order=analyse_execution_order(readable),
        compile_time=analyse_compile_time(readable),
        chromium_events=sum(r.chromium_events for r in readable),
    )
    report.divergences = _divergences(report)
    return report


def _divergences(report: MultiRankReport) -> list[Divergence]:
    found = []
    units = {r.rank: r.unit_map() for r in report.ranks if r.ok}
    for summary in report.unreadable:
        found.append(
            Divergence("ranks", f"Rank {summary.rank}'s log could not be read: {summary.error}")
        )
    if report.empty:
        ranks = ranks_phrase(r.rank for r in report.empty)
        found.append(Divergence("ranks", f"Empty rank logs (nothing was logged) on {ranks}."))
    versions = group_ranks({r.rank: r.torch_version for r in report.ranks if r.torch_version})
    if len(versions) > 1:
        found.append(
            Divergence(
                "ranks",
                "The ranks ran different PyTorch versions: "
                + "; ".join(f"{v} on {ranks_phrase(g)}" for g, v in versions)
                + ".",
            )
        )
    if report.compile_ids.divergent:
        found.append(
            Divergence(
                "compile-ids",
                "Diverging Compilation IDs detected across ranks. This may lead to hangs or "
                "timeouts during distributed execution.",
                "Compilation ID groups:",
                report.compile_ids.groups,
                *set_details(
                    report.compile_ids,
                    units,
                    "compiled",
                    "compile",
                    reason=lambda unit: unit.recompile_reason,
                ),
            )
        )
    if report.cache.divergent:
        found.append(
            Divergence(
                "cache",
                "Diverging Cache hit/miss patterns detected across ranks.",
                "Cache hit/miss pattern groups:",
                report.cache.groups,
                *cache_details(report.cache, units),
            )
        )
    if report.collectives.divergent:
        found.append(
            Divergence(
                "collectives",
                "Diverging collective operation sequences detected across ranks. This can lead "
                "to hangs or timeouts during distributed execution.",
                "Collective operation sequence groups:",
                report.collectives.groups,
                *collective_details(report.collectives, units),
            )
        )
    if report.parity.ranks_with_findings:
        ranks = ranks_phrase(report.parity.ranks_with_findings)
        found.append(
            Divergence(
                "parity",
                f"Output code does not match the collective schedule on {ranks} "
                "(collectives missing, extra or never waited for).",
                None,
                [],
                *parity_details(report.parity),
            )
        )
    if report.tensor_meta.divergent:
        found.append(
            Divergence(
                "tensor-meta",
                "Diverging inductor tensor metadata detected across ranks.",
                "Tensor metadata groups:",
                report.tensor_meta.groups,
                *tensor_meta_details(report.tensor_meta, units),
            )
        )
    order = report.exec_order
    if order.available and (order.schedule_mismatch_ranks or order.cache_mismatch_ranks):
        found.append(
            Divergence(
                "execution-order",
                "At some steps of the graph execution order, ranks run graphs with different "
                "collective schedules or cache outcomes.",
                None,
                [],
                *execution_order_details(order, units),
            )
        )
    if report.runtime.available and not report.runtime.complete:
        found.append(
            Divergence(
                "runtime",
                "Ranks logged runtime estimates for different compile ids.",
                "Runtime estimate coverage groups:",
                report.runtime.coverage.groups,
                *set_details(
                    report.runtime.coverage,
                    units,
                    "estimated the runtime of",
                    "estimate",
                    lambda unit: unit.runtime_artifact,
                ),
            )
        )
    if report.compile_time.notable:
        slow = report.compile_time.slowest
        assert slow is not None
        who = ranks_phrase(report.compile_time.slowest_ranks)
        found.append(
            Divergence(
                "compile-time",
                f"{who[0].upper()}{who[1:]} compiled longest: {slow[1]:.1f} s, "
                f"{report.compile_time.skew_s:.1f} s more than the fastest rank "
                f"(median {report.compile_time.median:.1f} s).",
                None,
                [],
                *compile_time_details(report.compile_time),
            )
        )
    return found

"""Symbolic shapes per compile, grouped by symbol.

A ``create_symbol`` record says where a symbol came from (``s77 = L['x'].size()[0]``), its
value when it was created and its value range; the guards, specializations and real-tensor
checks that name the symbol belong under it. Symbols are per compile (each has its own shape
environment), so ``s77`` of one compile is not ``s77`` of another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..frames import user_frame
from ..handlers import SYMBOLIC_TYPES
from ..model import CompileUnit, Event

#: Records that create a symbol.
CREATE_TYPES = ("create_symbol", "create_unbacked_symbol")
#: How each record type is named on the page.
_KINDS = {
    "guard_added": "guard",
    "guard_added_fast": "guard",
    "symbolic_shape_specialization": "specialization",
    "expression_created": "expression",
    "propagate_real_tensors": "real-tensor check",
    "propagate_real_tensors_provenance": "data-dependent guard",
    "guard_on_data_dependent_error": "data-dependent guard",
}
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


@dataclass
class Site:
    """The user line behind a record: ``file.py:19`` and its source text, when logged."""

    location: str = ""  # "file.py:19", "" when the record has no user frame
    where: str = ""  # "/full/path/file.py:19 in fn", for a tooltip
    code: str = ""  # the source line


@dataclass
class Constraint:
    """A guard, specialization or real-tensor check on one or more symbols."""

    type: str
    kind: str  # what the record is, in words: "guard", "specialization", ...
    expr: str
    outcome: str  # "(range_refined_to_singleton)", "→ False", "(by neg)", ""
    site: Site
    line: int  # the record's line in the trace


@dataclass
class Symbol:
    """One symbol of one compile."""

    name: str
    source: str  # "L['x'].size()[0]", "" for unbacked symbols
    value: str  # the hint when created, "" for unbacked symbols
    range: str  # "[2, int_oo]"
    unbacked: bool
    site: Site
    constraints: list[Constraint] = field(default_factory=list)
    created: bool = True  # False: known only from a guard's ``symbol_to_sources``


@dataclass
class UnitSymbols:
    """A compile's symbols, and the symbolic records that name none of them."""

    unit: CompileUnit
    symbols: list[Symbol]
    other: list[Constraint]  # constraints on symbols not created in the trace, expressions


def unit_symbols(unit: CompileUnit) -> UnitSymbols | None:
    """The symbols of ``unit`` and what constrains them, or None if it logged none."""
    events = [(e, e.meta) for e in unit.events if e.type in SYMBOLIC_TYPES]
    if not events:
        return None
    created: list[Symbol] = []
    for event, meta in events:
        name = str(meta.get("symbol", ""))
        if event.type in CREATE_TYPES and name:
            created.append(
                Symbol(
                    name=name,
                    source=_text(meta.get("source")),
                    value=_text(meta.get("val")),
                    range=_text(meta.get("vr")),
                    unbacked=event.type == "create_unbacked_symbol",
                    site=_site(event, meta),
                )
            )
    names_created = {c.name for c in created}
    uncreated: dict[str, Symbol] = {}
    for _, meta in events:
        for name, source in _sources(meta).items():
            if name not in uncreated and name not in names_created:
                # created before the trace started, or not logged
                uncreated[name] = Symbol(name, source, "", "", False, Site(), created=False)
    # A name created again is a new symbol (torch 2.10+ strict export logs several exports,
    # each with its own shape environment, under one compile id): a record constrains the
    # symbol of its name created last before it.
    current = dict(uncreated)
    made = iter(created)
    other: list[Constraint] = []
    for event, meta in events:
        if event.type in CREATE_TYPES:
            if str(meta.get("symbol", "")):
                symbol = next(made)
                current[symbol.name] = symbol
            continue
        constraint = _constraint(event, meta)
        if event.type == "symbolic_shape_specialization":
            names = [str(meta.get("symbol", ""))]
        else:
            names = list(dict.fromkeys(_NAME.findall(constraint.expr)))
        named = [current[n] for n in names if n in current]
        for symbol in named:
            symbol.constraints.append(constraint)
        if not named:
            other.append(constraint)
    return UnitSymbols(unit, [*created, *uncreated.values()], other)


def _constraint(event: Event, meta: dict[str, Any]) -> Constraint:
    if event.type == "symbolic_shape_specialization":
        expr = f"{meta.get('symbol', '')} = {_text(meta.get('value'))}"
        reason = _text(meta.get("reason"))
        outcome = f"({reason})" if reason else ""
    elif event.type == "expression_created":
        expr = _text(meta.get("result"))
        method = _text(meta.get("method"))
        outcome = f"(by {method})" if method else ""
    else:
        expr = _text(meta.get("expr") or meta.get("symbol") or meta.get("op"))
        result = meta.get("result")
        outcome = f"→ {_text(result)}" if result is not None else _text(meta.get("reason"))
    kind = _KINDS.get(event.type, event.type.replace("_", " "))
    return Constraint(event.type, kind, expr, outcome, _site(event, meta), event.line)


def _sources(meta: dict[str, Any]) -> dict[str, str]:
    """Symbol → source, as export guards log them for the symbols their expression names."""
    found: dict[str, str] = {}
    locals_ = meta.get("frame_locals")
    for table in (
        meta.get("symbol_to_sources"),
        locals_.get("symbols") if isinstance(locals_, dict) else None,
    ):
        if isinstance(table, dict):
            for name, source in table.items():
                found.setdefault(str(name), _text(source))
    return found


def _site(event: Event, meta: dict[str, Any]) -> Site:
    frame = user_frame(event.stacks)
    if frame is not None:
        return Site(
            f"{frame.short_filename.rsplit('/', 1)[-1]}:{frame.line}",
            frame.describe(),
            " ".join((frame.loc or "").split()),
        )
    # Export guards log no user stack, only the user line's text and locals.
    locals_ = meta.get("frame_locals")
    if isinstance(locals_, dict) and locals_.get("loc"):
        return Site(code=" ".join(_text(locals_["loc"]).split()))
    return Site()


def _text(value: object) -> str:
    return "" if value is None else str(value)

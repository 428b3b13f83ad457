"""What config each compile ran with.

torch logs the whole config with every metrics record (Dynamo and Inductor by 2.6,
the compiler and functorch configs by 2.10 and 2.13: tens of kilobytes each, nearly always
the same), and AOTAutograd logs its functorch config as an artifact of each compile. The
handlers keep each distinct snapshot once; here a run gets one baseline (per config, the
snapshot most compile ids ran with) and each compile id only what it changed, which answers
"what config was in force?" without repeating the snapshot on every page.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..handlers import CONFIG_FIELDS
from ..model import CompileUnit, Event, Trace
from ..records import loads_bounded
from ..store import PayloadRef

#: How each config is named on the pages.
LABELS = {
    "dynamo_config": "Dynamo",
    "inductor_config": "Inductor",
    "functorch_config": "functorch (AOTAutograd)",
    "compiler_config": "torch.compiler",
}
#: A setting's value is shown up to this many characters.
MAX_VALUE_CHARS = 300
#: Compile ids the Config page lists with their changes at most.
MAX_LISTED = 200


@dataclass(frozen=True)
class ConfigChange:
    """One setting of one config that differs from the run's baseline."""

    config: str  # the metrics field, e.g. "inductor_config"
    key: str
    baseline: str  # the value as shown; "(not set)" when the baseline lacks the setting
    value: str

    @property
    def label(self) -> str:
        return LABELS.get(self.config, self.config)


@dataclass(frozen=True)
class UnitConfig:
    """The config a compile id ran with, told as its difference from the baseline."""

    unit: CompileUnit
    changes: list[ConfigChange]
    configs: tuple[str, ...]  # the configs its records logged


def show_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + "…"
    return text


#: The artifact AOTAutograd logs its config in (torch 2.6+), one per AOT compile.
FUNCTORCH_ARTIFACT = "torch._functorch.config"


def unit_snapshots(unit: CompileUnit, *, functorch_artifact: bool = False) -> dict[str, PayloadRef]:
    """Per config, the snapshot the unit's metrics logged (the forward record's first; a unit
    that logged only a backward record has that one's). With ``functorch_artifact``, the
    functorch config comes from AOTAutograd's artifact (torch before 2.13 logs it in no
    metrics record)."""
    found: dict[str, PayloadRef] = {}
    records: list[Event] = sorted(unit.metrics, key=lambda m: m.type != "compilation_metrics")
    for event in records:
        for name, ref in (event.configs or {}).items():
            found.setdefault(name, ref)
    if functorch_artifact:
        for artifact in unit.artifacts:
            if artifact.name == FUNCTORCH_ARTIFACT and artifact.payload is not None:
                found.setdefault("functorch_config", artifact.payload)
                break
    return found


class RunConfig:
    """The run's baseline config and each compile id's difference from it."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._of: dict[int, dict[str, PayloadRef]] = {}
        counts: dict[str, Counter[PayloadRef]] = {}
        logged = {name for u in trace.units.values() for m in u.metrics for name in m.configs or ()}
        from_artifact = "functorch_config" not in logged  # torch before 2.13
        for unit in trace.units.values():
            snapshots = unit_snapshots(unit, functorch_artifact=from_artifact)
            if snapshots:
                self._of[id(unit)] = snapshots
            for name, ref in snapshots.items():
                counts.setdefault(name, Counter())[ref] += 1
        #: per config the snapshot most compile ids ran with (the earliest of a tie)
        self.baseline: dict[str, PayloadRef] = {
            name: counts[name].most_common(1)[0][0] for name in CONFIG_FIELDS if name in counts
        }
        #: the functorch config came from AOTAutograd's artifacts, not from the metrics
        self.functorch_from_artifact = from_artifact and "functorch_config" in self.baseline
        self.units_with_config = len(self._of)
        self.on_baseline = sum(
            1 for snaps in self._of.values() if self._same(snaps)
        )  # compile ids with no change
        self._decoded: dict[PayloadRef, dict[str, Any]] = {}

    def __bool__(self) -> bool:
        return bool(self.baseline)

    def _same(self, snapshots: dict[str, PayloadRef]) -> bool:
        return all(self.baseline.get(name) == ref for name, ref in snapshots.items())

    def settings(self, ref: PayloadRef) -> dict[str, Any]:
        """A snapshot decoded; the baseline's are kept (every differing compile is compared
        with them), any other is decoded when asked (a log may hold thousands)."""
        value = self._decoded.get(ref)
        if value is None:
            try:
                value = loads_bounded(self.trace.read_payload(ref))
            except ValueError:
                value = {}
            if not isinstance(value, dict):
                value = {}
            if ref in self.baseline.values():
                self._decoded[ref] = value
        return value

    def baseline_rows(self) -> list[tuple[str, str, list[tuple[str, str]]]]:
        """``(config, label, [(setting, value shown)])`` of the baseline, settings sorted."""
        return [
            (
                name,
                LABELS.get(name, name),
                [(k, show_value(v)) for k, v in sorted(self.settings(ref).items())],
            )
            for name, ref in self.baseline.items()
        ]

    def of(self, unit: CompileUnit) -> UnitConfig | None:
        """What ``unit`` changed from the baseline; None when it logged no config."""
        snapshots = self._of.get(id(unit))
        if not snapshots:
            return None
        changes: list[ConfigChange] = []
        for name, ref in snapshots.items():
            base_ref = self.baseline.get(name)
            if ref == base_ref:
                continue
            base = self.settings(base_ref) if base_ref else {}
            mine = self.settings(ref)
            for key in sorted(base.keys() | mine.keys()):
                if key in base and key in mine and base[key] == mine[key]:
                    continue
                changes.append(
                    ConfigChange(
                        name,
                        key,
                        show_value(base[key]) if key in base else "(not set)",
                        show_value(mine[key]) if key in mine else "(not set)",
                    )
                )
        return UnitConfig(unit, changes, tuple(snapshots))

    def differing(self, limit: int = MAX_LISTED) -> tuple[list[UnitConfig], int]:
        """The first ``limit`` compile ids whose config differs from the baseline, in log
        order, and how many differ in all."""
        found = []
        count = 0
        for unit in self.trace.units.values():
            if id(unit) in self._of and not self._same(self._of[id(unit)]):
                count += 1
                if len(found) < limit:
                    config = self.of(unit)
                    if config is not None and config.changes:
                        found.append(config)
        return found, count

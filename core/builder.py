"""Drive records through the handler registry into a :class:`~tlsite.core.model.Trace`.

Besides the model, the builder streams two spill files while it reads (``raw.jsonl`` lines and
chromium events) so that neither is held in memory.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from . import handlers
from .compile_id import CompileId
from .frames import InternTable, read_stack
from .limits import OTHER_KEYS, count_name
from .model import (
    BODY_PAGE,
    Artifact,
    ArtifactList,
    ArtifactSpill,
    CompileUnit,
    DescribeRef,
    Phase,
    Trace,
)
from .records import CONTEXT_KEYS, Record, RecordReader, dumps_finite, is_finite_number
from .registry import RecordContext, handler_for
from .stats import ParseStats
from .store import PayloadStore

#: Keys tlparse adds to each raw.jsonl line.
RAW_ADDED_KEYS = ("timestamp", "thread", "pathname", "lineno", "payload_filename")
#: Called with each artifact once its record is read (to start work on it early).
ArtifactCallback = Callable[[Trace, Artifact], None]
_YEAR_PLACEHOLDER = "0000-"
#: Phases kept open per compile at most (a log that never ends its phases must not grow this).
MAX_OPEN_PHASES = 100


class TraceBuilder:
    """Build one trace model from one log's lines."""

    def __init__(
        self,
        source: str,
        store: PayloadStore | None = None,
        *,
        export_mode: bool = False,
        fast_paths: bool = True,
        on_artifact: ArtifactCallback | None = None,
    ) -> None:
        stats = ParseStats(source=source)
        self.trace = Trace(
            source=source,
            stats=stats,
            strings=InternTable(),
            store=store or PayloadStore(),
            export_mode=export_mode,
        )
        self._number = 0
        self.kept_records = 0  # events and metrics kept on compile units (see keep_event)
        self._raw: TextIO = open(self.trace.raw_jsonl_path, "w", encoding="utf-8")  # noqa: SIM115
        self._chromium: TextIO = open(self.trace.chromium_path, "w", encoding="utf-8")  # noqa: SIM115
        self._describe = open(self.trace.describe_path, "wb")  # noqa: SIM115
        self._describe_size = 0
        self.trace.artifact_spill = ArtifactSpill(self.trace.artifacts_path)
        self._json_strings: dict[str, str] = {}
        self.reader_strings = self.trace.strings
        #: copy logged JSON text instead of decoding and encoding it (tests turn this off to
        #: check both ways give the same values)
        self.fast_paths = fast_paths
        self.on_artifact = on_artifact
        self._open_phases: dict[CompileId, list[Phase]] = {}
        #: the paths dump_file pages took (see handlers.PathClaims)
        self.dump_paths = handlers.PathClaims()
        #: per compile id, where each ``inductor_compile`` begun and not yet ended started
        #: (the unit's artifact count then)
        self._inductor_open: dict[CompileId | None, list[tuple[int, Any]]] = {}
        #: the compile id last looked up and its unit (records come in runs of one compile)
        self._last_id: CompileId | None = None
        self._last_unit: CompileUnit | None = None
        self._phase_id: CompileId | None = None  # the same for chromium_phase's frame key
        self._phase_key: CompileId | None = None

    # -- numbering and folders ------------------------------------------------------------------
    def next_number(self) -> int:
        number = self._number
        self._number += 1
        return number

    @staticmethod
    def folder_for(record: Record) -> str:
        """The folder of a record's files: its compile id as logged (tlparse's raw dir)."""
        if record.compile_id is None:
            return f"unknown_{record.line}"
        return record.compile_id.dirname

    def unit_for(self, record: Record) -> CompileUnit:
        if record.compile_id is not None and record.compile_id is self._last_id:
            assert self._last_unit is not None
            return self._last_unit  # the reader hands out one id object per compile
        key = None if record.compile_id is None else record.compile_id.directory_key()
        unit = self.trace.units.get(key)
        if unit is None:
            unit = CompileUnit(
                id=key,
                order=len(self.trace.units),
                first_line=record.line,
                artifacts=ArtifactList(self.trace.artifact_spill),
            )
            self.trace.units[key] = unit
        self._last_id, self._last_unit = record.compile_id, unit
        return unit

    # -- reading ----------------------------------------------------------------------------------
    def read(self, lines: Iterable[bytes]) -> Trace:
        reader = RecordReader(lines, self.trace.stats)
        self.reader_strings = reader.strings
        self.trace.strings = reader.strings
        try:
            for record in reader:
                self.add(record)
        finally:
            self.finish()
        self.trace.rank = reader.expected_rank
        return self.trace

    def add(self, record: Record) -> None:
        if record.other_rank:
            self._write_raw(record, None)
            return
        if record.unranked:
            self._add_facts_only(record)
            return
        stats = self.trace.stats
        for key in record.envelope:
            if key not in CONTEXT_KEYS and key != record.event_type:
                count_name(stats.unknown_keys, key, OTHER_KEYS)
        self.trace.last_time = record.time
        unit = self.unit_for(record)
        if record.compile_id is not unit.id and record.compile_id == unit.id:
            record.compile_id = unit.id  # one object per compile, not one per record
        ctx = RecordContext(self, record, unit)
        handler = handler_for(record.event_type) or handlers.generic_handler
        if self.on_artifact is None:
            handler(ctx)
        else:
            known = len(unit.artifacts)
            handler(ctx)
            for artifact in unit.artifacts[known:]:
                self.on_artifact(self.trace, artifact)
        if "stack" in record.envelope:
            frames = read_stack(record.envelope["stack"], self.reader_strings)
            if frames:
                self.trace.unknown_stacks[tuple(frames)] += 1
        payload_filename = ctx.payload_file
        if payload_filename is None and record.payload_bytes and not ctx.consumed_payload:
            key = record.payload_key or ""
            ref = ctx.payload_ref
            if ref is not None:
                self.trace.loose_payloads[key] = ref
                payload_filename = f"payloads/{key}.txt"
                for artifact in unit.artifacts[-2:]:  # a rendered page keeps its raw text here
                    if artifact.line == record.line and artifact.body == BODY_PAGE:
                        artifact.raw_file = payload_filename
        if record.event_type != "chromium_event":
            self._write_raw(record, payload_filename)

    def _add_facts_only(self, record: Record) -> None:
        """A record naming no rank in a rank's log (torch logs ``torch_version`` so): what it
        says is this rank's (the torch version), but tlparse drops it as another rank's, so it
        gets no numbered file, and every later file keeps tlparse's name and number."""
        handler = handler_for(record.event_type) or handlers.generic_handler
        number = self._number
        scratch = CompileUnit(id=None, order=-1, first_line=record.line)  # not in the model
        handler(RecordContext(self, record, scratch))
        self._number = number
        self._write_raw(record, None)

    def envelope_json(self, record: Record) -> bytes:
        """The record's envelope as one line of UTF-8 JSON, for keeping it on disk: the text
        as logged, or ``{event type: metadata}`` encoded anew (with fast paths off, or when
        the logged text holds lone surrogates)."""
        if self.fast_paths and record.json_text:
            with contextlib.suppress(UnicodeEncodeError):
                return record.json_text.strip().encode("utf-8")
        envelope = {record.event_type: record.metadata}
        return dumps_finite(envelope, ensure_ascii=True, default=str).encode("utf-8")

    def spill_describe(self, ctx: RecordContext) -> None:
        """Keep a describe_* record's envelope on disk; the unit keeps where to find it."""
        offset = self._describe_size  # not tell(): a system call per record
        line = self.envelope_json(ctx.record)
        self._describe.write(line + b"\n")
        self._describe_size += len(line) + 1
        ref = DescribeRef(ctx.record.event_type, ctx.record.line, offset)
        ctx.unit.describes.append(ref)

    def add_chromium_event(self, event: Any) -> None:
        """Spill a decoded chromium event (the first one also tells the trace's year)."""
        if self.trace.year is None and isinstance(event, dict):
            self.trace.year = _year_of(event.get("ts"))
        self.add_chromium_json(dumps_finite(event, ensure_ascii=False))

    def inductor_compile_event(self, unit: CompileUnit, event: Any) -> None:
        """Label the artifacts logged inside one ``inductor_compile`` span with the graph it
        compiled. Its end event says ``is_backward``; a forward is an inference when the
        AOT graph it was made from is ``aot_inference_graph``. Older traces say neither, and
        their artifacts stay unlabelled."""
        if not isinstance(event, dict) or event.get("name") != "inductor_compile":
            return
        if event.get("ph") == "B":
            opened = self._inductor_open.setdefault(unit.id, [])
            if len(opened) < MAX_OPEN_PHASES:  # each open span is walked once when it ends
                opened.append((len(unit.artifacts), event.get("ts")))
            return
        opened = self._inductor_open.get(unit.id)
        if event.get("ph") != "E" or not opened:
            return
        start, began = opened.pop()
        _aoti_span(unit, start, began, event.get("ts"))
        args = event.get("args")
        backward = args.get("is_backward") if isinstance(args, dict) else None
        if not isinstance(backward, bool):
            return
        role = "backward" if backward else _forward_role(unit.artifacts, start)
        if not role:
            return
        for index in range(start, len(unit.artifacts)):  # no copy of the list
            artifact = unit.artifacts[index]
            if artifact.graph_role is None:
                artifact.graph_role = role
                unit.artifacts[index] = artifact  # one read back from the spill is a copy

    def add_chromium_json(self, text: str) -> None:
        """Spill one chromium event given as one line of JSON text."""
        self.trace.chromium_events += 1
        self._chromium.write(text)
        self._chromium.write("\n")

    def chromium_phase(self, record: Record, begins: bool, name: str) -> None:
        """Note that a phase of the record's compile began or ended (a chromium ``B``/``E``).

        Attempts of one compile share the phases: torch ends in attempt 1 what it began in 0.
        """
        if record.compile_id is None:
            return
        if record.compile_id is not self._phase_id:  # runs of events share one compile id
            self._phase_id, self._phase_key = record.compile_id, record.compile_id.frame_key()
        key = self._phase_key
        phases = self._open_phases.get(key)
        if begins:
            if phases is None:
                phases = self._open_phases[key] = []
            if len(phases) < MAX_OPEN_PHASES:
                phases.append(Phase(name, record.line, record.time))
            return
        if phases:
            for index in range(len(phases) - 1, -1, -1):
                if phases[index].name == name:
                    del phases[index]
                    break
            if not phases:
                del self._open_phases[key]

    def _json_string(self, text: str) -> str:
        """``text`` as a JSON string, encoded once (a log names a few source files)."""
        encoded = self._json_strings.get(text)
        if encoded is None:
            encoded = json.dumps(text, ensure_ascii=False)
            if len(self._json_strings) < 4096:  # a hostile log may name millions
                self._json_strings[text] = encoded
        return encoded

    def _write_raw(self, record: Record, payload_filename: str | None) -> None:
        """One raw.jsonl line: the envelope plus tlparse's added keys."""
        envelope = record.envelope
        text = record.json_text.rstrip()
        fast = self.fast_paths and envelope and text.endswith("}")
        if fast and not any(k in envelope for k in RAW_ADDED_KEYS):
            # fast path: append the keys to the JSON as logged instead of re-encoding it
            header = record.header
            extra = (
                f', "timestamp": "{_YEAR_PLACEHOLDER}{header.month:02d}-{header.day:02d}T'
                f'{header.time}Z", "thread": {header.thread}, '
                f'"pathname": {self._json_string(header.pathname)}, '
                f'"lineno": {header.lineno}'
            )
            if payload_filename is not None:
                extra += f', "payload_filename": {json.dumps(payload_filename)}'
            self._raw.write(text[:-1].rstrip())  # no concatenated copy of a huge envelope
            self._raw.write(extra + "}\n")
            return
        line = dict(envelope)
        header = record.header
        added: dict[str, Any] = {
            "timestamp": f"{_YEAR_PLACEHOLDER}{header.month:02d}-{header.day:02d}T{header.time}Z",
            "thread": header.thread,
            "pathname": header.pathname,
            "lineno": header.lineno,
        }
        if payload_filename is not None:
            added["payload_filename"] = payload_filename
        for key, value in added.items():
            if key in line:
                line[f"original_{key}"] = line[key]
            line[key] = value
        self._raw.write(dumps_finite(line, sort_keys=True, ensure_ascii=False, default=str))
        self._raw.write("\n")

    def finish(self) -> None:
        self.trace.open_phases = self._open_phases  # a key goes when its last phase ends
        self._raw.close()
        self._chromium.close()
        self._describe.close()


def _forward_role(artifacts: list[Artifact], start: int) -> str | None:
    """ "forward" or "inference": which AOT graph the last one of ``artifacts[:start]`` (those
    before an inductor compile) is (``None`` when none is, e.g. after an AOTAutograd cache
    hit)."""
    for index in range(start - 1, -1, -1):
        artifact = artifacts[index]
        if artifact.graph_role is not None or artifact.kind == "dynamo_output_graph":
            return None  # an earlier compile's: this one logged no AOT graph
        if artifact.kind in ("aot_forward_graph", "aot_joint_graph"):
            return "forward"
        if artifact.kind == "aot_inference_graph":
            return "inference"
    return None


def _aoti_span(unit: CompileUnit, start: int, began: Any, ended: Any) -> None:
    """Keep the time of an ``inductor_compile`` span in which AOTInductor logged its code (torch
    2.6 logs such a build under the export's compile id, in no metrics record)."""
    if not (is_finite_number(began) and is_finite_number(ended)) or ended < began:
        return
    for index in range(start, len(unit.artifacts)):
        artifact = unit.artifacts[index]
        if artifact.name.startswith("inductor_aot_"):
            unit.aoti_spans.append((artifact.line, (ended - began) / 1e6))
            return


def _year_of(ts: Any) -> int | None:
    """The year of a chromium ``ts`` (µs since the epoch); glog headers carry no year."""
    import datetime

    if not isinstance(ts, (int, float)) or ts <= 0:
        return None
    try:
        return datetime.datetime.fromtimestamp(ts / 1e6, tz=datetime.timezone.utc).year
    except (OverflowError, OSError, ValueError):
        return None


def build_trace(
    lines: Iterable[bytes],
    source: str,
    *,
    store: PayloadStore | None = None,
    export_mode: bool = False,
    on_artifact: ArtifactCallback | None = None,
) -> Trace:
    """Read ``lines`` (the raw lines of one log) into a trace model."""
    builder = TraceBuilder(source, store, export_mode=export_mode, on_artifact=on_artifact)
    return builder.read(lines)


__all__ = ["CompileId", "TraceBuilder", "build_trace"]

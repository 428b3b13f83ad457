"""The one registry that maps an event type to the handler that models it.

A handler is a function ``(ctx: RecordContext) -> None`` registered with :func:`handles`.
Adding an event type means adding one decorated function in :mod:`tlsite.core.handlers`.
Event types without a handler are kept by :func:`generic_handler` and shown generically.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .frames import Frame, read_stack
from .limits import RECORDS_PER_KIND, RECORDS_PER_TRACE, Unlisted, count_name
from .model import BODY_PAYLOAD, Artifact, CompileUnit, Event, Trace
from .records import Record
from .store import PayloadRef

if TYPE_CHECKING:
    from .builder import TraceBuilder

Handler = Callable[["RecordContext"], None]
HANDLERS: dict[str, Handler] = {}

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._+\-=@,]")
MAX_NAME_CHARS = 120
# Windows opens a device, not a file, for these names whatever follows the first dot
# (``nul.txt``, ``COM1.tar.gz``), so an unzipped report could not be extracted there.
_WINDOWS_DEVICE = re.compile(r"(?i)(CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])(\..*)?")


def handles(*event_types: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``event_types``."""

    def register(func: Handler) -> Handler:
        for event_type in event_types:
            if event_type in HANDLERS:
                raise ValueError(f"two handlers for {event_type!r}")
            HANDLERS[event_type] = func
        return func

    return register


def handler_for(event_type: str) -> Handler | None:
    return HANDLERS.get(event_type)


def safe_name(name: str) -> str:
    """A file-name-safe version of a name taken from the trace.

    Ordinary names (``fx_graph_cache_miss``) come through unchanged, so paths match tlparse;
    anything that could leave the folder or confuse a file system (``/``, ``..``, NUL, very
    long names, Windows device names such as ``aux`` or ``NUL.txt``, a trailing dot that
    Windows drops) is replaced, so the result is a valid file name on its own on every system.
    """
    cleaned = _UNSAFE_NAME.sub("_", name)
    if cleaned.startswith("."):
        cleaned = "_" + cleaned[1:]
    if _WINDOWS_DEVICE.fullmatch(cleaned):
        cleaned = "_" + cleaned
    cleaned = cleaned[:MAX_NAME_CHARS]
    if cleaned.endswith("."):
        cleaned = cleaned[:-1] + "_"
    return cleaned or "_"


class RecordContext:
    """What a handler sees: the record, its compile unit, the model being built, and ways to
    add to it. It is the whole handler API: handlers never reach into the builder."""

    def __init__(self, builder: TraceBuilder, record: Record, unit: CompileUnit) -> None:
        self._builder = builder
        self.record = record
        self.unit = unit
        self.payload_file: str | None = None  # last output whose body is the payload
        self.consumed_payload = False  # True when no payloads/<md5>.txt is needed
        self._payload_ref: PayloadRef | None = None

    # -- reading the record -----------------------------------------------------------------
    @property
    def meta(self) -> dict[str, Any]:
        value = self.record.metadata
        return value if isinstance(value, dict) else {}

    def field(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        """A metadata field of the expected type; a wrong type is noted and ignored."""
        value = self.meta.get(key)
        if value is None:
            return default
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        self.bad_field(key, value)
        return default

    def bad_field(self, key: str, value: Any) -> None:
        """Note on Parse health that field ``key`` has a value of the wrong type (ignored)."""
        self.find("bad_field", f"{self.record.event_type}.{key}: {value!r:.200}")

    def find(self, reason: str, detail: str) -> None:
        """Note a finding about this record on Parse health (see ``ParseStats.find``)."""
        self._builder.trace.stats.find(reason, self.record.line, detail)

    @property
    def trace(self) -> Trace:
        """The trace being built (its facts a handler may read or set)."""
        return self._builder.trace

    @property
    def fast_paths(self) -> bool:
        """Whether the record's text may be kept as logged instead of encoded anew."""
        return self._builder.fast_paths

    def stack(self, key: str) -> list[Frame]:
        return read_stack(self.meta.get(key), self._builder.reader_strings)

    @property
    def payload(self) -> str | None:
        return self.record.payload

    @property
    def payload_ref(self) -> PayloadRef | None:
        if self._payload_ref is None and self.record.payload_bytes is not None:
            self._payload_ref = self._builder.trace.store.put_bytes(
                self.record.payload_bytes, self.record.payload_md5
            )
        return self._payload_ref

    # -- adding to the model ----------------------------------------------------------------
    def emit(
        self,
        stem: str,
        ext: str,
        *,
        name: str | None = None,
        body: str = BODY_PAYLOAD,
        encoding: str = "string",
        metadata: dict[str, Any] | None = None,
    ) -> Artifact:
        """Add a numbered output ``<compile folder>/<stem>_<N><ext>`` (tlparse's naming)."""
        number = self._builder.next_number()
        folder = self._builder.folder_for(self.record)
        subgraph = self.record.envelope.get("subgraph_name")
        if isinstance(subgraph, str) and subgraph:  # regional Inductor: which region compiled
            metadata = {**(metadata or {}), "subgraph_name": subgraph}
        artifact = Artifact(
            number=number,
            kind=self.record.event_type,
            name=name or stem,
            path=f"{folder}/{safe_name(stem)}_{number}{ext}",
            line=self.record.line,
            compile_id=self.record.compile_id,
            payload=self.payload_ref,
            encoding=encoding,
            body=body,
            metadata=metadata or {},
        )
        self.unit.artifacts.append(artifact)
        if body in ("payload", "json"):
            self.payload_file = artifact.path
            self.consumed_payload = True
        return artifact

    def emit_global(self, path: str, *, name: str, body: str) -> Artifact:
        """Add a numbered output at a fixed path (dump_file pages), listed under this unit."""
        artifact = Artifact(
            number=self._builder.next_number(),
            kind=self.record.event_type,
            name=name,
            path=path,
            line=self.record.line,
            compile_id=self.record.compile_id,
            payload=self.payload_ref,
            body=body,
        )
        self.unit.artifacts.append(artifact)
        return artifact

    def emit_link(self, name: str, url: str) -> Artifact:
        artifact = Artifact(
            number=self._builder.next_number(),
            kind="link",
            name=name,
            path=None,
            line=self.record.line,
            compile_id=self.record.compile_id,
            url=url,
        )
        self.unit.artifacts.append(artifact)
        return artifact

    def next_number(self) -> int:
        """The next output number (tlparse numbers every output of a trace in one sequence)."""
        return self._builder.next_number()

    def claim_dump_path(self, stem: str, ext: str) -> str:
        """A path of its own for a dump_file page (see ``handlers.PathClaims``)."""
        return self._builder.dump_paths.claim(stem, ext)

    def keep_describe(self) -> None:
        """Keep this describe_* record on disk, found through the unit."""
        self._builder.spill_describe(self)

    def chromium_phase(self, begins: bool, name: str) -> None:
        """A phase of this record's compile began or ended (see ``TraceBuilder``)."""
        self._builder.chromium_phase(self.record, begins, name)

    def inductor_compile_event(self, event: Any) -> None:
        """Label this unit's artifacts with the graph an ``inductor_compile`` span compiled."""
        self._builder.inductor_compile_event(self.unit, event)

    def add_chromium_json(self, text: str) -> None:
        """Keep one chromium event given as one line of JSON text."""
        self._builder.add_chromium_json(text)

    def add_chromium_event(self, event: Any) -> None:
        """Keep one decoded chromium event."""
        self._builder.add_chromium_event(event)

    def keep_event(self, *, into: str = "events") -> Event:
        """Keep the record as an :class:`Event` on the unit (``events`` or ``metrics``).

        Its other top-level keys are not kept: raw.jsonl has the whole envelope. Past
        :data:`RECORDS_PER_KIND` records of its type in the unit, or :data:`RECORDS_PER_TRACE`
        in all, the event is returned but not kept: the unit counts it (pages say how many are
        not shown, and where).
        """
        record, unit, builder = self.record, self.unit, self._builder
        kind = count_name(unit.kept, record.event_type)
        keep = unit.kept[kind] <= RECORDS_PER_KIND and builder.kept_records < RECORDS_PER_TRACE
        if keep:
            builder.kept_records += 1
        else:
            self._count_unlisted(kind)
        event = Event(
            type=record.event_type,
            line=record.line,
            compile_id=record.compile_id,
            metadata=record.metadata,
            payload=self.payload_ref,
            stacks=NO_STACKS,
        )
        if keep:
            getattr(unit, into).append(event)
        return event

    def _count_unlisted(self, kind: str) -> None:
        """Count a record of type ``kind`` past the cap on its unit and on Parse health
        (noted once a type)."""
        record, unit = self.record, self.unit
        unlisted = unit.unlisted.get(kind)
        stats = self.trace.stats
        if unlisted is None:
            unit.unlisted[kind] = Unlisted(1, record.line, record.line)
            detail = f"{kind} records of {unit.display} from this one on"
            stats.find("not_listed", record.line, detail)
        else:
            unlisted.add(record.line)
            stats.findings["not_listed"] += 1


#: Shared by the many events without stacks (an empty dict is 64 bytes).
NO_STACKS: Mapping[str, list[Frame]] = MappingProxyType({})

"""The trace model every page is rendered from.

A :class:`Trace` holds compile units (one per compile id, in first-seen order); each unit
holds its artifacts (numbered like tlparse), metrics records, dynamo_start stacks and other
events. Payload text lives in a :class:`~tlsite.core.store.PayloadStore`, not in memory.
"""

from __future__ import annotations

import marshal
import os
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple, overload

from .analysis import compile_time, exports, views
from .compile_id import CompileId
from .frames import Frame, InternTable
from .limits import ARTIFACTS_PER_COMPILE, ARTIFACTS_PER_TRACE, Unlisted
from .records import loads_bounded
from .stats import ParseStats
from .store import PayloadRef, PayloadStore

if TYPE_CHECKING:
    from .analysis.compile_time import CompileTime
    from .analysis.views import Failure, GraphBreak, Recompile

#: How the body of an output file is produced from the record.
BODY_PAYLOAD = "payload"  # the payload as is
BODY_JSON = "json"  # the payload pretty-printed as JSON (sorted keys), raw text if invalid
BODY_PAGE = "page"  # a small HTML page rendered from the model (tlparse rendered it)

CACHE_MARKS = {"miss": "❌", "hit": "✅", "bypass": "❓"}

#: AOTAutograd's generated wrapper code (Python): torch 2.15 logs the six of torch <= 2.13 as
#: sections of ``aot_autograd_runtime_wrappers``.
AOT_WRAPPER_CODE = frozenset(
    {
        "aot_autograd_runtime_wrappers",
        "backward_prologue",
        "backward_epilogue",
        "compiled_fn_wrapper",
        "compiled_function_forward",
        "compiled_function_backward",
        "runtime_wrapper_orchestration",
    }
)


def cache_status(path: str) -> str | None:
    """tlparse's rule: ``cache_miss`` beats ``cache_hit`` beats ``cache_bypass`` in the path."""
    for status in ("miss", "hit", "bypass"):
        if f"cache_{status}" in path:
            return status
    return None


@dataclass(slots=True)
class Artifact:
    """One numbered output of the trace: a graph, code, an artifact record, a link, a page."""

    number: int
    kind: str  # the event type that produced it
    name: str  # the artifact / graph / link name shown to users
    path: str | None  # tlparse-compatible relative path; None for links
    line: int  # header line in the log
    compile_id: CompileId | None  # as logged (the folder comes from it)
    payload: PayloadRef | None = None
    encoding: str = "string"
    body: str = BODY_PAYLOAD
    url: str | None = None  # links only
    readable_path: str | None = None  # kernel stack-trace companion page
    listed_number: int | None = None  # the number compile_directory.json shows, if different
    raw_file: str | None = None  # for rendered pages: where the raw payload is (payloads/...)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: "forward", "backward" or "inference" when the trace says which graph inductor compiled
    #: while logging this artifact (see TraceBuilder.inductor_compile_event)
    graph_role: str | None = None

    @property
    def cache(self) -> str | None:
        return cache_status(self.path or "")

    @property
    def subgraph(self) -> str | None:
        """The ``subgraph_name`` its record carried (regional Inductor), if any."""
        return self.metadata.get("subgraph_name")

    @property
    def is_link(self) -> bool:
        return self.kind == "link"

    @property
    def filename(self) -> str:
        return (self.path or self.name).rsplit("/", 1)[-1]

    @property
    def lexer(self) -> str:
        """The Pygments lexer for showing this artifact."""
        if self.body == BODY_JSON or self.encoding == "json":
            return "json"
        if self.kind == "bytecode_dump":
            return "text"
        if self.kind == "graph_dump" or self.kind == "inductor_output_code":
            text = self.metadata.get("filename") or ""
            if str(text).endswith((".cpp", ".h", ".cu")) or self.name.startswith("inductor_aot"):
                return "cpp"
            return "python"
        if self.kind == "artifact":
            if "bytecode" in self.name.lower():
                return "text"
            if self.name.endswith(("_graph", "graph_runnable", "_pre_grad", "_post_grad")):
                return "python"
            if self.name in AOT_WRAPPER_CODE:
                return "python"
            return "text"
        if self.kind == "dynamo_cpp_guards_str":
            return "text"
        return "python"


#: Artifacts a :class:`ArtifactList` past its caps keeps in memory after the last one: the
#: builder still labels the artifacts of the record it is reading, and of the inductor
#: compile that just ended.
RECENT_ARTIFACTS = 256
#: Bytes of spilled artifact records read at once when a list is iterated.
SPILL_READ = 1 << 20


def _artifact_record(artifact: Artifact) -> bytes:
    """An artifact as one compact record (raises ValueError for metadata marshal cannot keep)."""
    cid = artifact.compile_id
    ref = artifact.payload
    return marshal.dumps(
        (
            artifact.number,
            artifact.kind,
            artifact.name,
            artifact.path,
            artifact.line,
            None
            if cid is None
            else (cid.compiled_autograd_id, cid.frame_id, cid.frame_compile_id, cid.attempt),
            None if ref is None else tuple(ref),
            artifact.encoding,
            artifact.body,
            artifact.url,
            artifact.readable_path,
            artifact.listed_number,
            artifact.raw_file,
            artifact.metadata,
            artifact.graph_role,
        )
    )


def _artifact_from(data: bytes | memoryview) -> Artifact:
    (number, kind, name, path, line, cid, ref, encoding, body, url, readable, listed, raw,
     metadata, role) = marshal.loads(data)  # fmt: skip
    return Artifact(
        number=number,
        kind=kind,
        name=name,
        path=path,
        line=line,
        compile_id=None if cid is None else CompileId(*cid),
        payload=None if ref is None else PayloadRef(*ref),
        encoding=encoding,
        body=body,
        url=url,
        readable_path=readable,
        listed_number=listed,
        raw_file=raw,
        metadata=metadata,
        graph_role=role,
    )


class ArtifactSpill:
    """The file where every compile's artifacts past the caps of :mod:`~tlsite.core.limits`
    wait, one compact record each: a hostile trace logs hundreds of thousands, and as objects
    they grew memory by a few hundred bytes apiece until the site was written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.kept = 0  # artifacts kept as objects, in all lists
        self._writer: BinaryIO | None = None
        self._reader: BinaryIO | None = None
        self._size = 0
        self._dirty = False
        self._filling: ArtifactList | None = None  # the list whose recent artifacts are kept

    def write(self, artifact: Artifact) -> tuple[int, int] | None:
        """Append the artifact; its offset and size, or None when it cannot be a record."""
        try:
            data = _artifact_record(artifact)
        except ValueError:
            return None
        if self._writer is None:
            self._writer = open(self.path, "ab")  # noqa: SIM115
            self._size = self._writer.seek(0, os.SEEK_END)
        offset = self._size
        self._writer.write(data)
        self._size += len(data)
        self._dirty = True
        return offset, len(data)

    def read_bytes(self, offset: int, size: int) -> bytes:
        if self._dirty and self._writer is not None:
            self._writer.flush()
            self._dirty = False
        if self._reader is None:
            self._reader = open(self.path, "rb", buffering=0)  # noqa: SIM115
        return os.pread(self._reader.fileno(), size, offset)

    def read(self, offset: int, size: int) -> Artifact:
        return _artifact_from(self.read_bytes(offset, size))

    def filling(self, artifacts: ArtifactList) -> None:
        """``artifacts`` gets the next artifact: the list that got the last one spills the
        recent artifacts it kept (one compile's come together in the log)."""
        if self._filling is not artifacts:
            if self._filling is not None:
                self._filling.spill_recent(0)
            self._filling = artifacts

    def close(self) -> None:
        for handle in (self._writer, self._reader):
            if handle is not None:
                handle.close()
        self._writer = self._reader = None


class ArtifactList(Sequence[Artifact]):
    """A compile's artifacts in log order: the first ones as objects, those past the caps of
    :mod:`~tlsite.core.limits` in an :class:`ArtifactSpill`, read back one at a time when
    iterated (the compile page, ``compile_directory.json`` and the tlparse files list every
    one). An artifact read back is a new object: change one with ``artifacts[i] = changed``.
    Without a spill (a unit built by hand), every artifact stays in memory."""

    __slots__ = ("_head", "_offsets", "_sizes", "_spill", "_spilled", "_tail")

    def __init__(self, spill: ArtifactSpill | None = None) -> None:
        self._spill = spill
        self._head: list[Artifact] = []  # kept as objects
        self._offsets = array("q")  # then these, in the spill
        self._sizes = array("q")
        self._spilled: list[Artifact] = []  # artifacts whose metadata could not be a record
        self._tail: list[Artifact] = []  # then the recent ones

    def append(self, artifact: Artifact) -> None:
        spill = self._spill
        if spill is None:
            self._head.append(artifact)
            return
        if (
            not self._offsets
            and not self._tail
            and len(self._head) < ARTIFACTS_PER_COMPILE
            and spill.kept < ARTIFACTS_PER_TRACE
        ):
            self._head.append(artifact)
            spill.kept += 1
            return
        spill.filling(self)
        self._tail.append(artifact)
        if len(self._tail) >= 2 * RECENT_ARTIFACTS:
            self.spill_recent(RECENT_ARTIFACTS)

    def spill_recent(self, keep: int) -> None:
        """Move all but the last ``keep`` recent artifacts to the spill."""
        assert self._spill is not None
        moving, self._tail = (
            self._tail[: len(self._tail) - keep],
            self._tail[len(self._tail) - keep :],
        )
        for artifact in moving:
            self._put(len(self._offsets), artifact)

    def _put(self, index: int, artifact: Artifact) -> None:
        """Write the artifact as spilled item ``index`` (a new one when ``index`` is the count)."""
        assert self._spill is not None
        where = self._spill.write(artifact)
        if where is None:  # kept as an object, in its place: offset -1 - its index
            where = (-1 - len(self._spilled), 0)
            self._spilled.append(artifact)
        if index == len(self._offsets):
            self._offsets.append(where[0])
            self._sizes.append(where[1])
        else:
            self._offsets[index], self._sizes[index] = where

    def _read(self, index: int) -> Artifact:
        offset = self._offsets[index]
        if offset < 0:
            return self._spilled[-1 - offset]
        assert self._spill is not None
        return self._spill.read(offset, self._sizes[index])

    def __len__(self) -> int:
        return len(self._head) + len(self._offsets) + len(self._tail)

    def __iter__(self) -> Iterator[Artifact]:
        yield from self._head
        yield from self._read_spilled()
        yield from self._tail

    def _read_spilled(self) -> Iterator[Artifact]:
        """The spilled artifacts in order, each run of adjacent records read in one go (a
        read per record was a system call each, for every page that lists them)."""
        offsets, sizes, index = self._offsets, self._sizes, 0
        while index < len(offsets):
            start = offsets[index]
            if start < 0:
                yield self._read(index)
                index += 1
                continue
            end, stop = index, start
            while end < len(offsets) and offsets[end] == stop and stop - start < SPILL_READ:
                stop += sizes[end]
                end += 1
            assert self._spill is not None
            data = memoryview(self._spill.read_bytes(start, stop - start))
            position = 0
            for size in sizes[index:end]:
                yield _artifact_from(data[position : position + size])
                position += size
            index = end

    @overload
    def __getitem__(self, index: int) -> Artifact: ...
    @overload
    def __getitem__(self, index: slice) -> list[Artifact]: ...
    def __getitem__(self, index: int | slice) -> Artifact | list[Artifact]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index < len(self._head):
            return self._head[index]
        index -= len(self._head)
        if index < len(self._offsets):
            return self._read(index)
        return self._tail[index - len(self._offsets)]

    def __setitem__(self, index: int, artifact: Artifact) -> None:
        if index < 0:
            index += len(self)
        if index < len(self._head):
            self._head[index] = artifact
        elif index - len(self._head) < len(self._offsets):
            self._put(index - len(self._head), artifact)
        else:
            self._tail[index - len(self._head) - len(self._offsets)] = artifact

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, ArtifactList)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ArtifactList({len(self)} artifacts, {len(self._offsets)} spilled)"


@dataclass(slots=True)
class Event:
    """Any other record worth keeping: metrics, symbolic-shape events, unknown types, ..."""

    type: str
    line: int
    compile_id: CompileId | None
    metadata: Any
    payload: PayloadRef | None = None
    stacks: Mapping[str, list[Frame]] = field(default_factory=dict)  # resolved stack fields
    #: a metrics record's config snapshots (``inductor_config`` ...), taken out of ``metadata``
    #: and kept in the store once per distinct text: field -> where its text is
    configs: Mapping[str, PayloadRef] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """The metadata object (``{}`` when the record logged something else)."""
        return self.metadata if isinstance(self.metadata, dict) else {}


class Phase(NamedTuple):
    """A chromium ``B`` event of a compile (a phase such as ``inductor_compile`` that began)."""

    name: str
    line: int  # of the record in the log
    time: str  # the record's glog time, "HH:MM:SS.uuuuuu": the clock of every line of the log


class DescribeRef(NamedTuple):
    """A ``describe_tensor``/``_storage``/``_source`` record, spilled to disk (there are many)."""

    type: str
    line: int
    offset: int  # byte offset of its metadata line in the trace's describe spill


class DescribeRefs:
    """A unit's :class:`DescribeRef` list, packed: a compile logs hundreds of them, and as
    tuples they were the model's biggest part (150 bytes each; 18 packed)."""

    _type_codes: dict[str, int] = {}  # noqa: RUF012 -- shared by every unit: a few names
    _type_names: list[str] = []  # noqa: RUF012

    def __init__(self) -> None:
        self._types = array("H")
        self._lines = array("q")
        self._offsets = array("q")

    def append(self, ref: DescribeRef) -> None:
        code = self._type_codes.get(ref.type)
        if code is None:
            code = self._type_codes[ref.type] = len(self._type_names)
            self._type_names.append(ref.type)
        self._types.append(code)
        self._lines.append(ref.line)
        self._offsets.append(ref.offset)

    def __len__(self) -> int:
        return len(self._types)

    def __iter__(self) -> Iterator[DescribeRef]:
        names = self._type_names
        for code, line, offset in zip(self._types, self._lines, self._offsets, strict=True):
            yield DescribeRef(names[code], line, offset)


@dataclass
class CompileUnit:
    """Everything logged under one compile id (its directory key)."""

    id: CompileId | None
    order: int
    first_line: int
    artifacts: ArtifactList = field(default_factory=ArtifactList)
    metrics: list[Event] = field(default_factory=list)
    stacks: list[list[Frame]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    describes: DescribeRefs = field(default_factory=DescribeRefs)
    #: records kept in ``events`` and ``metrics``, by event type
    kept: Counter[str] = field(default_factory=Counter)
    #: event type -> its records past :data:`~tlsite.core.limits.RECORDS_PER_KIND`, counted
    unlisted: dict[str, Unlisted] = field(default_factory=dict)
    #: (line of its code, seconds) of each AOTInductor build timed by its ``inductor_compile``
    #: span (chromium events), for a build no metrics record times
    aoti_spans: list[tuple[int, float]] = field(default_factory=list)

    @property
    def event_counts(self) -> Counter[str]:
        """How many tensor/storage/source descriptions this unit logged, by type."""
        return Counter(ref.type for ref in self.describes)

    @property
    def display(self) -> str:
        return "(unknown)" if self.id is None else self.id.display

    @property
    def key(self) -> str:
        """The compile_directory.json key."""
        return "unknown" if self.id is None else self.id.display

    @property
    def dirname(self) -> str:
        return "unknown" if self.id is None else self.id.dirname

    @property
    def stack(self) -> list[Frame]:
        return self.stacks[0] if self.stacks else []

    @property
    def compilation_metrics(self) -> list[Event]:
        return [m for m in self.metrics if m.type == "compilation_metrics"]

    def metric(self, key: str, default: Any = None) -> Any:
        """The last value of a compilation_metrics field for this unit."""
        for event in reversed(self.compilation_metrics):
            value = event.meta.get(key)
            if value is not None:
                return value
        return default

    def events_of(self, *types: str) -> list[Event]:
        return [e for e in self.events if e.type in types]


@dataclass
class Trace:
    """One log, read into compile units, with the stores the outputs are written from."""

    source: str
    stats: ParseStats
    strings: InternTable
    store: PayloadStore
    units: dict[CompileId | None, CompileUnit] = field(default_factory=dict)
    #: stacks of records that are not a compile's, each distinct one with how often it came
    unknown_stacks: Counter[tuple[Frame, ...]] = field(default_factory=Counter)
    dump_files: dict[str, Artifact] = field(default_factory=dict)
    loose_payloads: dict[str, PayloadRef] = field(default_factory=dict)  # payloads/<md5>.txt
    chromium_events: int = 0
    rank: int | None = None
    year: int | None = None
    torch_version: str | None = None
    export_mode: bool = False
    notes: list[str] = field(default_factory=list)
    #: Ranks in the job when this report is one rank of a multi-rank site (its landing page is
    #: one folder up, and the report links back to it); None for a standalone report.
    job_ranks: int | None = None
    #: compile (its :meth:`CompileId.frame_key`) -> the phases that began and had not ended
    #: when the log ended, outermost first; a finished log has none
    open_phases: dict[CompileId, list[Phase]] = field(default_factory=dict)
    last_time: str | None = None  # the glog time of the log's last record
    #: where the units' artifacts past the caps wait (see :class:`ArtifactList`)
    artifact_spill: ArtifactSpill | None = None

    # -- spilled streams (written while reading) -------------------------------------------
    @property
    def chromium_path(self) -> Path:
        return self.store.spill_path("chromium_events.jsonl")

    @property
    def raw_jsonl_path(self) -> Path:
        return self.store.spill_path("raw.jsonl.part")

    @property
    def describe_path(self) -> Path:
        return self.store.spill_path("describe.jsonl")

    @property
    def artifacts_path(self) -> Path:
        return self.store.spill_path("artifacts.spill")

    def describe_records(self, unit: CompileUnit) -> Iterator[Event]:
        """The unit's describe_* records, read back from the spill file."""
        if not unit.describes:
            return
        with open(self.describe_path, "rb") as spill:
            for ref in unit.describes:
                spill.seek(ref.offset)
                metadata = loads_bounded(spill.readline().decode("utf-8")).get(ref.type)
                yield Event(type=ref.type, line=ref.line, compile_id=unit.id, metadata=metadata)

    def release_units(self) -> None:
        """Forget the compile units, dump files, loose payloads and unknown stacks.

        A site build calls this once every page and tlparse file is made from them: for the
        rest of the build they were its biggest memory, growing with the trace. ``stats``,
        ``notes`` and the store stay.
        """
        self.units = {}
        self.dump_files = {}
        self.loose_payloads = {}
        self.unknown_stacks = Counter()

    # -- convenience --------------------------------------------------------------------------
    def unit_list(self) -> list[CompileUnit]:
        return list(self.units.values())

    def unit(self, display: str) -> CompileUnit:
        """The unit whose display id is ``display`` (e.g. ``"[0/1]"``)."""
        for unit in self.units.values():
            if unit.display == display:
                return unit
        raise KeyError(display)

    def artifacts(self) -> list[Artifact]:
        return [a for u in self.units.values() for a in u.artifacts]

    def read_payload(self, ref: PayloadRef) -> str:
        return self.store.read(ref)

    # -- analysis views (see tlsite.core.analysis) ----------------------------------------------
    @property
    def graph_breaks(self) -> list[GraphBreak]:
        return views.graph_breaks(self)

    @property
    def recompiles(self) -> list[Recompile]:
        return views.recompiles(self)

    @property
    def failures(self) -> list[Failure]:
        return exports.failures_with_exports(self)

    @property
    def compile_times(self) -> list[CompileTime]:
        outside = exports.outside_compiles(self, exports.export_calls(self))
        return compile_time.compile_times(self, outside)

    def close(self) -> None:
        if self.artifact_spill is not None:
            self.artifact_spill.close()
        self.store.close()

"""Handlers for every event type PyTorch 2.5–2.15 writes, registered by event type.

Handlers run in log order. Each numbered output takes the next number of the log's global
counter, which reproduces tlparse's file names (``-_0_0_0/dynamo_output_graph_0.txt``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from pathlib import PurePosixPath
from typing import Any

from .frames import EVAL_WITH_KEY, drop_convert_frame_suffix
from .limits import OTHER_TYPES, count_name
from .model import BODY_JSON, BODY_PAGE, BODY_PAYLOAD
from .records import (
    MAX_JSON_DEPTH,
    JSONTooDeep,
    finite_json,
    is_finite_number,
    is_whole_number,
    loads_bounded,
)
from .registry import RecordContext, handles, safe_name

#: Graph-like envelopes whose payload becomes ``<type>_N.txt``.
GRAPH_TYPES = (
    "optimize_ddp_split_graph",
    "compiled_autograd_graph",
    "aot_forward_graph",
    "aot_backward_graph",
    "aot_inference_graph",
    "aot_joint_graph",
    "inductor_post_grad_graph",
    "inductor_pre_grad_graph",
    "dynamo_cpp_guards_str",
    "dynamo_output_graph",
)

#: Per-compile summaries: kept as metrics records; tlparse renders the first three as pages.
METRICS_PAGES = (
    "compilation_metrics",
    "bwd_compilation_metrics",
    "aot_autograd_backward_compilation_metrics",
)
METRICS_ONLY = ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime")

#: Symbolic-shape and export-diagnostic events, kept with their resolved stacks.
SYMBOLIC_TYPES = (
    "symbolic_shape_specialization",
    "guard_added_fast",
    "guard_added",
    "create_symbol",
    "create_unbacked_symbol",
    "propagate_real_tensors",
    "propagate_real_tensors_provenance",
    "expression_created",
    "guard_on_data_dependent_error",
    "missing_fake_kernel",
    "mismatched_fake_kernel",
)

#: Tensor/storage/source descriptions: very many, so only counted per compile unit.
DESCRIBE_TYPES = ("describe_storage", "describe_tensor", "describe_source")

KERNEL_STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"


@handles(*GRAPH_TYPES)
def graph(ctx: RecordContext) -> None:
    ctx.emit(ctx.record.event_type, ".txt")


@handles("optimize_ddp_split_child")
def ddp_split_child(ctx: RecordContext) -> None:
    name = ctx.field("name", str, "")
    ctx.emit(f"optimize_ddp_split_child_{name}", ".txt")


@handles("graph_dump")
def graph_dump(ctx: RecordContext) -> None:
    name = ctx.field("name", str)
    if name is None:
        ctx.keep_event()
        return
    filename = ctx.field("filename", str)
    ctx.emit(name, ".txt", metadata={"filename": filename} if filename else None)


@handles("dynamo_guards")
def dynamo_guards(ctx: RecordContext) -> None:
    try:
        guards = loads_bounded(ctx.payload or "")
    except ValueError:
        guards = None
    if not isinstance(guards, list):
        ctx.find("bad_payload", "dynamo_guards: not a list")
        ctx.keep_event()
        return
    ctx.emit("dynamo_guards", ".html", body=BODY_PAGE, encoding="json")


@handles("inductor_output_code")
def inductor_output_code(ctx: RecordContext) -> None:
    filename = ctx.field("filename", str)
    stem = "inductor_output_code"
    if filename:
        stem += "_" + file_stem(filename)
    metadata = {"filename": filename} if filename else None
    ctx.emit(stem, ".html", name="inductor_output_code", body=BODY_PAGE, metadata=metadata)


@handles(*METRICS_PAGES)
def metrics_page(ctx: RecordContext) -> None:
    keep_metrics(ctx)
    ctx.emit(ctx.record.event_type, ".html", body=BODY_PAGE)


@handles(*METRICS_ONLY)
def metrics_only(ctx: RecordContext) -> None:
    keep_metrics(ctx)


def keep_metrics(ctx: RecordContext) -> None:
    """Keep a metrics record, as decoded, without its config snapshots (stored apart).

    A field pages and analyses compute with whose value has the wrong type (a number for
    ``restart_reasons``, text or infinity for a time) is noted on Parse health and left out,
    so everything downstream can rely on the types torch writes.
    """
    event = ctx.keep_event(into="metrics")
    meta = event.metadata
    if not isinstance(meta, dict):
        return
    version = meta.get("pytorch_version")
    if ctx.trace.torch_version is None and isinstance(version, str):
        ctx.trace.torch_version = version  # torch with no torch_version artifact
    bad = [key for key, value in meta.items() if not metric_value_ok(key, value)]
    for key in bad:
        ctx.bad_field(key, meta[key])
    configs = [key for key in CONFIG_FIELDS if isinstance(meta.get(key), str)]
    if configs:
        # torch repeats the whole config (tens of kB) in every record: each distinct
        # snapshot is stored once, the record keeps where it is
        event.configs = {key: ctx.trace.store.put(meta[key]) for key in configs}
    kept = meta
    if bad or configs:
        left_out = set(bad) | set(configs)
        kept = {key: value for key, value in meta.items() if key not in left_out}
    # a field of NaN or infinity is no value (as in tlsite's JSON files): null, in any trace
    event.metadata = finite_json(kept)


#: Config snapshots a metrics record carries (JSON text each; torch 2.13+ logs all four).
CONFIG_FIELDS = ("dynamo_config", "inductor_config", "functorch_config", "compiler_config")

#: Metrics fields read as text or as a whole number (torch's CompilationMetrics types).
_TEXT_METRICS = frozenset(
    {"fail_type", "fail_reason", "fail_user_frame_filename", "co_name", "co_filename"}
    | {"recompile_reason"}
)
_INT_METRICS = frozenset(
    {"fail_user_frame_lineno", "co_firstlineno", "graph_op_count", "graph_node_count"}
    | {"graph_input_count", "guard_count", "shape_env_guard_count", "cache_size"}
    | {"num_graph_breaks"}
)
#: Suffixes of durations (a finite number each).
_TIME_SUFFIXES = ("_time_us", "_time_s", "_time_ms", "_time_ns")


def metric_value_ok(key: str, value: object) -> bool:
    """Whether a metrics field's value has the type pages compute with (None always does)."""
    if value is None:
        return True
    if key == "restart_reasons":
        return isinstance(value, list)
    if key in _TEXT_METRICS:
        return isinstance(value, str)
    if key in _INT_METRICS:
        return is_whole_number(value)
    if key.endswith(_TIME_SUFFIXES):
        return is_finite_number(value)
    return True


@handles("link")
def link(ctx: RecordContext) -> None:
    name = ctx.field("name", str, "link")
    url = ctx.field("url", str, "")
    ctx.emit_link(name, url)


@handles("artifact")
def artifact(ctx: RecordContext) -> None:
    name = ctx.field("name", str)
    encoding = ctx.field("encoding", str, "string")
    too_deep = _too_deep(ctx.record.payload_bytes)
    if name is None or encoding not in ("string", "json") or too_deep:
        detail = f"artifact {name!r} with encoding {encoding!r}"
        if too_deep:
            detail += f": JSON nested more than {MAX_JSON_DEPTH} levels deep"
        ctx.find("bad_payload", detail)
        ctx.keep_event()
        return
    if encoding == "string":
        ctx.emit(name, ".txt", name=name)
        return
    output = ctx.emit(name, ".json", name=name, body=BODY_JSON, encoding="json")
    if name.startswith(KERNEL_STACK_TRACES):
        # tlparse lists the JSON with the number its readable companion page took
        # (or an empty readable_url when the JSON does not decode); we keep both quirks.
        if _decodes_as_object(ctx.payload):
            output.readable_path = output.path.removesuffix(".json") + "_readable.html"
            output.listed_number = ctx.next_number()
        else:
            output.readable_path = ""
    if name == "torch_version":
        try:
            version = loads_bounded(ctx.payload or "").get("pytorch_version")
        except (ValueError, AttributeError):
            version = None
        if isinstance(version, str):
            ctx.trace.torch_version = version


@handles("memoizer_artifacts")
def memoizer_artifacts(ctx: RecordContext) -> None:
    """Inductor's memoizer cache (function parameters and results it recorded), as JSON."""
    if ctx.payload is None or _too_deep(ctx.record.payload_bytes):
        ctx.keep_event()
        return
    ctx.emit("memoizer_artifacts", ".json", body=BODY_JSON, encoding="json")


@handles("bytecode_dump")
def bytecode_dump(ctx: RecordContext) -> None:
    """A code object's bytecode as Dynamo read or rewrote it (``co_name``, ``bytecode_type``)."""
    co_name = ctx.field("co_name", str)
    kind = ctx.field("bytecode_type", str)
    if co_name is None or kind is None or ctx.payload is None:
        ctx.keep_event()
        return
    ctx.emit(f"{co_name}_{kind}", ".txt", metadata={"co_name": co_name, "bytecode_type": kind})


@handles("dump_file")
def dump_file(ctx: RecordContext) -> None:
    name = ctx.field("name", str, "")
    match = EVAL_WITH_KEY.search(name)
    stem = f"eval_with_key_{match.group(1)}" if match else safe_name(name)
    dump_files = ctx.trace.dump_files
    known = dump_files.get(name)
    path = known.path if known and known.path else ctx.claim_dump_path(f"dump_file/{stem}", ".html")
    output = ctx.emit_global(path, name=name, body=BODY_PAGE)
    dump_files[name] = output


class PathClaims:
    """Paths given to dump_file pages, so that each name gets its own: ``stem + ext``, or
    ``stem_N + ext`` when another name already has that path.

    Names that differ only in case (``Foo``/``foo``) or in characters :func:`safe_name`
    replaces (``a/b``/``a_b``) would otherwise share one file, or two files that overwrite each
    other when the bundle is unpacked on a case-insensitive file system. (The same name logged
    again keeps its path, as tlparse overwrites that file too: the caller looks it up first.)
    Both lookups are by key, and each stem remembers its next free suffix, so claiming stays
    constant time however many names a trace logs.
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()  # claimed paths, lowercased
        self._next: dict[str, int] = {}  # lowercased stem -> next suffix to try

    def claim(self, stem: str, ext: str) -> str:
        path = stem + ext
        key = stem.lower()
        suffix = self._next.get(key, 1)
        while path.lower() in self._taken:
            suffix += 1
            path = f"{stem}_{suffix}{ext}"
        self._next[key] = suffix
        self._taken.add(path.lower())
        return path


@handles("chromium_event")
def chromium_event(ctx: RecordContext) -> None:
    ctx.consumed_payload = True  # chromium payloads never go to payloads/
    text = ctx.payload or ""
    mark = _phase_mark(text)
    if mark is not None:
        ctx.chromium_phase(*mark)
    event: Any = None
    if '"inductor_compile"' in text:  # a few per compile: they say forward or backward
        with contextlib.suppress(ValueError):
            event = loads_bounded(text)
            ctx.inductor_compile_event(event)
    heavy = _bracket_heavy(ctx.record.payload_bytes)
    fast = ctx.fast_paths and ctx.record.md5_ok and not _not_plain_json(text)
    if fast and ctx.trace.year is not None and not heavy:
        # an intact payload is the JSON torch wrote (indent=0): newlines only separate tokens
        ctx.add_chromium_json(text.replace("\n", ""))
        return
    if event is None:  # not decoded above
        try:
            event = loads_bounded(text)
        except ValueError:
            ctx.find("bad_payload", "chromium_event: bad JSON")
            return
    ctx.add_chromium_event(event)


def _not_plain_json(text: str) -> bool:
    """Whether the text may not be one JSON object as is: no payload (a damaged envelope), or
    ``NaN``/``Infinity`` (which JSON lacks; decoding re-encodes them as null)."""
    return not text.startswith("{") or "NaN" in text or "Infinity" in text


_PHASE = re.compile(r'"ph"\s*:\s*"([BE])"')
_NAME = re.compile(r'"name"\s*:\s*("(?:[^"\\]|\\.)*")')


def _phase_mark(text: str) -> tuple[bool, str] | None:
    """(begins, name) of a chromium ``B``/``E`` event, read from its JSON text without decoding
    it (its ``args`` can be hundreds of kilobytes). Torch writes ``name`` first and ``ph``
    after ``args``, so the first ``name`` and the last ``ph`` are the event's own."""
    at = text.rfind('"ph"')
    phase = _PHASE.match(text, at) if at >= 0 else None
    name = _NAME.search(text) if phase else None
    if phase is None or name is None:
        return None
    quoted = name.group(1)
    # a log names a few dozen events, with short names: a long one is not kept (a hostile
    # log's thousand names of megabytes each would stay in memory for the process)
    read = _event_name if len(quoted) <= _MAX_CACHED_NAME else _event_name.__wrapped__
    value = read(quoted)
    return None if value is None else (phase.group(1) == "B", value)


#: Longest event name (JSON-quoted) :func:`_event_name` keeps.
_MAX_CACHED_NAME = 200


@functools.lru_cache(maxsize=1024)
def _event_name(quoted: str) -> str | None:
    """A chromium event's name from its JSON string (decoded once per name)."""
    try:
        return str(json.loads(quoted))
    except ValueError:
        return None


@handles("dynamo_start")
def dynamo_start(ctx: RecordContext) -> None:
    frames = ctx.stack("stack")
    if frames:
        ctx.unit.stacks.append(drop_convert_frame_suffix(frames))


@handles(*SYMBOLIC_TYPES)
def symbolic(ctx: RecordContext) -> None:
    event = ctx.keep_event()
    stacks = {key: frames for key in ("stack", "user_stack") if (frames := ctx.stack(key))}
    if stacks:
        event.stacks = stacks
    if ctx.trace.export_mode and is_export_guard(event.type, event.meta):
        ctx.emit("symbolic_guard_information", ".html", body=BODY_PAGE)


def is_export_guard(event_type: str, meta: dict) -> bool:
    """Guards draft-export reports as failures: data-dependent ones and evaluated guards."""
    if event_type in ("propagate_real_tensors_provenance", "propagate_real_tensors"):
        return True  # torch 2.6 logs the latter
    return event_type == "guard_added" and meta.get("prefix") == "eval"


@handles(*DESCRIBE_TYPES)
def describe(ctx: RecordContext) -> None:
    ctx.keep_describe()


@handles("export")
def export_start(ctx: RecordContext) -> None:
    """TORCH_DTRACE's mark of a ``torch.export`` call starting (its payload is "start!"):
    shown with the call (analysis/exports.py), not as an unknown record."""
    ctx.keep_event()


@handles("exported_program")
def exported_program(ctx: RecordContext) -> None:
    if ctx.trace.export_mode:
        ctx.emit("exported_program", ".txt")
    else:
        ctx.keep_event()


def generic_handler(ctx: RecordContext) -> None:
    """Unknown event types are kept, counted and shown generically, never dropped."""
    if count_name(ctx.trace.stats.unknown_events, ctx.record.event_type) != OTHER_TYPES:
        ctx.find("unknown_event", ctx.record.event_type)
    ctx.keep_event()


def file_stem(filename: str) -> str:
    """Rust's ``Path::file_stem``: the last component without its final extension."""
    name = PurePosixPath(filename).name
    if name.startswith(".") and name.count(".") == 1:
        return name
    stem, dot, _ = name.rpartition(".")
    return stem if dot and stem else name


def _decodes_as_object(text: str | None) -> bool:
    try:
        return isinstance(loads_bounded(text or ""), dict)
    except ValueError:
        return False


def _bracket_heavy(payload: bytes | None) -> bool:
    """Whether a payload has enough brackets to nest too deeply (two counts at memory speed)."""
    return bool(payload) and payload.count(b"[") + payload.count(b"{") > MAX_JSON_DEPTH


def _too_deep(payload: bytes | None) -> bool:
    """A payload that is JSON nested too deeply for the code that decodes artifacts by name.

    Such a payload is kept as an event (and in ``payloads/``), never as an artifact, so no page
    or output file tries to decode it. Only bracket-heavy payloads that start like JSON are
    decoded to find out.
    """
    if payload is None or not _bracket_heavy(payload) or payload.lstrip()[:1] not in b"[{":
        return False
    try:
        loads_bounded(payload.decode("utf-8"))
    except JSONTooDeep:
        return True
    except ValueError:
        return False
    return False


__all__ = ["BODY_PAYLOAD", "generic_handler"]

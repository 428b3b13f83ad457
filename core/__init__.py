"""Pure-Python core of tlsite: read a TORCH_TRACE log, model it, analyse it, render Markdown.

Nothing in this package imports MkDocs. The entry point for scripts and tests::

    from tlsite.core import load
    trace = load("dedicated_log_torch_trace_abc.log")
    trace.graph_breaks, trace.recompiles, trace.failures, trace.compile_times
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

from .builder import ArtifactCallback, build_trace
from .compile_id import CompileId
from .model import Artifact, CompileUnit, Event, Trace
from .records import CHUNK
from .redact import Redactor, redacted_source, redaction_note
from .source import CRC_MISMATCHES, InputError, LogSource, ResolvedInput, resolve_input
from .stats import SKIP_REASONS, ParseStats
from .store import PayloadStore

__all__ = [
    "Artifact",
    "CompileId",
    "CompileUnit",
    "Event",
    "InputError",
    "LogSource",
    "ParseStats",
    "PayloadStore",
    "ResolvedInput",
    "Trace",
    "load",
    "load_source",
    "read_log",
    "resolve_input",
    "select_log",
]


ProgressCallback = Callable[[int], None]


def load_source(
    source: LogSource,
    *,
    store: PayloadStore | None = None,
    export_mode: bool | None = None,
    on_bytes: ProgressCallback | None = None,
    on_artifact: ArtifactCallback | None = None,
) -> Trace:
    """Read one log into a :class:`Trace` (payloads go to ``store`` or a temporary one).

    ``on_bytes`` is called now and then with the number of bytes read since the last call;
    ``on_artifact`` with each artifact as soon as its record is read.
    """
    if export_mode is None:
        export_mode = _looks_like_export(source)
    with source.open() as stream:
        lines = stream if on_bytes is None else _counted(stream, on_bytes)
        trace = build_trace(
            lines,
            source.display_name,
            store=store,
            export_mode=export_mode,
            on_artifact=on_artifact,
        )
    trace.stats.parts = source.parts
    breaks = [("", trace.stats.total_lines, line) for line in source.breaks]
    for part in source.parts:  # a joined log: where each of its logs broke off
        breaks += [(f"{part.name}: ", part.last_line, line) for line in part.breaks]
    for where, last_line, line in breaks:
        if line in CRC_MISMATCHES:  # read to the end, but wrong: say where it first shows
            trace.stats.find("input_damaged", _first_bad_line(trace.stats), where + line)
        else:  # the log broke off: the last line read from it is where
            trace.stats.find("input_cut", last_line, where + line)
    return trace


def _first_bad_line(stats: ParseStats) -> int:
    """The first line skipped or holding a damaged payload (the last line when none is)."""
    lines = [
        numbers[0]
        for reason, numbers in stats.lines_by_reason.items()
        if numbers and (reason in SKIP_REASONS or reason == "md5_mismatch")
    ]
    return min(lines, default=stats.total_lines)


def _counted(stream: BinaryIO, on_bytes: ProgressCallback) -> Iterator[bytes]:
    """The stream's bytes in chunks, reporting each chunk's size."""
    while chunk := stream.read(CHUNK):
        on_bytes(len(chunk))
        yield chunk


def select_log(
    resolved: ResolvedInput, rank: int | None, path: str | os.PathLike[str]
) -> LogSource:
    """The log to read: the one given, or for rank logs ``rank`` (default: the lowest)."""
    logs = resolved.logs
    if rank is not None:
        logs = [log for log in logs if log.rank == rank]
        if not logs:
            raise InputError(f"{os.fspath(path)}: no log for rank {rank}")
    return logs[0]


def load(
    path: str | os.PathLike[str],
    *,
    latest: bool = False,
    rank: int | None = None,
    export_mode: bool | None = None,
    store: PayloadStore | None = None,
    on_start: Callable[[LogSource], None] | None = None,
    on_bytes: ProgressCallback | None = None,
) -> Trace:
    """Read the trace at ``path`` (file, .gz, .zip, .7z, directory or ``-``) into a model.

    For a directory of rank logs, ``rank`` picks one (default: the lowest rank).
    ``on_start`` is told which log is read; ``on_bytes`` reports progress through it.
    """
    with resolve_input(path, latest=latest) as resolved:
        log = select_log(resolved, rank, path)
        if on_start is not None:
            on_start(log)
        trace = load_source(log, store=store, export_mode=export_mode, on_bytes=on_bytes)
        trace.notes.extend(resolved.notes)
    return trace


def read_log(
    resolved: ResolvedInput,
    path: str | os.PathLike[str],
    *,
    rank: int | None = None,
    export_mode: bool | None = None,
    redactor: Redactor | None = None,
) -> tuple[Trace, LogSource]:
    """Read the log ``rank`` picks from ``resolved`` (see :func:`select_log`), redacted as it
    is read with ``redactor``; the input's notes (redacted too) and the redaction's go on the
    trace. Returns the trace and the log read (whose bytes are the report's ``raw.log``)."""
    log = select_log(resolved, rank, path)
    if redactor is not None:
        log = redacted_source(log, redactor)
    trace = load_source(log, export_mode=export_mode)
    if redactor is None:
        trace.notes.extend(resolved.notes)
    else:
        trace.notes.extend(redactor.text(note) for note in resolved.notes)
        trace.notes.append(redaction_note(redactor))
    return trace, log


#: Records a draft export logs: its issues (only draft export propagates real tensors through
#: fake kernels, torch/export/_draft_export.py), the exported program, and the ``export`` record
#: a plain ``torch.export`` call logs first under TORCH_DTRACE (draft export's own handler drops
#: it: it is not among the keys it keeps). One regex: one scan of the bytes.
EXPORT_MARKER = re.compile(
    rb'\{"(missing_fake_kernel|mismatched_fake_kernel|propagate_real_tensors(?:_provenance)?'
    rb'|exported_program|export)"'
)
PRESCAN_BYTES = 64 * 1024 * 1024


def _looks_like_export(source: LogSource) -> bool:
    """Draft-export traces are recognised by their records (a cheap scan of the start of each
    log read: joined logs of one process have the draft export's after the main log's)."""
    if source.display_name == "-":
        return False
    return any(_starts_like_export(log) for log in source.logs_read())


def _starts_like_export(source: LogSource) -> bool:
    """Whether the log holds a draft export's records: an issue only draft export logs, or an
    exported program no ``export`` record came before (a plain ``torch.export.export`` under
    TORCH_DTRACE logs ``export`` then its program, and is not a draft export)."""
    seen = 0
    tail = b""
    started = False
    with source.open() as stream:
        while seen < PRESCAN_BYTES:
            chunk = stream.read(min(1 << 20, PRESCAN_BYTES))
            if not chunk:
                return False
            window = tail + chunk
            for match in EXPORT_MARKER.finditer(window):  # a match in the tail again: no matter
                name = match.group(1)
                if name == b"export":
                    started = True
                elif name != b"exported_program" or not started:
                    return True
            tail = chunk[-64:]
            seen += len(chunk)
    return False

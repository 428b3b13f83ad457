"""Read a big trace and prepare its report (:mod:`.prepared`) in a helper process.

Reading hundreds of megabytes leaves the reader's heap fragmented: the model is let go once
its pages are rendered, but CPython keeps every 1 MiB arena that still holds one live object
from the reading, and none was returned. Built in one process, a 1 GB trace's site then
peaked 25 MB above a 128 MB one's. Read in a helper, that memory leaves with the helper, and
MkDocs starts on a clean heap whatever the trace's size.

The helper is a :class:`~tlsite.core.worker.WorkerProcess`. It is sent one
:class:`ReadRequest` and answers, in order: ``("bytes", n)`` as it reads (progress),
``("block", CodeBlock)`` for each artifact's code as soon as it is read (the build process
hands them to its highlight workers: see
:func:`~tlsite.core.render.pages.highlight_ahead`), and last ``("report", PreparedReport)``
or ``("error", exception)``. Payloads, spill files and page bodies go to the store's folder,
which the build process made and keeps.
"""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from tlsite.core import InputError, LogSource, load_source
from tlsite.core.render.compat import CompatWriter
from tlsite.core.render.highlight import CodeBlock
from tlsite.core.render.pages import highlight_ahead
from tlsite.core.store import PayloadStore
from tlsite.core.worker import WorkerProcess

from .prepared import PreparedReport, prepare_report

_SERVICE = "tlsite.mkdocs_plugin.prepare_process:_prepare_service"


@dataclass(frozen=True)
class ReadRequest:
    """What the helper reads, and where it puts what it makes."""

    log: LogSource  # picklable: see LogSource.portable
    export_mode: bool | None
    store_root: str  # the payload store's folder (the build process removes it)
    files_dir: str  # where the tlparse files go
    notes: tuple[str, ...] = ()  # added to the report's notes (e.g. the input's)


def read_in_helper(
    request: ReadRequest,
    *,
    on_bytes: Callable[[int], None],
    on_block: Callable[[CodeBlock], object],
) -> PreparedReport:
    """Read and prepare ``request.log`` in a helper process; the report, with its store
    opened in this process (closing the report removes the store's folder).

    Raises what the helper met: :class:`InputError` or :class:`OSError` as they were, any
    other failure as a :class:`RuntimeError` carrying the helper's traceback.
    """
    worker = WorkerProcess(_SERVICE)
    try:
        worker.send(request)
        while True:
            try:
                kind, value = worker.receive()
            except (EOFError, OSError) as error:
                raise RuntimeError(f"the process reading the trace stopped: {error!r}") from error
            if kind == "bytes":
                on_bytes(value)
            elif kind == "block":
                on_block(value)
            elif kind == "error":
                raise value
            else:
                report: PreparedReport = value
                report.store = PayloadStore(request.store_root, owned=True)
                return report
    except BaseException:
        worker.stop()
        raise
    finally:
        worker.close()


class _BlockSender:
    """The helper's side of highlighting ahead: each distinct block goes to the build
    process once (a big trace repeats its code: 20,000 artifacts, 7,900 distinct blocks)."""

    def __init__(self, outbox: Connection) -> None:
        self._outbox = outbox
        self.sent: set[str] = set()

    def submit(self, block: CodeBlock) -> str:
        key = block.key
        if key not in self.sent:
            self.sent.add(key)
            self._outbox.send(("block", block))
        return key


def _prepare_service(inbox: Connection, outbox: Connection) -> None:
    """Helper process: read the requested log, prepare its report, send it, exit."""
    request: ReadRequest = inbox.recv()
    store = PayloadStore(request.store_root)
    sender = _BlockSender(outbox)
    try:
        trace = load_source(
            request.log,
            store=store,
            export_mode=request.export_mode,
            on_bytes=lambda count: outbox.send(("bytes", count)),
            on_artifact=highlight_ahead(sender),
        )
        trace.notes.extend(request.notes)
        log = request.log
        files = CompatWriter(trace, Path(request.files_dir), raw_log=log).write_all()
        report = prepare_report(trace)  # flushes the store: the build process reads it
        report.files, report.files_dir = files, request.files_dir
        # the build process has the blocks sent ahead already: only the others go again
        report.code_blocks = [b for b in report.code_blocks if b.key not in sender.sent]
        outbox.send(("report", report))
    except Exception as error:
        outbox.send(("error", _portable_error(error)))
    finally:
        store.close()


def _portable_error(error: Exception) -> Exception:
    """``error`` if the build process can show it as it is, else a RuntimeError that says
    where it came from."""
    if isinstance(error, (InputError, OSError)):
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:
            return InputError(str(error)) if isinstance(error, InputError) else OSError(str(error))
        return error
    return RuntimeError(f"reading the trace failed in a helper process:\n{traceback.format_exc()}")

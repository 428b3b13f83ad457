"""Highlight code blocks to HTML outside of Python-Markdown, in worker processes.

Artifact code is the bulk of a report. Rendering it through Markdown and then letting the
search plugin re-parse the highlighted HTML is where a naive build spends most of its time,
so pages carry a placeholder for each block and the HTML is inserted after indexing. Blocks
are highlighted once per distinct content (a recompile storm repeats the same code) by
helper processes (:mod:`tlsite.core.worker`), which a big build starts before it reads the
trace (see :func:`~tlsite.core.render.pages.highlight_ahead`); the HTML goes to one pack
file per process on disk rather than into memory, and from there into the pages
(:meth:`Highlighter.copy_into`).

The HTML has the structure pymdownx.highlight writes (``div.language-X.highlight > pre >
code``, one ``span`` per line), so the theme's styles and copy button apply. Lines carry no
ids: unique ids (``artifact-12-L40``) on every line made pages a quarter bigger after
compression. tlsite.js resolves a ``#<block>-L<n>`` link to the n-th line of that block, and
CSS counters draw the line numbers (not copied with the code).
"""

from __future__ import annotations

import functools
import hashlib
import html
import os
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ..store import copy_range, read_slice
from ..worker import WorkerProcess
from . import fastlex

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

#: Python, C++ and JSON are highlighted by :mod:`.fastlex`; other languages by Pygments
#: (about 1 MB/s) up to this many characters...
PYGMENTS_LIMIT = 64_000
#: ...and nothing above this many: plain text.
HIGHLIGHT_LIMIT = 8_000_000
#: Below this much code in all, blocks are highlighted in the build process itself.
POOL_THRESHOLD = 4_000_000
#: Marker replaced by the block's id when the cached HTML is inserted into a page.
BLOCK_ID = "@@BLOCK@@"
_BLOCK_MARK = BLOCK_ID.encode()


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """A block to show: where its text is, the lexer, and how much of it to show.

    Slotted: a big trace's pages hold tens of thousands of them until they are written.
    """

    pack: str  # the payload store's pack file
    offset: int
    size: int
    md5: str
    lang: str
    head_lines: int | None = None  # show only the first lines

    @property
    def key(self) -> str:
        """Same content shown the same way, same key: highlighted once."""
        return hashlib.md5(f"{self.md5}\0{self.lang}\0{self.head_lines}".encode()).hexdigest()


def read_block_text(block: CodeBlock) -> str:
    text = read_slice(block.pack, block.offset, block.size).decode("utf-8")
    if block.head_lines is not None:
        text = "\n".join(text.split("\n", block.head_lines)[: block.head_lines])
    return text


def effective_lang(text: str, lang: str) -> str:
    return lang if len(text) <= HIGHLIGHT_LIMIT else "text"


def highlight_html(text: str, lang: str) -> str:
    """The block as HTML, with ``BLOCK_ID`` where the per-page block id goes."""
    lang = effective_lang(text, lang)
    if text.endswith("\n"):
        text = text[:-1]
    if lang == "text":
        body = _plain_lines(text)
    elif fastlex.supports(lang):
        body = fastlex.html_lines(text, lang)
    elif len(text) <= PYGMENTS_LIMIT:
        body = _pygments_lines(text, lang)
    else:
        body = _plain_lines(text)
    return (
        f'<div class="language-{lang} highlight tlsite-lines" data-block="{BLOCK_ID}"><pre>'
        f"<span></span><code>{body}</code></pre></div>"
    )


def _plain_lines(text: str) -> str:
    return fastlex.escaped_lines(html.escape(text, quote=False))


@functools.cache
def _lexer(lang: str) -> Any:
    """Pygments' lexer of ``lang`` (None: it has none), looked up once per language: the
    look-up goes through every lexer's names, and a storm's pages ask for it thousands of
    times (a lexer keeps only its options, and lexes any number of texts)."""
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _pygments_lines(text: str, lang: str) -> str:
    from pygments import lex
    from pygments.token import STANDARD_TYPES, Token

    lexer = _lexer(lang)
    if lexer is None:
        return _plain_lines(text)

    def classified() -> Iterator[tuple[str | None, str]]:
        # lexed with its last line's newline, which line-based lexers (diff) need to read it
        # as a line, then without it
        tokens = list(lex(text + "\n", lexer))
        if tokens and tokens[-1][1].endswith("\n"):
            tokens[-1] = (tokens[-1][0], tokens[-1][1][:-1])
        for token_type, value in tokens:
            ttype = token_type
            css = STANDARD_TYPES.get(ttype)
            while not css and ttype is not Token:
                ttype = ttype.parent
                css = STANDARD_TYPES.get(ttype)
            yield css or None, value

    return _token_lines(classified())


def _token_lines(pieces: Iterable[tuple[str | None, str]]) -> str:
    """One span per line from (css class, text) pieces; runs of one class share a span."""
    lines: list[str] = []
    current: list[str] = []
    run_css: str | None = None
    run: list[str] = []

    def flush() -> None:
        if run:
            escaped = html.escape("".join(run), quote=False)
            current.append(f'<span class="{run_css}">{escaped}</span>' if run_css else escaped)
            run.clear()

    for css, value in pieces:
        for index, part in enumerate(value.split("\n")):
            if index:
                flush()
                lines.append("".join(current))
                current = []
            if part:
                if css != run_css:
                    flush()
                    run_css = css
                run.append(part)
    flush()
    lines.append("".join(current))
    return fastlex.escaped_lines("\n".join(lines))


class _HtmlPack:
    """Highlighted blocks appended to one file, read back by offset: one file per writer,
    not one per block (a big trace has thousands of blocks; creating and deleting a file
    each cost seconds)."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "ab")  # noqa: SIM115
        self._size = self._file.seek(0, os.SEEK_END)

    def add(self, block: CodeBlock) -> tuple[int, int, int]:
        """Highlight ``block`` into the pack; its ``(offset, size, head)``, readable by other
        processes. ``head``: how many bytes from the start hold the one ``BLOCK_ID`` of the
        HTML (-1 when the code holds the marker too: see :meth:`Highlighter.copy_into`)."""
        data = highlight_html(read_block_text(block), block.lang).encode("utf-8")
        offset = self._size
        self._file.write(data)
        self._size += len(data)
        self._file.flush()
        at = data.find(_BLOCK_MARK)
        once = at >= 0 and data.find(_BLOCK_MARK, at + 1) < 0
        return offset, len(data), at + len(_BLOCK_MARK) if once else -1

    def close(self) -> None:
        self._file.close()


def _highlight_service(inbox: Connection, outbox: Connection, pack_path: str) -> None:
    """Worker process: highlight each ``(number, block)`` of each list it is sent into the
    pack file, answering a list of ``(number, offset, size, head, None)`` (see
    :meth:`_HtmlPack.add`) or ``(number, 0, 0, -1, why)``, until its input ends."""
    pack = _HtmlPack(pack_path)
    try:
        while True:
            try:
                message = inbox.recv()
            except EOFError:
                return
            outbox.send([_highlighted(pack, number, block) for number, block in message])
    finally:
        pack.close()


def _highlighted(pack: _HtmlPack, number: int, block: CodeBlock) -> tuple[Any, ...]:
    """A worker's answer for block ``number`` (see :func:`_highlight_service`)."""
    try:
        offset, size, head = pack.add(block)
    except Exception as error:  # the build process renders it again, and raises
        return (number, 0, 0, -1, f"{type(error).__name__}: {error}")
    return (number, offset, size, head, None)


#: Blocks sent to the workers in one message once they are started: a message apiece woke
#: this process's threads that feed and read the workers' pipes once per block (a storm's
#: tens of thousands).
SEND_BATCH = 32


class Highlighter:
    """Highlights blocks ahead of time, in helper processes, and hands back their HTML by key.

    Blocks :meth:`submit`-ted before :meth:`start` are held and then sent in submission
    order; after it, they go to the workers :data:`SEND_BATCH` at a time (a build that knows
    its blocks while it still reads the trace starts the workers first, so the highlighting
    overlaps reading).
    A thread per worker collects its answers as they come (a worker whose answers nobody
    reads stops when their pipe is full); :meth:`html` waits for the block it needs. The
    HTML goes to pack files in ``cache_dir`` (one per worker), not into memory.

    Each distinct block gets a number; where its HTML is lies in three arrays under that
    number, and the block itself is kept only until a worker has rendered it (the one
    dict is key -> number). A 1 GB trace has some 8,000 distinct blocks, and a dict entry,
    tuple and two integers apiece were megabytes held to the end of the build.
    """

    def __init__(
        self, cache_dir: Path, *, workers: int | None = None, code_bytes: int | None = None
    ) -> None:
        """``workers``: helper processes (0: highlight in this process). By default, one
        per core but the one this process uses, if ``code_bytes`` (the total size of the
        blocks to come) reaches :data:`POOL_THRESHOLD`: below, they cost more than they
        save."""
        self.cache_dir = cache_dir
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._numbers: dict[str, int] = {}  # block key -> number
        self._blocks: list[CodeBlock | None] = []  # by number, until rendered
        count = workers
        if count is None:
            enough = code_bytes is None or code_bytes >= POOL_THRESHOLD
            count = max(1, (os.cpu_count() or 1) - 1) if enough else 0
        packs = [str(cache_dir / f"worker-{n}.html") for n in range(count)]
        self._workers = [
            WorkerProcess("tlsite.core.render.highlight:_highlight_service", pack) for pack in packs
        ]
        self._loads = [0] * count  # bytes of code sent to each worker
        # pack files by index: the workers', then the one this process renders into
        self._packs: list[str] = [*packs, str(cache_dir / "own.html")]
        # shared with the collector threads, under _answered
        self._answered = threading.Condition()
        self._pending: dict[int, int] = {}  # block number -> worker, not answered yet
        self._gone: set[int] = set()  # workers whose collector ended: sent nothing more
        # by block number: pack index (-1: not rendered), offset, size and head of its HTML
        self._pack_of = array("b")
        self._offset_of = array("q")
        self._size_of = array("q")
        self._head_of = array("q")
        self._collectors = [
            threading.Thread(target=self._collect, args=(n,), daemon=True) for n in range(count)
        ]
        for collector in self._collectors:
            collector.start()
        self._own_pack: _HtmlPack | None = None  # what this process renders itself
        self._readers: dict[int, int] = {}  # pack index -> file descriptor
        self._held: list[int] = []
        self._outgoing: list[int] = []  # submitted since started, not yet sent
        self._started = False
        #: called before blocks go to the workers (a payload store's flush: the workers
        #: read the blocks' code from its pack file)
        self.before_sending: Callable[[], None] | None = None

    def submit(self, block: CodeBlock) -> str:
        """Queue ``block`` (once per distinct content) and return its key."""
        key = block.key
        if key not in self._numbers:
            number = self._numbers[key] = len(self._blocks)
            self._blocks.append(block)
            self._pack_of.append(-1)
            self._offset_of.append(0)
            self._size_of.append(0)
            self._head_of.append(-1)
            if self._started:
                self._outgoing.append(number)
                if len(self._outgoing) >= SEND_BATCH:
                    self._send_outgoing()
            else:
                self._held.append(number)
        return key

    def start(self) -> None:
        """Send the held blocks, and from now on the blocks submitted, :data:`SEND_BATCH`
        at a time (and the ones waiting whenever this is called again, or :meth:`html`
        needs a block)."""
        if not self._started:
            self._started = True
            self._outgoing[:0] = self._held
            self._held.clear()
        self._send_outgoing()

    def _send_outgoing(self) -> None:
        """Hand the blocks waiting to go to the workers, each to the worker with the least
        code so far, in one message per worker (no worker: :meth:`html` renders them)."""
        numbers, self._outgoing = self._outgoing, []
        if not self._workers or not numbers:
            return
        if self.before_sending is not None:
            self.before_sending()
        batches: dict[int, list[tuple[int, CodeBlock]]] = {}
        with self._answered:
            alive = [w for w in range(len(self._workers)) if w not in self._gone]
            if not alive:  # every worker died: html() renders the blocks here
                return
            for number in numbers:
                least = min(alive, key=self._loads.__getitem__)
                block = self._blocks[number]
                assert block is not None
                self._pending[number] = least
                self._loads[least] += block.size
                batches.setdefault(least, []).append((number, block))
        for worker, batch in batches.items():
            try:
                self._workers[worker].send(batch)
            except OSError:  # a worker that died renders nothing: this process does it
                with self._answered:
                    for number, _block in batch:
                        self._pending.pop(number, None)
                    self._answered.notify_all()

    def _collect(self, worker: int) -> None:
        """Collector thread: record each answer of ``worker`` until it ends (a failure, or
        a block it never answered, is rendered again by :meth:`html`)."""
        while True:
            try:
                answer = self._workers[worker].receive()
            except (EOFError, OSError):  # gone, or closed: the rest is rendered here
                with self._answered:
                    self._gone.add(worker)  # and nothing more is sent to it
                    for other in [n for n, w in self._pending.items() if w == worker]:
                        del self._pending[other]
                    self._answered.notify_all()
                return
            with self._answered:
                for number, offset, size, head, failure in answer:
                    self._pending.pop(number, None)
                    if failure is None:
                        self._rendered(number, worker, offset, size, head)
                self._answered.notify_all()

    def _rendered(self, number: int, pack: int, offset: int, size: int, head: int) -> None:
        self._pack_of[number] = pack
        self._offset_of[number] = offset
        self._size_of[number] = size
        self._head_of[number] = head
        self._blocks[number] = None  # not needed again

    def _located(self, key: str) -> tuple[int, int]:
        """The block's number and the descriptor of the pack file its HTML is in (waiting
        for its worker, or highlighting it now if no worker did)."""
        self.start()  # sends the blocks still waiting to go
        number = self._numbers[key]
        with self._answered:
            self._answered.wait_for(lambda: number not in self._pending)
            pack = self._pack_of[number]
        if pack < 0:
            block = self._blocks[number]
            assert block is not None
            if self._own_pack is None:
                self._own_pack = _HtmlPack(self._packs[-1])
            pack = len(self._packs) - 1
            self._rendered(number, pack, *self._own_pack.add(block))
        descriptor = self._readers.get(pack)
        if descriptor is None:
            descriptor = self._readers[pack] = os.open(self._packs[pack], os.O_RDONLY)
        return number, descriptor

    def html(self, key: str, block_id: str) -> str:
        """The block's HTML with its per-page id."""
        number, descriptor = self._located(key)
        html = os.pread(descriptor, self._size_of[number], self._offset_of[number])
        return html.decode("utf-8").replace(BLOCK_ID, block_id)

    def copy_into(self, key: str, block_id: str, dest: BinaryIO) -> None:
        """Write :meth:`html`'s UTF-8 bytes to ``dest`` (a file opened for writing): its
        first bytes with the id put in, the rest copied from the pack file by the kernel.
        A big trace's pages are mostly code: decoding, joining and encoding it again in
        this process cost more than the rest of writing them."""
        number, descriptor = self._located(key)
        head, size = self._head_of[number], self._size_of[number]
        if head < 0:  # the code holds the marker too, which html() replaces as well
            dest.write(self.html(key, block_id).encode("utf-8"))
            return
        offset = self._offset_of[number]
        first = os.pread(descriptor, head, offset)
        dest.write(first.replace(_BLOCK_MARK, block_id.encode("utf-8")))
        copy_range(descriptor, offset + head, size - head, dest)

    def close(self) -> None:
        """Stop the workers: at once if blocks are still being rendered (the build failed
        midway, or was highlighted ahead for blocks no page shows)."""
        with self._answered:
            busy = set(self._pending.values())
        for number, worker in enumerate(self._workers):
            if number in busy:
                worker.stop()
            else:
                worker.end_input()
        for collector in self._collectors:
            collector.join()  # each ends when its worker does
        for worker in self._workers:
            worker.close()
        self._workers = []
        self._collectors = []
        self._pending.clear()
        for descriptor in self._readers.values():
            os.close(descriptor)
        self._readers.clear()
        if self._own_pack is not None:
            self._own_pack.close()
            self._own_pack = None

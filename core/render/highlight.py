"""Highlight code blocks to HTML outside of Python-Markdown, in worker processes.

Artifact code is the bulk of a report. Rendering it through Markdown and then letting the
search plugin re-parse the highlighted HTML is where a naive build spends most of its time,
so pages carry a placeholder for each block and the HTML is inserted after indexing. Blocks
are highlighted once per distinct content (a recompile storm repeats the same code) in a
process pool, and the HTML goes to files on disk rather than into memory.

The HTML has the structure pymdownx.highlight writes (``div.language-X.highlight > pre >
code``, one ``span`` per line), so the theme's styles and copy button apply. Lines carry no
ids: unique ids (``artifact-12-L40``) on every line made pages a quarter bigger after
compression. tlsite.js resolves a ``#<block>-L<n>`` link to the n-th line of that block, and
CSS counters draw the line numbers (not copied with the code).
"""

from __future__ import annotations

import hashlib
import html
import multiprocessing
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..store import read_slice
from . import fastlex

#: Python, C++ and JSON are highlighted by :mod:`.fastlex`; other languages by Pygments
#: (about 1 MB/s) up to this many characters...
PYGMENTS_LIMIT = 64_000
#: ...and nothing above this many: plain text.
HIGHLIGHT_LIMIT = 8_000_000
#: Below this much code in all, blocks are highlighted in the build process itself.
POOL_THRESHOLD = 4_000_000
#: Marker replaced by the block's id when the cached HTML is inserted into a page.
BLOCK_ID = "@@BLOCK@@"


@dataclass(frozen=True)
class CodeBlock:
    """A block to show: where its text is, the lexer, and how much of it to show."""

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


def _pygments_lines(text: str, lang: str) -> str:
    from pygments import lex
    from pygments.lexers import get_lexer_by_name
    from pygments.token import STANDARD_TYPES, Token
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return _plain_lines(text)

    def classified() -> Iterator[tuple[str | None, str]]:
        for token_type, value in lex(text, lexer):
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


def _render_to_file(block: CodeBlock, dest: str) -> str:
    """Worker entry point: highlight one block into ``dest`` (written atomically)."""
    if not os.path.exists(dest):
        tmp = f"{dest}.{os.getpid()}.part"
        Path(tmp).write_text(highlight_html(read_block_text(block), block.lang), encoding="utf-8")
        os.replace(tmp, dest)
    return dest


class Highlighter:
    """Highlights blocks ahead of time, in parallel, and hands back their HTML by key."""

    def __init__(
        self, cache_dir: Path, *, workers: int | None = None, code_bytes: int | None = None
    ) -> None:
        """``code_bytes``, the total size of the blocks to come, decides whether worker
        processes pay off: below :data:`POOL_THRESHOLD` they cost more than they save."""
        self.cache_dir = cache_dir
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._blocks: dict[str, CodeBlock] = {}
        self._futures: dict[str, Future[str]] = {}
        workers = workers if workers is not None else (os.cpu_count() or 1)
        if code_bytes is not None and code_bytes < POOL_THRESHOLD:
            workers = 1
        # "forkserver": workers start from a small clean process, not as copies of this one
        # (which holds the whole model), so they add little memory
        context = multiprocessing.get_context("forkserver")
        self._pool: Executor | None = (
            ProcessPoolExecutor(workers, mp_context=context) if workers > 1 else None
        )

    def submit(self, block: CodeBlock) -> str:
        """Queue ``block`` (once per distinct content) and return its key."""
        key = block.key
        if key not in self._blocks:
            self._blocks[key] = block
            if self._pool is not None:
                self._futures[key] = self._pool.submit(_render_to_file, block, self._dest(key))
        return key

    def html(self, key: str, block_id: str) -> str:
        """The block's HTML with its per-page id (highlighting it now if no pool runs)."""
        future = self._futures.get(key)
        dest = future.result() if future else _render_to_file(self._blocks[key], self._dest(key))
        return Path(dest).read_text(encoding="utf-8").replace(BLOCK_ID, block_id)

    def _dest(self, key: str) -> str:
        return str(self.cache_dir / f"{key}.html")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

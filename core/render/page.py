"""The pages a report is made of, as data: a page's Markdown, its code and HTML blocks kept
apart behind placeholders, and the tree of pages with its navigation.

Kept apart from :mod:`.pages` (which renders them) so that every module that makes pages
(:mod:`.pages`, :mod:`.extra_pages`, :mod:`.vllm_page`) imports this one, not each other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..store import read_slice
from .code_terms import CodeSection
from .escape import fence, inert_html
from .highlight import BLOCK_ID, CodeBlock, effective_lang, highlight_html, read_block_text

#: Above this size only the first lines are shown inline; the raw file has the rest.
INLINE_LIMIT = 1_000_000
INLINE_HEAD_LINES = 400

#: Theme assets, relative to the site root (MkDocs copies the theme's custom_dir there).
ASSET_DIR = "assets/tlsite"


def theme_file_url(url: str, *, in_job: bool) -> str:
    """The URL of a theme file (``url``: relative to the page, as its own site has the file).

    A job's site is a landing page at its root and a site per rank (and per diff of two
    ranks) one folder below it; the sites below load the root's theme files, one folder up.
    """
    return f"../{url}" if in_job else url


CODE_PLACEHOLDER = "<!--tlsite-code:{token}-->"
PLACEHOLDER_PATTERN = re.compile(r"<!--tlsite-code:([A-Za-z0-9_-]+)-->")
#: A :class:`PagePart`: put in as soon as the page is converted, so that search indexes it
#: (code and big tables, above, go in after search).
PART_PLACEHOLDER = "<!--tlsite-part:{token}-->"
PART_PLACEHOLDER_PATTERN = re.compile(r"<!--tlsite-part:([A-Za-z0-9_-]+)-->")


@dataclass(frozen=True, slots=True)
class HtmlBlock:
    """Pre-rendered HTML (a big table) kept in the payload store, inserted after conversion.

    Python-Markdown is slow on large escaped tables; HTML rendered by a template goes
    straight into the page instead, and is not parsed again by the search plugin.
    """

    pack: str
    offset: int
    size: int

    def html(self) -> str:
        return read_slice(self.pack, self.offset, self.size).decode("utf-8")


@dataclass(frozen=True, slots=True)
class PagePart:
    """A small part of a page's text as HTML from a template (a compile page's summary).

    Python-Markdown costs about a millisecond per table or HTML paragraph, on every one of a
    recompile storm's compile pages; a part skips it. ``tlsite markdown`` writes it into the
    page's Markdown as a raw HTML block, which Python-Markdown passes through.
    """

    text: str

    def html(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class CodePart:
    """A short code block in a page's text (a recompile's failed guard): highlighted into the
    page with its :class:`PagePart` blocks, so that search finds it; ``tlsite markdown``
    writes it as a fence, which a plain MkDocs build highlights."""

    text: str
    lang: str
    css: str = ""  # a class for the block (``tlsite-wrap``: long lines wrap)

    def html(self) -> str:
        """The block as Python-Markdown's fences show it (no line numbers, no block id)."""
        block = highlight_html(self.text, self.lang)
        css = f" {self.css}" if self.css else ""
        return block.replace(f' tlsite-lines" data-block="{BLOCK_ID}"', f'{css}"', 1)

    def fence(self) -> str:
        return fence(self.text, self.lang, attrs=f".{self.css}" if self.css else "")


Block = CodeBlock | HtmlBlock | PagePart | CodePart


@dataclass
class Page:
    """One generated Markdown page.

    Big code blocks are not in ``markdown`` itself but in ``blocks``, each behind a
    placeholder comment: the site build inserts their highlighted HTML after the search
    plugin has indexed the page; :meth:`standalone_markdown` puts them back as fences.
    """

    path: str  # relative to the docs root, e.g. "-_0_0_0/index.md"
    markdown: str
    title: str
    blocks: dict[str, Block] = field(default_factory=dict)
    #: the words of the code blocks that search finds (see :mod:`.code_terms`)
    code: list[CodeSection] = field(default_factory=list)

    def standalone_markdown(self) -> str:
        text = self.markdown
        for token, block in self.blocks.items():
            if isinstance(block, CodePart):
                content = block.fence()
            elif isinstance(block, (HtmlBlock, PagePart)):
                content = inert_html(block.html())
            else:
                code = read_block_text(block)
                content = fence(code, effective_lang(code, block.lang))
            text = text.replace(CODE_PLACEHOLDER.format(token=token), content)
            text = text.replace(PART_PLACEHOLDER.format(token=token), content)
        return text


def insert_parts(content: str, blocks: dict[str, Block]) -> str:
    """``content`` (a converted page) with its :class:`PagePart` blocks put in."""

    def html(match: re.Match[str]) -> str:
        block = blocks.get(match.group(1))
        return block.html() if isinstance(block, (PagePart, CodePart)) else match.group(0)

    return PART_PLACEHOLDER_PATTERN.sub(html, content)


@dataclass
class SiteTree:
    """The whole generated documentation tree.

    With a ``sink``, each page goes to it as soon as it is rendered instead of into
    ``pages``.
    """

    pages: list[Page] = field(default_factory=list)
    nav: list[Any] = field(default_factory=list)
    found: str = ""  # what the report found, one line for the terminal (see ReportRenderer)
    artifact_copies: list[str] = field(default_factory=list)  # see ReportRenderer
    sink: Callable[[Page], None] | None = field(default=None, repr=False, compare=False)

    def add(self, page: Page) -> None:
        if self.sink is None:
            self.pages.append(page)
        else:
            self.sink(page)

    def extend(self, pages: Iterable[Page]) -> None:
        for page in pages:
            self.add(page)

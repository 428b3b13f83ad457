"""A report made ready for MkDocs: what the site build needs of a trace, and no more.

A :class:`PreparedReport` is the trace's pages (each page's Markdown, its big HTML parts
and code left in the payload store as placeholders), the navigation and the distinct code
blocks to highlight.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mkdocs.utils.meta import YAML_RE

from tlsite.core.model import Trace
from tlsite.core.render.code_terms import CodeIndex
from tlsite.core.render.highlight import CodeBlock
from tlsite.core.render.page import Block
from tlsite.core.render.pages import Page, render_tree
from tlsite.core.stats import ParseStats
from tlsite.core.store import PayloadStore


@dataclass(slots=True)
class PreparedPage:
    """One page: the Markdown MkDocs reads at once, and what it converts when it writes it."""

    path: str  # relative to the report's root, e.g. "-_0_0_0/index.md"
    head: str  # the front matter (the whole page when its body is not deferred)
    body: str | None  # the Markdown after the front matter (see DeferredPage)
    blocks: dict[str, Block] | None  # the page's code and HTML blocks, by placeholder token


@dataclass
class PreparedReport:
    """Everything a site build needs of one trace (see the module docstring)."""

    source: str
    stats: ParseStats
    nav: list[Any]
    pages: list[PreparedPage]
    #: each distinct code block once, in the order the pages show them
    code_blocks: list[CodeBlock]
    code_bytes: int  # the code of every block of every page (repeats included)
    store_root: str
    #: the words of the pages' code that search finds (written as search/code_index.js)
    code_index: CodeIndex = field(default_factory=CodeIndex)
    found: str = ""  # what the report found, for the terminal (see SiteTree.found)
    #: tlparse's copies of text the compile pages show in full (see SiteTree.artifact_copies)
    artifact_copies: list[str] = field(default_factory=list)
    store: PayloadStore | None = field(default=None, repr=False, compare=False)

    def close(self) -> None:
        """Close the store (which removes its folder if this process owns it)."""
        if self.store is not None:
            self.store.close()


def split_front_matter(markdown: str) -> tuple[str, str] | None:
    """``(front matter, body)`` as MkDocs would read the page, or None without front matter."""
    front_matter = YAML_RE.match(markdown)
    if front_matter is None:
        return None
    return front_matter.group(0), markdown[front_matter.end() :].lstrip("\n")


def prepare_report(trace: Trace, *, prefix: str = "", defer_bodies: bool = True) -> PreparedReport:
    """Render ``trace``'s pages (their big parts and code into its store).

    ``defer_bodies``: keep each page's body apart for a :class:`DeferredPage`;
    without it (a site that embeds the report, whose plugins may read any page's Markdown
    at any time), a page's head is the whole page.
    """
    store = trace.store
    report = PreparedReport(
        source=trace.source,
        stats=trace.stats,
        nav=[],
        pages=[],
        code_blocks=[],
        code_bytes=0,
        store_root=str(store.root),
        store=store,
    )
    seen: set[str] = set()

    def park(page: Page) -> None:
        report.pages.append(_prepared(page, defer_body=defer_bodies))
        if page.code:  # page.html, not page/index.html, whatever the site's URLs
            location = f"{prefix}{page.path.removesuffix('.md')}.html"
            report.code_index.add_page(location, page.title, page.code)
        for block in page.blocks.values():
            if isinstance(block, CodeBlock):
                report.code_bytes += block.size
                if (key := block.key) not in seen:
                    seen.add(key)
                    report.code_blocks.append(block)

    tree = render_tree(trace, prefix=prefix, sink=park)
    report.nav, report.found = tree.nav, tree.found
    report.artifact_copies = tree.artifact_copies
    store.flush()  # highlight workers read the code from the pack file
    return report


def _prepared(page: Page, *, defer_body: bool) -> PreparedPage:
    """The page with its body (if deferred) apart from its front matter."""
    head, body = page.markdown, None
    parts = split_front_matter(page.markdown) if defer_body else None
    if parts is not None:  # every report page has front matter; converted whole otherwise
        head, body = parts
    return PreparedPage(page.path, head, body, page.blocks or None)

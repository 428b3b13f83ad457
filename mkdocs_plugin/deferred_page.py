"""A report page that MkDocs converts when it writes it, not with all the others.

MkDocs converts every page before it writes any (``_populate_page`` for all, then
``_build_page`` for all): every page's HTML, table of contents and anchor sets were alive at
once, and a build's memory grew with the number of compile ids. A :class:`DeferredPage` is
what MkDocs 1.6 lets a plugin put in ``File.page`` during ``on_files``: MkDocs reads its
front matter (title and options) as usual, but its Markdown body waits apart, and
:meth:`DeferredPage.convert` converts it just before the page is written: with
:mod:`tlsite.core.render.fast_markdown` when the body is in its subset (a compile page),
which gives the HTML and table of contents Python-Markdown would, else as MkDocs does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page, _HTMLHandler
from mkdocs.structure.toc import AnchorLink, TableOfContents, get_toc

from tlsite.core.render import fast_markdown

from .alike_pages import render_alike
from .page_shapes import Shapes
from .site_config import MARKDOWN_EXTENSIONS

#: The table of contents of a page that is written (one for all: nothing reads them).
_NO_TOC = get_toc([])
#: The logger MkDocs reports broken links to anchors on (``Page.validate_anchor_links``).
_ANCHOR_LOG = logging.getLogger("mkdocs.structure.pages")


def site_markdown(config: MkDocsConfig) -> bool:
    """Whether the site converts Markdown with tlsite's own extensions and settings, the ones
    :mod:`~tlsite.core.render.fast_markdown` reproduces."""
    names = {next(iter(e)) if isinstance(e, dict) else e for e in MARKDOWN_EXTENSIONS}
    settings = {k: v for e in MARKDOWN_EXTENSIONS if isinstance(e, dict) for k, v in e.items()}
    # MkDocs adds its built-in fenced_code, which the subset has nothing for
    return set(config.markdown_extensions) - {"fenced_code"} == names and all(
        (config.mdx_configs or {}).get(name) == value for name, value in settings.items()
    )


Converted = tuple[str, list[dict[str, Any]]] | None


def _converted_texts(converted: Converted) -> list[str | None]:
    """A conversion as the texts :class:`~.page_shapes.Shapes` keeps."""
    if converted is None:
        return [None, None]
    content, tokens = converted
    return [content, json.dumps(tokens, ensure_ascii=False)]


def _converted_made(texts: list[str | None]) -> Converted:
    content, tokens = texts
    return None if content is None or tokens is None else (content, json.loads(tokens))


def conversions() -> Shapes[Converted]:
    """Compile pages' bodies converted by :func:`fast_markdown.convert` once per shape (a
    storm's bodies are one text with other numbers in it)."""
    return Shapes(fast_markdown.convert, _converted_texts, _converted_made, _ids_unique)


def _ids_unique(converted: Converted) -> bool:
    """Whether a conversion's headings have distinct ids. Converting a page alone makes
    them so (``unique``); a shape's templates keep its probes' ids, and headings whose
    numbers make one slug only at some values ("1.2" and "12") would share one."""
    if converted is None:
        return True
    ids = [token["id"] for token in _token_items(converted[1])]
    return len(ids) == len(set(ids))


def _token_items(tokens: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for token in tokens:
        yield token
        yield from _token_items(token.get("children", []))


def _toc_items(items: Iterable[AnchorLink]) -> Iterator[AnchorLink]:
    for item in items:
        yield item
        yield from _toc_items(item.children)


def take_conversion(page: Page, converted: tuple[str, list[Any]], config: MkDocsConfig) -> None:
    """What ``Page.render`` sets, from :func:`fast_markdown.convert`'s HTML and toc tokens.
    Links to anchors are not listed for MkDocs to check (its check logs at ``info``, which
    ``tlsite`` does not show, and changes no byte): a report's are in raw HTML, and a
    comparison's link to anchors of the page itself."""
    page.content, tokens = converted
    page.toc = get_toc(tokens)
    page.links_to_anchors = {}
    ids = {item.id for item in _toc_items(page.toc)}
    if _ANCHOR_LOG.isEnabledFor(config.validation.links.anchors):
        parser = _HTMLHandler()  # ids in raw HTML, as MkDocs' preprocessor finds them
        parser.feed(page.markdown)
        parser.close()
        ids |= parser.present_anchor_ids
    page.present_anchor_ids = ids


class DeferredPage(Page):
    """A page whose file holds only its front matter; ``body`` is the rest."""

    def __init__(
        self,
        title: str | None,
        file: File,
        config: MkDocsConfig,
        *,
        body: str,
        convert: Callable[[str], Converted] = fast_markdown.convert,
    ) -> None:
        """``convert``: :func:`fast_markdown.convert`, or a build's :func:`conversions`."""
        super().__init__(title, file, config)
        self._body: str | None = body
        self._convert = convert
        self._files: Files | None = None

    def render(self, config: MkDocsConfig, files: Files) -> None:
        """MkDocs' conversion of every page at once: nothing yet (see :meth:`convert`)."""
        if self._body is not None:
            self.content, self.toc = "", _NO_TOC
            self._files = files  # the site's files, which links are resolved against
            return
        super().render(config, files)

    def convert(self, config: MkDocsConfig) -> None:
        """Convert the page's body as MkDocs would have (the page is written next)."""
        if self._body is None:
            return
        assert self._files is not None, "MkDocs renders every page before it writes any"
        self.markdown, self._body = self._body, None
        converted = self._convert(self.markdown) if site_markdown(config) else None
        if converted is None:
            render_alike(self, config, self._files)  # a job's ranks: once for pages alike
        else:
            take_conversion(self, converted, config)
        if "toc" in (self.meta.get("hide") or ()):
            # Material still writes a hidden table of contents, and its scripts measure the
            # heading of every entry (see long_tables.TOC_SECTIONS): only the page's title
            # is kept, which Material's "Skip to content" link points to
            first = next(iter(self.toc), None)
            if first is not None:
                self.toc = TableOfContents([AnchorLink(first.title, first.id, first.level)])

    def release(self, config: MkDocsConfig) -> None:
        """Drop what only the page's own output needed (it is written: nothing reads it).

        ``markdown`` becomes "" rather than None: MkDocs' ``Page.title`` is None for None.
        The page's anchors and links to anchors go too when MkDocs' check of them could not
        report anything (``tlsite build`` logs errors only): kept for that check until the
        build ends, they were a kilobyte or more per page.
        """
        self.content, self.markdown, self.toc = None, "", _NO_TOC
        if not _ANCHOR_LOG.isEnabledFor(config.validation.links.anchors):
            self.present_anchor_ids, self.links_to_anchors = None, {}

"""A report page that MkDocs converts when it writes it, not with all the others.

MkDocs converts every page before it writes any (``_populate_page`` for all, then
``_build_page`` for all): every page's HTML, table of contents and anchor sets were alive at
once, and a build's memory grew with the number of compile ids. A :class:`DeferredPage` is
what MkDocs 1.6 lets a plugin put in ``File.page`` during ``on_files``: MkDocs reads its
front matter (title and options) as usual, but its Markdown body waits in the payload store
and :meth:`DeferredPage.convert` converts it just before the page is written.
"""

from __future__ import annotations

import logging

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.structure.toc import get_toc

from tlsite.core.store import PayloadRef, PayloadStore

from .alike_pages import render_alike

#: The table of contents of a page that is written (one for all: nothing reads them).
_NO_TOC = get_toc([])
#: The logger MkDocs reports broken links to anchors on (``Page.validate_anchor_links``).
_ANCHOR_LOG = logging.getLogger("mkdocs.structure.pages")


class DeferredPage(Page):
    """A page whose file holds only its front matter; ``body`` is the rest, in ``store``."""

    def __init__(
        self,
        title: str | None,
        file: File,
        config: MkDocsConfig,
        *,
        body: PayloadRef,
        store: PayloadStore,
    ) -> None:
        super().__init__(title, file, config)
        self._body: PayloadRef | None = body
        self._store = store
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
        self.markdown = self._store.read(self._body)
        self._body = None
        render_alike(self, config, self._files)  # a job's ranks: once for pages alike

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

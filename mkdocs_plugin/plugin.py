"""The ``tlsite`` MkDocs plugin: put a trace's report into a MkDocs build.

The same plugin serves ``tlsite build`` (which hands it an already loaded trace) and users
who add ``- tlsite: {trace: path/to/trace.log}`` to their own ``mkdocs.yml``. Pages are
generated in memory (``File.generated``); the tlparse-compatible files are written into the
site folder after the build.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import BasePlugin, event_priority
from mkdocs.structure.files import File, Files

from tlsite.core import load
from tlsite.core.model import Trace
from tlsite.core.render.compat import CompatWriter
from tlsite.core.render.highlight import CodeBlock, Highlighter
from tlsite.core.render.pages import PLACEHOLDER_PATTERN, Page, SiteTree, render_tree

from .csp import add_csp

log = logging.getLogger("mkdocs.plugins.tlsite")


class TlsiteConfig(base.Config):
    trace = c.Type(str, default="")
    """Path of the trace (file, .gz, .zip, .7z or directory)."""
    prefix = c.Type(str, default="")
    """Sub-folder of the site the report goes to (for embedding in another site)."""
    latest = c.Type(bool, default=False)
    rank = c.Optional(c.Type(int))
    export = c.Optional(c.Type(bool))
    nav = c.Type(bool, default=True)
    """Add the report's pages to the navigation (when the site has an explicit nav)."""


class TlsitePlugin(BasePlugin[TlsiteConfig]):
    """Generate the report pages of one trace during a MkDocs build."""

    def __init__(
        self,
        trace: Trace | None = None,
        raw_log: Any = None,
        on_page: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self._trace = trace
        self._raw_log = raw_log
        self._on_page = on_page
        self.tree: SiteTree | None = None
        self.compat_files: list[str] = []
        self._highlighter: Highlighter | None = None
        self._page_of_uri: dict[str, Page] = {}

    @property
    def trace(self) -> Trace:
        if self._trace is None:
            path = self.config.trace
            if not path:
                raise ValueError("the tlsite plugin needs 'trace: <path of a TORCH_TRACE log>'")
            self._trace = load(
                path,
                latest=self.config.latest,
                rank=self.config.rank,
                export_mode=self.config.export,
            )
        return self._trace

    @property
    def prefix(self) -> str:
        prefix = self.config.prefix.strip("/")
        return f"{prefix}/" if prefix else ""

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        self.tree = render_tree(self.trace, prefix=self.prefix)
        if self.config.nav:
            report_nav = self.tree.nav
            if self.prefix:
                report_nav = [{"Trace report": report_nav}]
            if config.nav is None:
                config.nav = report_nav if not self.prefix else None
            else:
                config.nav = [*config.nav, *report_nav]
        return config

    def on_files(self, files: Files, /, *, config: MkDocsConfig) -> Files:
        assert self.tree is not None
        # start highlighting every code block now, in worker processes, while MkDocs works
        self.trace.store.flush()  # the workers read code from the store's pack file
        self._highlighter = Highlighter(self.trace.store.spill_path("highlight"))
        for page in self.tree.pages:
            uri = f"{self.prefix}{page.path}"
            existing = files.get_file_from_path(uri)
            if existing is not None:
                files.remove(existing)
            files.append(File.generated(config, uri, content=page.markdown))
            self._page_of_uri[uri] = page
            for block in page.blocks.values():
                if isinstance(block, CodeBlock):
                    self._highlighter.submit(block)
        return files

    def on_post_page(self, output: str, /, *, page: Any, config: MkDocsConfig) -> str:
        """Insert the highlighted code (after the search plugin has indexed the page)."""
        if self._on_page is not None:
            self._on_page()
        generated = self._page_of_uri.get(page.file.src_uri)
        if generated is None or not generated.blocks or self._highlighter is None:
            return add_csp(output, page=page, config=config)
        highlighter = self._highlighter
        blocks = generated.blocks

        def insert(match: re.Match[str]) -> str:
            token = match.group(1)
            block = blocks.get(token)
            if block is None:
                return match.group(0)
            if isinstance(block, CodeBlock):
                return highlighter.html(block.key, token)
            return block.html()

        # one pass over the page: replacing block by block copies a big page once per block
        return add_csp(PLACEHOLDER_PATTERN.sub(insert, output), page=page, config=config)

    @event_priority(-50)
    def on_post_build(self, *, config: MkDocsConfig) -> None:
        out = Path(config.site_dir) / self.prefix
        raw_log = self._raw_log
        if raw_log is None and self.config.trace and os.path.isfile(self.config.trace):
            path = self.config.trace

            def raw_log() -> Any:
                return _chunks(path)

        writer = CompatWriter(self.trace, out, raw_log=raw_log)
        self.compat_files = writer.write_all()
        if self._highlighter is not None:
            self._highlighter.close()
            self._highlighter = None

    def on_build_error(self, *, error: Exception) -> None:
        if self._highlighter is not None:
            self._highlighter.close()
            self._highlighter = None


def _chunks(path: str) -> Any:
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            yield chunk

"""One trace's report in a MkDocs build: its pages, their code, its tlparse files.

:class:`ReportPages` does the work the plugin's events hand it: render the trace's pages (their
big parts and code into the payload store), add them to the site's files, highlight their code
while MkDocs works, put each page's parts and code in as it is written, and write the
tlparse-compatible files and the code index. Two roles differ in what the site around the report is:

* :class:`OwnSite`: tlsite's theme is the site's (``tlsite build``, ``tlsite markdown``'s tree
  built with the plugin): the tlparse files are written before the pages (a zip bundle
  compresses them while pages render), each page is converted only when it is written,
  search is indexed by :class:`ReportSearchIndex`, pages outside the nav are written
  from one render of Material's template (:class:`PageStamp`), and the code goes into
  each page once MkDocs has written it (:func:`_put_code`);
* :class:`InOtherSite`: a user's site embeds the report (``- tlsite:`` in their ``mkdocs.yml``,
  their theme): it gets the Markdown extensions and assets the report needs, its plugins may
  read any page's Markdown at any time, the tlparse files are written after the build, and
  the report's pages carry the Content-Security-Policy in that theme.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.utils import nest_paths

from tlsite.core.files_aside import FilesAside
from tlsite.core.model import Trace
from tlsite.core.render.compat import CompatWriter
from tlsite.core.render.highlight import CodeBlock, Highlighter
from tlsite.core.render.page import CODE_PLACEHOLDER, Block, HtmlBlock, insert_parts
from tlsite.core.render.pages import PLACEHOLDER_PATTERN
from tlsite.core.render.templating import bytecode_cache
from tlsite.core.store import PayloadRef, PayloadStore

from .csp import add_csp
from .deferred_page import DeferredPage, conversions
from .prepared import PreparedReport, prepare_report
from .search_index import ReportSearchIndex, use_report_index
from .site_config import (
    ASSET_DIR,
    CODE_INDEX,
    EXTRA_CSS,
    EXTRA_JS,
    SEARCH_CODE_JS,
    THEME_DIR,
    drop_unread_theme_files,
)
from .stamp import Stamping

#: From this many artifacts on, a report of its own has their tlparse files written by a
#: helper process (:class:`FilesAside`) while its pages are rendered: below it, the process
#: start costs more than creating the files takes.
FILES_ASIDE_MIN = 1000
#: ... when their payloads are this small on average (bytes): creating a file is the kernel's
#: fixed cost that a storm's thousands of small files pay; a big trace's fewer, larger files
#: are mostly copying, and a helper for them only takes a core from the highlight and zip
#: helpers.
FILES_ASIDE_MAX_MEAN = 32 * 1024
#: From this much code on a page (bytes, before highlighting), its code goes in once MkDocs has
#: written it (:func:`_put_code`, the kernel copying it); less goes in before: reading a
#: page back and writing it again cost a storm's small pages more than their code.
CODE_AFTER_WRITING_MIN = 256 * 1024
#: Markdown extensions the report's pages use; added to an embedding site that lacks them.
REQUIRED_EXTENSIONS = (
    "admonition",
    "attr_list",
    "md_in_html",
    "pymdownx.details",
    "pymdownx.superfences",
    "tables",
    "toc",
)


def _many_small_files(trace: Trace) -> bool:
    """Whether the trace's tlparse files are a storm's: many, small on average (see
    :data:`FILES_ASIDE_MIN`, :data:`FILES_ASIDE_MAX_MEAN`)."""
    count = size = 0
    for unit in trace.units.values():
        count += len(unit.artifacts)
        size += sum(a.payload.size for a in unit.artifacts if a.payload is not None)
    return count >= FILES_ASIDE_MIN and size <= count * FILES_ASIDE_MAX_MEAN


class ReportPages:
    """The report of the trace ``load()`` returns, built into a MkDocs site (see the module
    docstring; the plugin calls the ``on_*`` methods from MkDocs' events of the same names)."""

    #: Convert each page only when it is written (see :class:`DeferredPage`).
    defer_bodies = True
    #: Put the code into each page of much code (:data:`CODE_AFTER_WRITING_MIN`) once MkDocs
    #: has written it (see :func:`_put_code`): in tlsite's own site, when no other plugin
    #: sees the pages after this one.
    code_after_writing = False

    def __init__(
        self,
        load: Callable[[], tuple[Trace, Any]],
        *,
        prefix: str = "",
        nav: bool = True,
        section: str = "Trace report",
        on_page: Callable[[], None] | None = None,
        on_file: Callable[[str], None] | None = None,
        highlight_workers: int | None = None,
        highlighter: Highlighter | None = None,
    ) -> None:
        """``load`` gives the trace and its raw log (see :class:`CompatWriter`), the first
        time they are needed. ``on_page`` is called as each page is built; ``on_file`` with
        the path of each file of the report as soon as it is written for good (pages one step
        late: MkDocs writes a page after its last event). ``highlighter``: one already at work
        on the trace's blocks; the report closes it."""
        self._load = load
        self._trace: Trace | None = None
        self._raw_log: Any = None
        self.prefix = prefix
        self._nav = nav
        self._section = section
        self._on_page = on_page
        self._on_file = on_file
        self._highlight_workers = highlight_workers
        self._highlighter = highlighter
        self._prepared: PreparedReport | None = None
        self._blocks: dict[str, dict[str, Block]] = {}  # each page's, until it is written
        self._report_uris: set[str] = set()  # the report's pages, in a site with others
        self._auto_nav = False
        self._last_page: str | None = None
        #: the page last written and the code to put into it: (its path, [(token, key)])
        self._code_to_put: tuple[str, list[tuple[str, str]]] | None = None
        #: the tlparse files' writer while a helper writes its files (see _write_compat)
        self._compat: CompatWriter | None = None
        self._conversions = conversions()  # a storm's compile pages: once per shape

    @property
    def trace(self) -> Trace:
        if self._trace is None:
            self._trace, self._raw_log = self._load()
        return self._trace

    @property
    def found(self) -> str:
        """What the report found, in one line for the terminal (see ``PreparedReport.found``)."""
        return self._prepare().found

    @property
    def artifact_copies(self) -> list[str]:
        """tlparse's copies of text the compile pages show in full, by path in the site (see
        ``PreparedReport.artifact_copies``): a zip bundle over GitHub's limit leaves them out."""
        return self._prepare().artifact_copies

    def _prepare(self) -> PreparedReport:
        """The report's pages, rendered into the store the first time they are needed."""
        if self._prepared is None:
            self._prepared = prepare_report(
                self.trace, prefix=self.prefix, defer_bodies=self.defer_bodies
            )
        return self._prepared

    @property
    def _store(self) -> PayloadStore:
        store = self._prepare().store
        assert store is not None, "a prepared report comes with its store opened"
        return store

    # -- configuration and files ------------------------------------------------------------
    def on_config(self, config: MkDocsConfig) -> None:
        if _has_search(config):
            _add_code_search(config)
        if self._nav:
            # without an explicit nav, MkDocs would list every report page: built in on_files
            self._auto_nav = config.nav is None
            if config.nav is not None:
                config.nav = [*config.nav, *self._report_nav(wrap=bool(config.nav))]

    def _report_nav(self, *, wrap: bool) -> list[Any]:
        """The report's navigation, as one section when the site has other pages."""
        nav = self._prepare().nav
        if wrap or self.prefix:
            return [{self._section: nav}]
        return list(nav)

    def on_files(self, files: Files, config: MkDocsConfig) -> Files:
        self._before_pages(files, config)
        report = self._prepare()
        store = self._store
        if self._highlighter is None:
            self._highlighter = Highlighter(
                store.spill_path("highlight"),
                workers=self._highlight_workers,
                code_bytes=report.code_bytes,
            )
        # start highlighting every code block now, in worker processes, while MkDocs works
        highlighter = self._highlighter
        for block in report.code_blocks:
            highlighter.submit(block)
        highlighter.start()
        report.code_blocks = []
        nav_titles = _nav_titles(report.nav)
        report_uris: set[str] = set()
        for page in report.pages:
            uri = f"{self.prefix}{page.path}"
            existing = files.get_file_from_path(uri)
            if existing is not None:
                files.remove(existing)
            # pages reached from index tables, not the nav, are meant to be outside it
            inclusion = InclusionLevel.UNDEFINED if uri in nav_titles else InclusionLevel.NOT_IN_NAV
            generated = File.generated(config, uri, content=page.head, inclusion=inclusion)
            # page.html, not page/index.html: raw-HTML links and the tlparse files expect it
            generated.use_directory_urls = False
            if page.body is not None:  # MkDocs keeps a page a plugin sets (with the nav's title)
                DeferredPage(
                    nav_titles.get(uri),
                    generated,
                    config,
                    body=page.body,
                    convert=self._conversions.get,
                )
            files.append(generated)
            report_uris.add(uri)
            if page.blocks is not None:
                self._blocks[uri] = page.blocks
        self._report_uris = report_uris
        self._after_pages(files, config)
        if self._auto_nav:
            own = [
                f.src_uri
                for f in files.documentation_pages()
                if f.src_uri not in report_uris and f.inclusion.is_in_nav()
            ]
            config.nav = [*nest_paths(own), *self._report_nav(wrap=bool(own))]
        return files

    def _before_pages(self, files: Files, config: MkDocsConfig) -> None:
        """The role's work before the report's pages join the site's files."""

    def _after_pages(self, files: Files, config: MkDocsConfig) -> None:
        """The role's work once they have."""

    # -- pages ------------------------------------------------------------------------------
    def on_nav(self, files: Files) -> None:
        """The navigation is final (the site's files too)."""

    def on_page_markdown(self, page: Any) -> None:
        """A page's front matter is read."""

    def on_env(self, env: Any) -> None:
        """The theme's Jinja environment is made."""

    def on_page_context(self, page: Any, config: MkDocsConfig) -> None:
        """Convert a deferred page, and put in the HTML parts of its text (not its code)."""
        if isinstance(page, DeferredPage):
            page.convert(config)
        blocks = self._blocks.get(page.file.src_uri)
        if blocks is not None:
            page.content = insert_parts(page.content, blocks)

    def on_post_page(self, output: str, page: Any, config: MkDocsConfig) -> str:
        """Insert the highlighted code (after the search plugin has indexed the page)."""
        if self._on_page is not None:
            self._on_page()
        self._page_written(page.file.abs_dest_path)
        if isinstance(page, DeferredPage):
            page.release(config)  # written below
        blocks = self._blocks.pop(page.file.src_uri, None)  # written once
        head = self._policy_in_head(page)
        if blocks is None or self._highlighter is None:
            return add_csp(output, page=page, config=config, head=head)
        highlighter = self._highlighter
        store = self._store
        after_writing = (
            self.code_after_writing
            and _code_bytes(blocks) >= CODE_AFTER_WRITING_MIN
            and self._last_to_see(config)
        )
        later: list[tuple[str, str]] = []  # (token, key) of the code put in once written

        def insert(match: re.Match[str]) -> str:
            token = match.group(1)
            block = blocks.get(token)
            if block is None:
                return match.group(0)
            if isinstance(block, CodeBlock):
                if after_writing:
                    later.append((token, block.key))
                    return match.group(0)
                return highlighter.html(block.key, token)
            if isinstance(block, HtmlBlock) and block.pack == store.pack_file:
                # through the store's open reader: opening the pack for each of a storm's
                # thousands of blocks cost the kernel more than reading them
                return store.read(PayloadRef("", block.size, block.offset))
            return block.html()

        # one pass over the page: replacing block by block copies a big page once per block
        # the policy is computed on the page before the big blocks go in: they hold no script
        # (all escaped), and scanning megabytes of code for <script> tags is the slow part
        output = add_csp(output, page=page, config=config, head=head)
        output = PLACEHOLDER_PATTERN.sub(insert, output)
        if later:
            self._code_to_put = (page.file.abs_dest_path, later)
        return output

    def _policy_in_head(self, page: Any) -> bool:
        """Whether ``page`` gets the policy without the marker tlsite's theme leaves for it."""
        return False

    def _last_to_see(self, config: MkDocsConfig) -> bool:
        """Whether this report's plugin is the last to see a page before MkDocs writes it
        (a plugin after it would see the code's placeholders, not the code)."""
        handlers = config.plugins.events.get("post_page") or [None]
        return getattr(getattr(handlers[-1], "__self__", None), "_report", None) is self

    # -- the end ----------------------------------------------------------------------------
    def on_post_build(self, config: MkDocsConfig) -> None:
        self._page_written(None)
        self._write_code_index(config)

    def _write_code_index(self, config: MkDocsConfig) -> None:
        """Write the words of the pages' code that search finds beside the search index
        (``search-code.js`` loads it from there, also in a site that embeds the report)."""
        report = self._prepared
        if report is None or not _has_search(config):
            return
        index = getattr(config.plugins.get("material/search"), "search_index", None)
        if isinstance(index, ReportSearchIndex):  # sections it holds once for many pages
            report.code_index.shared = index.shared
            report.code_index.shared_pages = index.shared_pages
        if not report.code_index:
            return
        path = os.path.join(config.site_dir, CODE_INDEX)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as out:
            out.write(report.code_index.javascript())
        self._files_written(config.site_dir, [CODE_INDEX])

    def _write_compat(self, config: MkDocsConfig, *, aside: bool = False) -> CompatWriter:
        """Write the tlparse-compatible files (artifacts, payloads, raw.jsonl, raw.log...);
        with ``aside``, a storm's many small ones in a helper process (see
        :data:`FILES_ASIDE_MIN`): the writer's ``finish`` waits for them."""
        out = Path(config.site_dir) / self.prefix
        on_file, folder = self._on_file, str(out)

        def written(path: str) -> None:
            if on_file is not None:
                on_file(os.path.join(folder, path))

        trace = self.trace  # loads the raw log too
        helper = None
        if aside and _many_small_files(trace):
            helper = FilesAside(trace.store.pack_file, folder)
        writer = CompatWriter(trace, out, raw_log=self._raw_log, on_written=written, aside=helper)
        try:
            writer.write_all()
            if helper is not None:
                helper.end()  # every file is handed: it finishes once it has written them
        except BaseException:
            if helper is not None:
                helper.stop()
            raise
        return writer

    def _files_written(self, out: str, written: list[str]) -> None:
        if self._on_file is not None:
            for path in written:  # text: a Path apiece interned every file name
                self._on_file(os.path.join(out, path))

    def _page_written(self, page: str | None) -> None:
        """The previous page is on disk by now; ``page`` will be once MkDocs writes it."""
        if self._code_to_put is not None:
            path, blocks = self._code_to_put
            self._code_to_put = None
            assert self._highlighter is not None
            _put_code(path, blocks, self._highlighter)
        if self._on_file is not None and self._last_page is not None:
            self._hand_page(self._last_page)
        self._last_page = page

    def _hand_page(self, page: str) -> None:
        """Tell ``on_file`` that ``page`` is on disk for good."""
        assert self._on_file is not None
        self._on_file(page)

    def release(self) -> None:
        """Stop the highlight workers (the build is over either way)."""
        if self._compat is not None and self._compat.aside is not None:  # the build failed
            self._compat.aside.stop()
            self._compat = None
        if self._highlighter is not None:
            self._highlighter.close()
            self._highlighter = None


class OwnSite(ReportPages):
    """The report in a site of tlsite's theme (see the module docstring)."""

    code_after_writing = True  # tlsite's plugin is the last to see a page

    def __init__(self, load: Callable[[], tuple[Trace, Any]], **kwargs: Any) -> None:
        super().__init__(load, **kwargs)
        self._stamping = Stamping()
        #: pages written while a helper still writes the tlparse files (see _hand_page)
        self._pages_waiting: list[str] = []

    def _before_pages(self, files: Files, config: MkDocsConfig) -> None:
        # first, so that a zip bundle written meanwhile has them to compress at once; a
        # storm's artifact files are written by a helper while the pages are rendered
        self._compat = self._write_compat(config, aside=True)
        self._index_search(config)
        drop_unread_theme_files(files, config)

    def _after_pages(self, files: Files, config: MkDocsConfig) -> None:
        self._compat_written(wait=False)
        self._release_sources()

    def _compat_written(self, *, wait: bool) -> bool:
        """Whether the tlparse files written aside are all on disk (``wait``: once they
        are), and handed to ``on_file``, with the pages written meanwhile after them."""
        compat = self._compat
        if compat is not None:
            if not wait and not compat.written_aside():
                return False
            self._compat = None
            compat.finish()
            waiting, self._pages_waiting = self._pages_waiting, []
            if self._on_file is not None:
                for page in waiting:
                    self._on_file(page)
        return True

    def _hand_page(self, page: str) -> None:
        # a storm's pages go to the zip after its tlparse files, as when they were waited
        # for before the first page: the build goes on while the helper writes them
        if self._compat_written(wait=False):
            super()._hand_page(page)
        else:
            self._pages_waiting.append(page)

    def on_post_build(self, config: MkDocsConfig) -> None:
        self._compat_written(wait=True)
        super().on_post_build(config)

    def _release_sources(self) -> None:
        """Forget what the pages and tlparse files were made from, now that they are made.

        Each page's body waits in its MkDocs page, and its blocks here, until it is written;
        the trace keeps its statistics and store, not its compile units for the whole of page
        writing.
        """
        assert self._prepared is not None
        self._prepared.pages = []
        if self._trace is not None:
            self._trace.release_units()
            self._trace.store.forget_index()

    def _index_search(self, config: MkDocsConfig) -> None:
        """Index the pages for Material's search with :class:`ReportSearchIndex`
        (``mkdocs serve --dirty`` would need Material's own index)."""
        use_report_index(config, found_elsewhere=self._prepare().code_index.anchors())

    def on_nav(self, files: Files) -> None:
        self._stamping.on_nav(files)

    def on_page_markdown(self, page: Any) -> None:
        self._stamping.on_page_markdown(page)

    def on_env(self, env: Any) -> None:
        # the theme's templates, compiled once: ``tlsite build`` sets it too (in
        # site_config, for every environment of a build), a user's ``mkdocs build`` only here
        env.bytecode_cache = bytecode_cache()
        self._stamping.on_env(env)


class InOtherSite(ReportPages):
    """The report embedded in a user's site, with its theme (see the module docstring).

    Its pages keep the ``page.html`` URLs they have in a report of its own whatever the
    site's ``use_directory_urls`` (their raw-HTML links and the tlparse files rely on them);
    its navigation becomes one section after the site's own pages.
    """

    #: The site's plugins may read any page's Markdown at any time.
    defer_bodies = False

    def on_config(self, config: MkDocsConfig) -> None:
        _add_report_needs(config)
        super().on_config(config)

    def _after_pages(self, files: Files, config: MkDocsConfig) -> None:
        for asset in sorted((THEME_DIR / ASSET_DIR).iterdir()):
            uri = f"{ASSET_DIR}/{asset.name}"
            if asset.is_file() and files.get_file_from_path(uri) is None:
                files.append(File.generated(config, uri, abs_src_path=str(asset)))
        # the tlparse files are written after the build; announce them so that the links
        # to them validate (an empty placeholder is written first, then replaced)
        for path in _compat_targets(self.trace):
            uri = f"{self.prefix}{path}"
            if files.get_file_from_path(uri) is None:
                files.append(File.generated(config, uri, content=b""))

    def _policy_in_head(self, page: Any) -> bool:
        return page.file.src_uri in self._report_uris

    def on_post_build(self, config: MkDocsConfig) -> None:
        super().on_post_build(config)
        self._write_compat(config)


def _put_code(path: str, blocks: list[tuple[str, str]], highlighter: Highlighter) -> None:
    """Put the highlighted code into the page MkDocs wrote at ``path``: each ``(token, key)``
    of ``blocks``, in page order, replaces the token's placeholder (the bytes the page would
    have had with the code put in before it was written, see :meth:`Highlighter.copy_into`)."""
    with open(path, "rb") as page:
        written = page.read()
    position = 0
    with open(path, "wb") as page:
        for token, key in blocks:
            placeholder = CODE_PLACEHOLDER.format(token=token).encode("utf-8")
            at = written.index(placeholder, position)
            page.write(written[position:at])
            highlighter.copy_into(key, token, page)
            position = at + len(placeholder)
        page.write(written[position:])


def _code_bytes(blocks: dict[str, Block]) -> int:
    """How much code a page's blocks hold, before highlighting (bytes; a block shown only in
    its first lines counts whole: a page only of those still goes in after writing)."""
    return sum(block.size for block in blocks.values() if isinstance(block, CodeBlock))


def _nav_titles(nav: Any, title: str | None = None) -> dict[str, str | None]:
    """Every page path in a nav structure (lists of ``{title: path or [children]}``), with
    the title the nav first gives it (None for a bare path)."""
    if isinstance(nav, str):
        return {nav: title}
    titles: dict[str, str | None] = {}
    items = nav.items() if isinstance(nav, dict) else [(None, item) for item in nav or []]
    for key, value in items:
        for path, found in _nav_titles(value, key).items():
            titles.setdefault(path, found)
    return titles


def _compat_targets(trace: Trace) -> list[str]:
    """The files :class:`CompatWriter` writes that report pages link to."""
    paths = ["raw.jsonl", "raw.log", "compile_directory.json", "chromium_events.json"]
    for unit in trace.units.values():
        for artifact in unit.artifacts:
            paths.extend(p for p in (artifact.path, artifact.readable_path) if p)
    paths.extend(f"payloads/{key}.txt" for key in trace.loose_payloads)
    return paths


def _has_search(config: MkDocsConfig) -> bool:
    return any(name in config.plugins for name in ("search", "material/search"))


def _add_code_search(config: MkDocsConfig) -> None:
    """Load the script that searches the code index (:meth:`ReportPages._write_code_index`).

    A polyfill: Material loads those before it starts its search worker, which it wraps. Only
    sites with this plugin get it (a landing page or a Markdown tree has no code index).
    """
    polyfills = config.extra.setdefault("polyfills", [])
    if isinstance(polyfills, list) and SEARCH_CODE_JS not in polyfills:
        polyfills.append(SEARCH_CODE_JS)


def _add_report_needs(config: MkDocsConfig) -> None:
    """Give an embedding site the Markdown extensions and theme files the report uses."""
    for name in REQUIRED_EXTENSIONS:
        if name not in config.markdown_extensions:
            config.markdown_extensions.append(name)
    if EXTRA_CSS not in config.extra_css:
        config.extra_css.append(EXTRA_CSS)
    if EXTRA_JS not in [str(script) for script in config.extra_javascript]:
        config.extra_javascript.append(EXTRA_JS)  # type: ignore[arg-type]

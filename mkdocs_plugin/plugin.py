"""The ``tlsite`` MkDocs plugin: put a trace's report into a MkDocs build.

The same plugin serves ``tlsite build`` (which hands it an already loaded trace) and users
who add ``- tlsite: {trace: path/to/trace.log}`` to their own ``mkdocs.yml``. It wires MkDocs'
events to a :class:`~.report.ReportPages`, in the role the site gives it: a site of tlsite's
theme (:class:`~.report.OwnSite`) or a user's site that embeds the report, with its own
theme (:class:`~.report.InOtherSite`, ``prefix: report`` to put it in a sub-folder).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, event_priority
from mkdocs.structure.files import Files

from tlsite.core import InputError, ResolvedInput, read_log, resolve_input
from tlsite.core.model import Trace
from tlsite.core.redact import MODES, Redactor
from tlsite.core.render.highlight import Highlighter
from tlsite.terminal import safe

from .csp import add_csp_to_template
from .report import REQUIRED_EXTENSIONS, InOtherSite, OwnSite, ReportPages
from .site_config import THEME_DIR

__all__ = ["REQUIRED_EXTENSIONS", "TlsiteConfig", "TlsitePlugin"]


class TlsiteConfig(base.Config):
    trace = c.Type(str, default="")
    """Path of the trace (file, .gz, .zip, .7z or directory)."""
    prefix = c.Type(str, default="")
    """Sub-folder of the site the report goes to (for embedding in another site)."""
    latest = c.Type(bool, default=False)
    rank = c.Optional(c.Type(int))
    export = c.Optional(c.Type(bool))
    nav = c.Type(bool, default=True)
    """Add the report's pages to the navigation."""
    section = c.Type(str, default="Trace report")
    """Title of the navigation section holding the report in a site with other pages."""
    redact = c.Optional(c.Choice(MODES))
    """``paths`` or ``code``: redact the trace as it is read (see ``tlsite build --redact``)."""
    redact_prefixes = c.ListOfItems(c.Type(str), default=[])
    """More path prefixes to replace with ``REDACTED`` when redacting."""


class TlsitePlugin(BasePlugin[TlsiteConfig]):
    """Generate the report pages of one trace during a MkDocs build."""

    def __init__(
        self,
        trace: Trace | None = None,
        raw_log: Any = None,
        on_page: Callable[[], None] | None = None,
        highlight_workers: int | None = None,
        on_file: Callable[[str], None] | None = None,
        highlighter: Highlighter | None = None,
    ) -> None:
        """``trace`` and its ``raw_log``: already read (else read from the configured
        ``trace`` when first needed). The rest is :class:`~.report.ReportPages`'."""
        super().__init__()
        self._trace = trace
        self._raw_log = raw_log
        self._options: dict[str, Any] = {
            "on_page": on_page,
            "on_file": on_file,
            "highlight_workers": highlight_workers,
            "highlighter": highlighter,
        }
        self._report: ReportPages | None = None
        self._config_dir = ""
        self._resolved: ResolvedInput | None = None

    @property
    def report(self) -> ReportPages:
        assert self._report is not None, "the report is made when MkDocs loads the config"
        return self._report

    @property
    def found(self) -> str:
        """What the report found, in one line for the terminal."""
        return self.report.found

    @property
    def artifact_copies(self) -> list[str]:
        """See ``ReportPages.artifact_copies``."""
        return self.report.artifact_copies

    def _trace_and_log(self) -> tuple[Trace, Any]:
        if self._trace is None:
            try:
                self._trace = self._load()
            except InputError as exc:  # one line, escaped as the CLI prints it: no traceback
                raise PluginError(safe(str(exc))) from exc
        return self._trace, self._raw_log

    def _trace_path(self) -> str:
        """The configured trace, relative to ``mkdocs.yml`` (or else to the working folder)."""
        path = os.path.expanduser(self.config.trace)
        if not path:
            raise ValueError("the tlsite plugin needs 'trace: <path of a TORCH_TRACE log>'")
        beside_config = os.path.join(self._config_dir, path)
        if self._config_dir and not os.path.isabs(path) and os.path.exists(beside_config):
            return beside_config
        return path

    def _load(self) -> Trace:
        """Read the configured trace, through the redactor when ``redact`` is set."""
        path = self._trace_path()
        redactor = None
        if self.config.redact:
            redactor = Redactor(self.config.redact, list(self.config.redact_prefixes))
        resolved = resolve_input(path, latest=self.config.latest)
        try:
            trace, log = read_log(
                resolved,
                path,
                rank=self.config.rank,
                export_mode=self.config.export,
                redactor=redactor,
            )
        except BaseException:
            resolved.close()
            raise
        # raw.log is the bytes read (redacted, if so): the log stays readable until the build ends
        self._resolved = resolved
        self._raw_log = log
        return trace

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        self._config_dir = os.path.dirname(config.config_file_path or "")
        own_theme = os.path.realpath(THEME_DIR) in {os.path.realpath(d) for d in config.theme.dirs}
        prefix = self.config.prefix.strip("/")
        role = OwnSite if own_theme else InOtherSite
        self._report = role(
            self._trace_and_log,
            prefix=f"{prefix}/" if prefix else "",
            nav=self.config.nav,
            section=self.config.section,
            **self._options,
        )
        self._report.on_config(config)
        return config

    def on_files(self, files: Files, /, *, config: MkDocsConfig) -> Files:
        return self.report.on_files(files, config)

    def on_nav(self, nav: Any, /, *, config: MkDocsConfig, files: Files) -> Any:
        self.report.on_nav(files)
        return nav

    def on_page_markdown(
        self, markdown: str, /, *, page: Any, config: MkDocsConfig, files: Files
    ) -> str:
        self.report.on_page_markdown(page)
        return markdown

    def on_env(self, env: Any, /, *, config: MkDocsConfig, files: Files) -> Any:
        self.report.on_env(env)
        return env

    @event_priority(100)  # first: the search plugin indexes the page's HTML and headings
    def on_page_context(self, context: Any, /, *, page: Any, config: MkDocsConfig, nav: Any) -> Any:
        self.report.on_page_context(page, config)
        return context

    def on_post_page(self, output: str, /, *, page: Any, config: MkDocsConfig) -> str:
        return self.report.on_post_page(output, page, config)

    def on_post_template(
        self, output_content: str, /, *, template_name: str, config: MkDocsConfig
    ) -> str:
        """Theme templates built as pages (``404.html``) get the same policy as report pages."""
        return add_csp_to_template(output_content, template_name=template_name, config=config)

    @event_priority(-50)
    def on_post_build(self, *, config: MkDocsConfig) -> None:
        self.report.on_post_build(config)
        self.release()

    def on_build_error(self, *, error: Exception) -> None:
        self.release()

    def release(self) -> None:
        """Stop the helper processes and close the input (the build is over either way)."""
        if self._report is not None:
            self._report.release()
        if self._resolved is not None:
            self._resolved.close()
            self._resolved = None

"""One copy of the theme for a whole multi-rank site.

A job's site is a landing page at its root and a full report per rank in ``rank_<N>/`` (plus
``diff_<a>_<b>/`` sites), each built by MkDocs as a site of its own, so each had a copy of the
theme's files (Material's and tlsite's ``assets/``): the same files sixteen times in a
16-rank job's folder and zip. The sites below the root load the root's instead, where the
landing page's build put them (:func:`~tlsite.core.render.page.theme_file_url`); their pages
are otherwise unchanged.
"""

from __future__ import annotations

from typing import Any

from jinja2 import pass_context
from markupsafe import Markup
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import Files
from mkdocs.utils.templates import url_filter

from tlsite.core.render.page import theme_file_url


class InJob(BasePlugin):
    """A site one folder below a job's root (a rank's report, a diff of two ranks): its
    pages load the theme's files from the root, and it has no ``404.html`` or sitemap (a
    web server answers with the root's ``404.html``; crawlers read the root's sitemap)."""

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        config.theme.static_templates.difference_update(_ROOT_ONLY)
        return config

    def on_files(self, files: Files, /, *, config: MkDocsConfig) -> Files:
        # the theme's files, and its templates of the root's pages (no longer rendered, they
        # would be copied as they are)
        for file in [f for f in files if f.src_uri.startswith(_ASSETS) or f.src_uri in _ROOT_ONLY]:
            files.remove(file)
        return files

    def on_env(self, env: Any, /, *, config: MkDocsConfig, files: Files) -> Any:
        env.filters["url"] = _job_url
        env.filters["script_tag"] = _job_script_tag
        return env


#: The folder of a site's theme files (Material's and tlsite's).
_ASSETS = "assets/"
#: The theme's pages only the job's root has (``sitemap.xml`` also writes ``sitemap.xml.gz``).
_ROOT_ONLY = ("404.html", "sitemap.xml")


@pass_context
def _job_url(context: Any, value: str) -> str:
    """MkDocs' ``url`` filter, with the theme's files at the job's root."""
    url = url_filter(context, value)
    if str(value).startswith(_ASSETS) and "://" not in url and not url.startswith("/"):
        return theme_file_url(url, in_job=True)
    return url


@pass_context
def _job_script_tag(context: Any, extra_script: Any) -> Markup:
    """MkDocs' ``script_tag`` filter (``extra_javascript``), with :func:`_job_url`."""
    tag = Markup('<script src="{0}"').format(_job_url(context, str(extra_script)))
    if not isinstance(extra_script, str):
        tag += Markup(' type="{0}"').format(extra_script.type) if extra_script.type else ""
        tag += Markup(" defer") if extra_script.defer else ""
        tag += Markup(" async") if extra_script.async_ else ""
    return tag + Markup("></script>")

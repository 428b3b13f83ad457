"""Build the site of ``tlsite diff``: a Markdown tree of the diff pages, built by MkDocs with
the offline configuration and the report pages' Content-Security-Policy, plus ``diff.json``.

The pages are plain Markdown (:mod:`tlsite.core.render.diff_pages`), so the tree builds the
same with ``mkdocs build``; only the policy is added by the small plugin here.
"""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path
from typing import Any

from mkdocs.plugins import BasePlugin

from tlsite.core.analysis.diff import TraceDiff
from tlsite.core.cleanup import scratch_folder
from tlsite.core.render.diff_pages import render_pages

from .csp import add_csp, add_csp_to_template
from .site_config import build_site, site_config

DIFF_JSON = "diff.json"


class _DiffPolicy(BasePlugin):
    """The report pages' Content-Security-Policy: diff pages show trace text too."""

    def on_post_page(self, output: str, /, *, page: Any, config: Any) -> str:
        return add_csp(output, page=page, config=config)

    def on_post_template(self, output_content: str, /, *, template_name: str, config: Any) -> str:
        return add_csp_to_template(output_content, template_name=template_name, config=config)


def diff_json(diff: TraceDiff) -> str:
    """``diff.json``: keys sorted, so two runs of the same diff write the same bytes."""
    return json.dumps(diff.as_json(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_diff_tree(diff: TraceDiff, docs: Path) -> list[str]:
    """Write the pages and ``diff.json`` into ``docs``; returns the pages written."""
    written = []
    for page in render_pages(diff):
        dest = docs / page.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(page.markdown, encoding="utf-8")
        written.append(page.path)
    (docs / DIFF_JSON).write_text(diff_json(diff), encoding="utf-8")
    return written


def build_diff_site(diff: TraceDiff, site_dir: Path) -> int:
    """Write the diff site into ``site_dir`` (which must not exist yet); returns its pages."""
    logging.getLogger("mkdocs").setLevel(logging.ERROR)
    with scratch_folder("diff") as scratch:
        docs = Path(scratch) / "docs"
        docs.mkdir()
        pages = write_diff_tree(diff, docs)
        title = f"tlsite diff: {diff.before.source} → {diff.after.source}"
        config = site_config(
            docs_dir=str(docs), site_dir=str(site_dir), site_name=html.escape(title)
        )
        config["nav"] = [{"What changed": "index.md"}]
        policy = _DiffPolicy()
        policy.load_config({})
        build_site(config, config_dir=scratch, extra_plugins={"tlsite_csp": policy})
    return len(pages)

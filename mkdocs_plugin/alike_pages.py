"""Pages that the ranks of a job have alike, converted by Python-Markdown once per process.

The ranks of a job compiled the same program: a rank's config page, and many of its compile
pages, have the same Markdown as the rank built before it in the same worker process.
:func:`render_alike` converts such a page once and gives the next ranks the same result.

What the conversion read besides the Markdown is checked too: MkDocs resolves each relative
link against the site's files (another rank may lack a page the link names), so the links
looked up, and what they found (the target's URL and whether it is excluded), are kept with
the result, and a page reuses it only when its own site answers the same.

Off by default: a site of its own converts each page once, and keeping pages would only cost
memory. A job's rank workers turn it on (:func:`share_alike_pages`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

#: The most HTML kept (in characters) for the next ranks; the oldest pages go first.
MAX_KEPT_CHARS = 32 * 1024 * 1024


@dataclass
class _Converted:
    """One page's conversion, and the lookups of link targets it depended on."""

    lookups: dict[str, tuple[str, bool] | None]  # target src_uri -> (url, excluded) or None
    content: str
    toc: Any
    title: str | None
    anchors: set[str]
    links_to_anchors: dict[str, dict[str, str]] | None  # by target src_uri


class _Lookups:
    """The site's files as Python-Markdown's link resolver sees them, noting each lookup."""

    def __init__(self, files: Files) -> None:
        self._files = files
        self.seen: dict[str, tuple[str, bool] | None] = {}

    def get_file_from_path(self, path: str) -> File | None:
        found = self._files.get_file_from_path(path)
        self.seen[path] = _what(found)
        return found


def _what(file: File | None) -> tuple[str, bool] | None:
    return None if file is None else (file.url, file.inclusion.is_excluded())


#: By (page src_uri, :func:`_key`), oldest first; None: not sharing.
_kept: dict[tuple[str, str], _Converted] | None = None
_kept_chars = 0


def share_alike_pages() -> None:
    """From now on, keep each page's conversion for the next site this process builds."""
    global _kept
    if _kept is None:
        _kept = {}


def render_alike(page: Page, config: MkDocsConfig, files: Files) -> None:
    """``Page.render(page, config, files)``, or the same result taken from a page of an
    earlier site with the same path, Markdown and link targets."""
    if _kept is None:
        Page.render(page, config, files)
        return
    key = (page.file.src_uri, _key(page, config))
    kept = _kept.get(key)
    if kept is not None and _same_targets(kept, files):
        page.content, page.toc, page._title_from_render = kept.content, kept.toc, kept.title
        page.present_anchor_ids = set(kept.anchors)
        if kept.links_to_anchors is not None:
            page.links_to_anchors = {
                files.get_file_from_path(uri): dict(anchors)  # type: ignore[misc]
                for uri, anchors in kept.links_to_anchors.items()
            }
        return
    lookups = _Lookups(files)
    Page.render(page, config, lookups)  # type: ignore[arg-type]
    _keep(page, key, lookups.seen)


def _key(page: Page, config: MkDocsConfig) -> str:
    """What the conversion depends on besides the link targets: the Markdown, the page's
    place and the Markdown extensions' configuration."""
    digest = hashlib.md5(usedforsecurity=False)
    for part in (
        page.markdown or "",
        page.file.url,
        repr(config["markdown_extensions"]),
        repr(config["mdx_configs"]),
    ):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def _same_targets(kept: _Converted, files: Files) -> bool:
    return all(_what(files.get_file_from_path(uri)) == seen for uri, seen in kept.lookups.items())


def _keep(page: Page, key: tuple[str, str], lookups: dict[str, tuple[str, bool] | None]) -> None:
    """Keep the page's conversion (the oldest go when they pass :data:`MAX_KEPT_CHARS`)."""
    global _kept_chars
    assert _kept is not None
    content = page.content or ""
    if len(content) > MAX_KEPT_CHARS:
        return
    links: dict[str, dict[str, str]] | None = None
    if page.links_to_anchors is not None:
        links = {f.src_uri: dict(a) for f, a in page.links_to_anchors.items()}
    anchors = set(page.present_anchor_ids or ())
    old = _kept.pop(key, None)
    _kept[key] = _Converted(lookups, content, page.toc, page._title_from_render, anchors, links)
    _kept_chars += len(content) - (len(old.content) if old is not None else 0)
    while _kept_chars > MAX_KEPT_CHARS:
        _kept_chars -= len(_kept.pop(next(iter(_kept))).content)

"""Pages that the ranks of a job have alike, converted by Python-Markdown once per process.

The ranks of a job compiled the same program: a rank's config page, and many of its compile
pages, have the same Markdown as the rank built before it in the same worker process.
:func:`render_alike` converts such a page once and gives the next ranks the same result;
:func:`sections_alike` divides the same HTML into search sections once.

What the conversion read besides the Markdown is checked too: MkDocs resolves each relative
link against the site's files (another rank may lack a page the link names), so the links
looked up, and what they found (the target's URL and whether it is excluded), are kept with
the result, and a page reuses it only when its own site answers the same.

Off by default: a site of its own converts each page once, and keeping pages would only cost
memory. A job's ranks are built within :func:`alike_pages_shared`.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

T = TypeVar("T")

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


class _Kept:
    """Values kept by key, oldest first, up to :data:`MAX_KEPT_CHARS` of their HTML."""

    def __init__(self) -> None:
        self._values: dict[Any, tuple[Any, int]] = {}
        self._chars = 0

    def get(self, key: Any) -> Any:
        found = self._values.get(key)
        return None if found is None else found[0]

    def put(self, key: Any, value: Any, chars: int) -> None:
        if chars > MAX_KEPT_CHARS:
            return
        old = self._values.pop(key, None)
        self._chars += chars - (old[1] if old is not None else 0)
        self._values[key] = (value, chars)
        while self._chars > MAX_KEPT_CHARS:
            self._chars -= self._values.pop(next(iter(self._values)))[1]


#: Conversions by (page src_uri, :func:`_key`), and search sections by the HTML's digest,
#: kept from one rank's site to the next in the same process.
_converted = _Kept()
_sections = _Kept()
_sharing = False


@contextlib.contextmanager
def alike_pages_shared() -> Iterator[None]:
    """Within: convert each page, and divide its HTML into search sections, once for the
    sites of this process's ranks (the next rank's site reuses what the last ones did)."""
    global _sharing
    _sharing = True
    try:
        yield
    finally:
        _sharing = False


def forget_alike_pages() -> None:
    """Drop what the ranks built in this process kept (the job is built)."""
    global _converted, _sections
    _converted, _sections = _Kept(), _Kept()


def render_alike(page: Page, config: MkDocsConfig, files: Files) -> None:
    """``Page.render(page, config, files)``, or the same result taken from a page of an
    earlier site with the same path, Markdown and link targets."""
    if not _sharing:
        Page.render(page, config, files)
        return
    key = (page.file.src_uri, _key(page, config))
    kept = _converted.get(key)
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
    content = page.content or ""
    links: dict[str, dict[str, str]] | None = None
    if page.links_to_anchors is not None:
        links = {f.src_uri: dict(a) for f, a in page.links_to_anchors.items()}
    anchors = set(page.present_anchor_ids or ())
    converted = _Converted(lookups, content, page.toc, page._title_from_render, anchors, links)
    _converted.put(key, converted, len(content))


def sections_alike(html: str, split: Callable[[str], list[T]]) -> list[T]:
    """``split(html)`` (a page's search sections), the same list for the same HTML while
    pages alike are shared (the sections are only read)."""
    if not _sharing:
        return split(html)
    key = hashlib.md5(html.encode("utf-8", "surrogatepass"), usedforsecurity=False).digest()
    found = _sections.get(key)
    if found is None:
        found = split(html)
        _sections.put(key, found, len(html))
    return found

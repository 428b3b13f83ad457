"""Write the pages outside the navigation from one render of Material's page template.

Material's ``main.html`` is most of the cost of writing a small page, and a report has one page
per compile id. For pages outside the navigation at the same depth, its output differs only where
it shows the page's title, the link to its first heading (the skip link), its table of contents
and its content: the header, navigation, scripts and footer are the same bytes. A
:class:`PageStamp` renders the template once per *shape* (depth, where the title comes from,
whether the content has its own ``<h1>``) with sentinel values in those places, cuts the output
at them, and writes every other page of that shape by filling the cuts: titles as the template
prints them (as is and through ``striptags``), the table of contents with Material's own
``partials/toc-item.html`` in the same environment, so the markup stays Material's.

The cut text is written with its whitespace collapsed (:func:`collapse_whitespace`): Material's
templates indent the chrome of every page, which a browser lays out the same with one space or
line break per run, and a shape's chrome is collapsed once, not each page. Apart from that it
must not change a byte, so a page is stamped only when nothing else of it reaches the
template (:meth:`PageStamp.select`): front matter Material does not read, no canonical or edit
URL, outside the navigation, in a folder no navigation page or theme file shares (links from it
are then the same as from any page of its depth); and its table of contents opens with the
``<h1>`` (:meth:`PageStamp.__call__`). A sentinel left where the stamp does not fill it (the
template showed the value some other way) refuses the shape, and the first page of every shape
is also rendered in full and compared (before collapsing): a shape whose stamp differs is
never used. Every other page is rendered by Material as usual.

The plugin selects :data:`STAMP_TEMPLATE` for the pages :meth:`PageStamp.select` accepts and
makes the stamp the template global ``tlsite_stamp``; the template calls it and falls back to
``main.html`` when it answers None.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jinja2
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page
from mkdocs.structure.toc import AnchorLink, TableOfContents

log = logging.getLogger("mkdocs.plugins.tlsite")

#: The template a selectable page is rendered with (``themes/material``): the stamp, or else
#: ``main.html`` itself.
STAMP_TEMPLATE = "tlsite-stamp.html"
#: Off in tests that compare stamped sites with fully rendered ones.
ENABLED = True

#: Front matter keys no Material template reads (``template`` only as set to the stamp's).
_INERT_META = frozenset({"title", "render_macros", "template"})
#: First folders the theme links to without a file of the site there (feeds).
_LINKED_NAMES = frozenset({"assets", "feed_rss_created.xml", "feed_rss_updated.xml"})
_TOC_ITEM = "partials/toc-item.html"
#: What :func:`collapse_whitespace` leaves as it is: a tag, or a whole element whose text a
#: browser shows (or runs) as written.
_KEPT = re.compile(
    r"<(script|style|pre|textarea)\b.*?</\1\s*>|<(?:[^>\"']|\"[^\"]*\"|'[^']*')*>", re.S | re.I
)
_SPACE = re.compile(r"[ \t\n\r\f]+")


@dataclass(frozen=True)
class _Cut:
    """A template's output for a shape: ``text[0]``, a slot, ``text[1]``, a slot, ..."""

    text: list[str]
    slots: list[str]  # names of the values that go between the texts
    separator: str  # what the template writes between two table-of-contents items
    #: a page's: ``toc-item.html``'s cuts for an item without children and for one with
    items: tuple[_Cut, _Cut] | None = None

    def collapsed(self) -> _Cut:
        """The same chrome with its insignificant whitespace collapsed
        (:func:`collapse_whitespace`), cut at the same places."""
        mark = f"tlsite{secrets.token_hex(8)}"
        joined = "".join(
            f"{text}{mark}{i}." if i < len(self.slots) else text for i, text in enumerate(self.text)
        )
        text = re.split(f"{mark}\\d+\\.", collapse_whitespace(joined))
        if len(text) != len(self.text):
            raise AssertionError("collapsing whitespace lost a slot of the page's shape")
        items = (
            None if self.items is None else (self.items[0].collapsed(), self.items[1].collapsed())
        )
        return _Cut(text, self.slots, collapse_whitespace(self.separator), items)

    def fill(self, values: dict[str, str]) -> str:
        """The output with ``values`` (by slot name) in the slots."""
        parts = [self.text[0]]
        for slot, text in zip(self.slots, self.text[1:], strict=True):
            parts += (values[slot], text)
        return "".join(parts)


class _Sentinel:
    """The page as the template sees it, with sentinels where pages of its shape differ."""

    def __init__(self, page: Page, **values: Any) -> None:
        self._page = page
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._page, name)


class PageStamp:
    """Material's page template, rendered once per page shape (see the module docstring)."""

    def __init__(self, files: Iterable[File]) -> None:
        # the first folders of what the template links to: navigation pages and theme files
        linked = set(_LINKED_NAMES)
        for file in files:
            if not file.is_documentation_page() or file.inclusion.is_in_nav():
                linked.add(file.url.split("/", 1)[0])
        self._linked = frozenset(linked)
        self._cuts: dict[tuple[Any, ...], _Cut | None] = {}
        self.stamped = 0  # pages written from a cut

    def select(self, page: Page) -> bool:
        """Whether only the page's title, table of contents and content can reach the
        template (its front matter read; the rest is checked as it is written)."""
        parts = page.url.split("/")
        return (
            ENABLED
            and page.file.inclusion is InclusionLevel.NOT_IN_NAV
            and set(page.meta) <= _INERT_META
            and page.meta.get("template", STAMP_TEMPLATE) == STAMP_TEMPLATE
            and not page.is_homepage
            and page.canonical_url is None
            and page.edit_url is None
            and (len(parts) == 1 or parts[0] not in self._linked)
        )

    @jinja2.pass_context
    def __call__(self, context: jinja2.runtime.Context) -> str | None:
        """The page's HTML as ``main.html`` writes it, or None: render ``main.html``."""
        page = context["page"]
        shape = _shape(page)
        if shape is None:
            return None
        key = (context["base_url"], *shape)
        env, values = context.environment, context.get_all()
        if key in self._cuts:
            cut = self._cuts[key]
            if cut is None:
                return None
            self.stamped += 1
            return _fill(cut, page, env, values)
        cut = _cut(page, shape, env, values)
        full = env.get_template("main.html").render(values)
        if cut is not None and _fill(cut, page, env, values) != full:
            log.debug("tlsite: the page template's stamp differs for %s", page.url)
            cut = None
        self._cuts[key] = cut = cut.collapsed() if cut is not None else None
        return full if cut is None else _fill(cut, page, env, values)


class Stamping:
    """A site's pages written with the stamp: what three MkDocs events do (a report's site and
    a comparison site both hand them here)."""

    def __init__(self) -> None:
        self.stamp: PageStamp | None = None

    def on_nav(self, files: Files) -> None:
        self.stamp = PageStamp(files)  # tlsite's theme: the stamp knows what it renders

    def on_page_markdown(self, page: Page) -> None:
        """Render with the stamp the pages it may write (their front matter is read by now)."""
        if self.stamp is not None and self.stamp.select(page):
            page.meta["template"] = STAMP_TEMPLATE

    def on_env(self, env: jinja2.Environment) -> None:
        if self.stamp is not None:
            env.globals["tlsite_stamp"] = self.stamp


def collapse_whitespace(html: str) -> str:
    """``html`` with every run of whitespace in its text written as one line break (if it had
    one) or one space, which a browser lays out the same: not inside tags, nor in scripts,
    styles, preformatted text or text areas. Material's templates indent the page chrome, and
    every page of a storm would carry that indentation in the zip."""

    def one(match: re.Match[str]) -> str:
        return "\n" if "\n" in match.group(0) or "\r" in match.group(0) else " "

    parts, end = [], 0
    for kept in _KEPT.finditer(html):
        parts += (_SPACE.sub(one, html[end : kept.start()]), kept.group(0))
        end = kept.end()
    parts.append(_SPACE.sub(one, html[end:]))
    return "".join(parts)


def _shape(page: Page) -> tuple[bool, bool] | None:
    """What of the page decides the template's text around its values: whether its front
    matter has the title, and its content a ``<h1>``; None for a page to render in full."""
    title, toc, meta = page.title, page.toc, page.meta
    if not isinstance(title, str) or not title or not isinstance(page.content, str):
        return None
    if "title" in meta and meta["title"] != title:
        return None
    first = next(iter(toc), None)  # Material skips to it and lists its children
    if first is None or first.level != 1 or not first.children:
        return None
    if not first.url.startswith("#") or "\\" in first.url:  # the `url` filter keeps it as is
        return None
    return "title" in meta, "<h1" in page.content


def _cut(page: Page, shape: tuple[bool, bool], env: Any, values: dict[str, Any]) -> _Cut | None:
    """Render the template with sentinels for ``page``'s shape and cut it at them."""
    meta_title, own_h1 = shape
    mark = f"tlsite{secrets.token_hex(8)}"
    title = f"{mark}T<b>x</b>"  # as is, and through striptags: two different texts
    first = AnchorLink(f"{mark}H", f"{mark}S", 1)
    items = [AnchorLink(f"{mark}A", f"{mark}a", 2), AnchorLink(f"{mark}B", f"{mark}b", 2)]
    first.children = items
    content = f"<h1>{mark}C</h1>" if own_h1 else f"{mark}C"
    depth = page.url.count("/")
    sentinel = _Sentinel(
        page,
        title=title,
        meta={**page.meta, "title": title} if meta_title else page.meta,
        toc=TableOfContents([first]),
        content=content,
        url="/".join([mark] * depth + [f"{mark}.html"]),  # links from a folder of its own
    )
    staged = {**values, "page": sentinel}
    output = env.get_template("main.html").render(staged)
    toc_item = env.get_template(_TOC_ITEM)
    first_item, second_item = (toc_item.render({**staged, "toc_item": i}) for i in items)
    start = output.find(first_item)
    end = output.find(second_item, start + len(first_item))
    if start < 0 or end < 0:
        return None
    toc = output[start : end + len(second_item)]
    separator = output[start + len(first_item) : end]
    slots = {
        toc: "toc",
        title: "title",
        env.filters["striptags"](title): "stripped_title",
        first.url: "skip",
        content: "content",
    }
    split = _split(output, slots, separator, mark)
    item_cuts = _item_cuts(env, staged, mark)
    if split is None or item_cuts is None:
        return None  # the template shows a value in a way the stamp does not fill (or case)
    return _Cut(*split, separator, item_cuts)


def _split(
    output: str, slots: dict[str, str], separator: str, mark: str
) -> tuple[list[str], list[str]] | None:
    """``output`` cut at the sentinel texts ``slots`` names: its texts and their slots' names;
    None if a sentinel is left elsewhere (in the texts or the ``separator``)."""
    pattern = "|".join(re.escape(text) for text in sorted(slots, key=len, reverse=True))
    pieces = re.split(f"({pattern})", output)
    text, found = pieces[::2], [slots[piece] for piece in pieces[1::2]]
    if any(mark in piece.lower() for piece in (separator, *text)):
        return None
    return text, found


def _item_cuts(env: Any, values: dict[str, Any], mark: str) -> tuple[_Cut, _Cut] | None:
    """``toc-item.html`` rendered with sentinels for an item without children and for one
    with (its children's items a slot), and cut at them."""
    template = env.get_template(_TOC_ITEM)

    def item(name: str, *children: AnchorLink) -> AnchorLink:
        link = AnchorLink(f"{mark}{name}<b>x</b>", f"{mark}{name}u", 2)
        link.children = list(children)
        return link

    child_a, child_b = item("A"), item("B")
    cuts = []
    for sentinel in (item("L"), item("P", child_a, child_b)):
        output = template.render({**values, "toc_item": sentinel})
        slots = {sentinel.title: "title", _label(env, sentinel.title): "label", sentinel.url: "url"}
        separator = ""
        if sentinel.children:
            first, second = (template.render({**values, "toc_item": c}) for c in (child_a, child_b))
            start = output.find(first)
            end = output.find(second, start + len(first))
            if start < 0 or end < 0:
                return None
            separator = output[start + len(first) : end]
            slots[output[start : end + len(second)]] = "children"
        split = _split(output, slots, separator, mark)
        if split is None:
            return None
        cuts.append(_Cut(*split, separator))
    return cuts[0], cuts[1]


def _label(env: Any, title: str) -> str:
    """A table-of-contents item's title as ``toc-item.html`` writes it in an attribute."""
    return str(env.filters["e"](env.filters["striptags"](title)))


def _item_html(cut: _Cut, item: AnchorLink, env: Any, values: dict[str, Any]) -> str:
    """A table-of-contents item (and its children) from a page shape's cut."""
    if cut.items is None or hasattr(item, "typeset"):  # a value the cut does not fill
        return env.get_template(_TOC_ITEM).render({**values, "toc_item": item})
    leaf, parent = cut.items
    filled = {"title": item.title, "label": _label(env, item.title), "url": item.url}
    if not item.children:
        return leaf.fill(filled)
    children = (_item_html(cut, child, env, values) for child in item.children)
    return parent.fill({**filled, "children": parent.separator.join(children)})


def _fill(cut: _Cut, page: Page, env: Any, values: dict[str, Any]) -> str:
    """``page``'s HTML from its shape's cut."""
    first = next(iter(page.toc))
    return cut.fill(
        {
            "title": page.title,
            "stripped_title": env.filters["striptags"](page.title),
            "skip": first.url,
            "toc": cut.separator.join(
                _item_html(cut, item, env, values) for item in first.children
            ),
            "content": page.content,
        }
    )

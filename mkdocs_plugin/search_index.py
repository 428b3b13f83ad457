"""The search index of a report of its own, indexed as Material does, without its HTML parser.

Material's search plugin splits each page's HTML into sections (one per heading with an id)
with :class:`html.parser.HTMLParser`, whose pure-Python tokenizer was a sixth of a recompile
storm's build. :class:`ReportSearchIndex` keeps Material's rules (which tags are kept, where
whitespace collapses, which headings open a section, what ``data-search-exclude`` leaves
out) and applies them to the tokens of one regular expression, reading a tag's attributes
only where they can change a section; a report's pages are HTML that Python-Markdown and
tlsite's templates wrote, so they hold no script, style or malformed tag that would make the
two readings differ (tests compare them on real traces). Each entry is kept as its JSON
text, and the index is written as Material writes it.
"""

from __future__ import annotations

import json
import re
from html import escape, unescape
from typing import Any

from material.plugins.search import plugin as material_search
from material.plugins.search.plugin import SearchIndex

from .alike_pages import sections_alike
from .page_shapes import Shapes

#: One token of HTML: a comment or declaration (ignored), a tag, or text. A start tag takes
#: the text and end tag after it when they end its element (``<td>x</td>``, a leaf): the
#: same three tokens, matched at once.
_TOKEN = re.compile(
    r"<!--.*?(?:-->|\Z)|<[!?][^>]*>?"
    r"|<(/)?([a-zA-Z][^\t\n\r\f />\x00]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>"
    r"(?(1)|(?:([^<]*)</\2>)?)"
    r"|([^<]+|<)",
    re.S,
)
_ATTRIBUTE = re.compile(r"""([^\s/>"'=][^\s/=>]*)(\s*=+\s*("[^"]*"|'[^']*'|(?!["'])[^>\s]*))?""")
#: Text up to the end of an element whose content is not HTML (HTMLParser's CDATA elements).
_CDATA_END = {tag: re.compile(rf"</{tag}\s*>", re.I) for tag in ("script", "style")}

_HEADINGS = frozenset(f"h{level}" for level in range(1, 7))
_KEEP = frozenset(("p", "code", "pre", "li", "ol", "ul", "sub", "sup"))  # Material's Parser.keep
_ALWAYS_SKIPPED = ("object", "script", "style")
_VOID = frozenset(material_search.void)


class _Section:
    __slots__ = ("depth", "excluded", "id", "tag", "text", "title")

    def __init__(self, tag: str, depth: float = 0, *, excluded: bool = False) -> None:
        self.tag = tag
        self.depth = depth
        self.excluded = excluded
        self.id: str | None = None
        self.text: list[str] = []
        self.title: list[str] = []


def _attributes(source: str) -> dict[str, str | None]:
    """A start tag's attributes as HTMLParser gives them (names lowercased, values unescaped)."""
    found: dict[str, str | None] = {}
    for name, assigned, value in _ATTRIBUTE.findall(source):
        if assigned and value[:1] in ("'", '"') and value[:1] == value[-1:] and len(value) > 1:
            value = value[1:-1]
        found[name.lower()] = unescape(value) if assigned else None
    return found


def _attributes_matter(tag: str, source: str) -> bool:
    """Whether a start tag's attributes (``source``) may change the sections: leave its
    element out (``data-search-exclude``, ``class="linenodiv"``; an entity may spell either)
    or make it a heading's permalink (``<a class="headerlink">``)."""
    return (
        "linenodiv" in source
        or "&" in source
        or "data-search-exclude" in source.lower()
        or (tag == "a" and "headerlink" in source)
    )


def _section_texts(found: list[_Section]) -> list[str | None]:
    """A page's sections as the texts :class:`~.page_shapes.Shapes` keeps (5 a section)."""
    texts: list[str | None] = []
    for section in found:
        title = "".join(section.title) if section.title else None
        texts += (section.tag, "x" if section.excluded else "", section.id, title)
        texts.append("".join(section.text))
    return texts


def _sections_made(texts: list[str | None]) -> list[_Section]:
    """The sections :func:`_section_texts` lists."""
    found = []
    for at in range(0, len(texts), 5):
        tag, excluded, anchor, title, text = texts[at : at + 5]
        assert tag is not None and text is not None
        section = _Section(tag, excluded=bool(excluded))
        section.id, section.title, section.text = anchor, [] if title is None else [title], [text]
        found.append(section)
    return found


def sections(html: str) -> list[_Section]:
    """``html`` divided into sections by Material's rules (``material.plugins.search``'s
    ``Parser``: the same state, kept as tag names; Material compares elements by tag)."""
    return _Sectioner().feed(html)


#: Tags whose start :meth:`_Sectioner.feed` always leaves to :meth:`_Sectioner.start`.
_STARTS_APART = _HEADINGS | _VOID | set(_CDATA_END)


class _Sectioner:
    """The state of :func:`sections`: the open elements, how many of them are skipped."""

    def __init__(self) -> None:
        self.tags: list[str] = []  # the open elements' tags
        self.open: dict[str, int] = {}  # tag -> open elements with it
        self.headerlinks: list[int] = []  # the depths of the open <a class="headerlink">
        self.skip = set(_ALWAYS_SKIPPED)  # tags whose elements' content is left out
        self.skipped = 0  # open elements whose tag is in ``skip``
        self.data: list[_Section] = []
        self.section: _Section | None = None

    def feed(self, html: str) -> list[_Section]:
        """Divide ``html``. Most of a page's tokens are text, and tags (a table's cells, a
        code block's spans, paragraphs) whose attributes do not matter: their start and end
        are handled in the token loop, as :meth:`start` and :meth:`end` would handle them;
        the other tags by those methods."""
        at: int | None = 0
        while at is not None:
            at = self._feed_from(html, at)
        return self.data

    def _feed_from(self, html: str, at: int) -> int | None:
        """Divide ``html`` from ``at`` to its end, or to the end of the first element whose
        content is not HTML (``<script>``, ``<style>``): then return where to go on."""
        tags, open_, skip = self.tags, self.open, self.skip
        for match in _TOKEN.finditer(html, at):
            closing, tag, source, leaf_text, chunk = match.groups()
            if chunk is not None:
                if not self.skipped:
                    self.text(unescape(chunk) if "&" in chunk else chunk)
                continue
            if tag is None:  # a comment or declaration
                continue
            tag = tag.lower()
            if closing is None:
                section = self.section
                if (
                    tag in _STARTS_APART
                    or section is None
                    or source.endswith("/")
                    or (source and _attributes_matter(tag, source))
                ):
                    self.start(tag, _attributes(source) if source.strip(" /") else {})
                    if tag in _CDATA_END:  # text up to its end tag (an element always skipped)
                        close = _CDATA_END[tag].search(html, match.end(3) + 1)
                        self.end(tag)
                        return close.end() if close else None
                    if source.endswith("/"):  # <x/>: HTMLParser starts and ends it
                        self.end(tag)
                else:  # as :meth:`start` does for a tag with no attribute it reads
                    tags.append(tag)
                    open_[tag] = open_.get(tag, 0) + 1
                    if tag in skip:
                        self.skipped += 1
                    elif tag in _KEEP and not self.skipped:
                        self._target(section).append(f"<{tag}>")
                if leaf_text is None:
                    continue
                if leaf_text and not self.skipped:  # a leaf: its text, then its end tag
                    self.text(unescape(leaf_text) if "&" in leaf_text else leaf_text)
            if not tags or tags[-1] != tag:  # an end tag of no open element: ignored
                continue
            section = self.section
            assert section is not None  # the element's start made one
            if (
                tag in _KEEP
                or tag in skip
                or section.depth > len(tags)
                or (self.headerlinks and self.headerlinks[-1] == len(tags))
            ):
                self.end(tag)
            else:
                tags.pop()
                open_[tag] -= 1
        return None

    def _current(self) -> _Section:
        if self.section is None:  # text before any heading: a section of its own
            self.section = _Section("hx")
            self.data.append(self.section)
        return self.section

    def _target(self, section: _Section) -> list[str]:
        return section.title if self.open.get(section.tag) else section.text

    def start(self, tag: str, attributes: dict[str, str | None]) -> None:
        if tag in _VOID:
            return
        self.tags.append(tag)
        self.open[tag] = self.open.get(tag, 0) + 1
        if tag in self.skip:
            self.skipped += 1
        if tag == "a" and attributes.get("class") == "headerlink":
            self.headerlinks.append(len(self.tags))
        if tag in _HEADINGS and "id" in attributes:
            depth = len(self.tags)
            if tag != "h1" and not self.data:
                self.data.append(_Section("hx", depth))
            section = _Section(tag, depth, excluded="data-search-exclude" in attributes)
            if self.data:
                section.id = attributes["id"]
            self.data.append(section)
            self.section = section
        section = self._current()
        for key, value in attributes.items():
            if key == "data-search-exclude" or (key == "class" and value == "linenodiv"):
                if tag not in self.skip:
                    self.skip.add(tag)
                    self.skipped += self.open[tag]
                return
        if tag in _KEEP and not self.skipped:
            self._target(section).append(f"<{tag}>")

    def end(self, tag: str) -> None:
        tags = self.tags
        if not tags or tags[-1] != tag:
            return
        section = self._current()
        if section.depth > len(tags):  # leaving the element a heading was nested in
            for previous in reversed(self.data):
                if previous.depth <= len(tags):
                    section.depth = float("inf")
                    self.section = section = previous
                    break
        if self.headerlinks and self.headerlinks[-1] == len(tags):
            self.headerlinks.pop()
        tags.pop()
        self.open[tag] -= 1
        if tag in self.skip:
            self.skipped -= 1
            if tag not in _ALWAYS_SKIPPED:
                self.skip.remove(tag)
                self.skipped -= self.open[tag]
            return
        if tag in _KEEP and not self.skipped:
            parts = self._target(section)
            index = parts.index(f"<{tag}>")
            for i in range(index + 1, len(parts)):
                if not parts[i].isspace():
                    index = len(parts)
                    break
            if len(parts) > index:
                del parts[index:]
            else:
                parts.append(f"</{tag}>")

    def text(self, chunk: str) -> None:
        in_pre = self.open.get("pre")
        if not in_pre:
            chunk = " " if chunk.isspace() else chunk.replace("\n", " ")
        section = self._current()
        if self.open.get(section.tag):
            if not self.headerlinks:  # a heading's permalink is not in its title
                section.title.append(escape(chunk, quote=False))
        elif chunk.isspace():
            if not section.text or not section.text[-1].isspace() or in_pre:
                section.text.append(chunk)
        else:
            section.text.append(escape(chunk, quote=False))


#: A section whose text, numbers aside, is on at least this many pages (a recompile storm's
#: compile pages) is indexed once; ``search-code.js`` lists the other pages from ``shared``.
SHARED_MIN = 16
_DIGITS = re.compile(r"\d+")
_LOCATION_KEY = '{"location":'
#: A code span of at least 40 characters (a guard, a location; not a config value such as
#: ``false``, which a table shows on many rows beside different names).
_CODE_SPAN = re.compile(r"<code>(?:(?!</code>).){40,}</code>", re.S)


class ReportSearchIndex(SearchIndex):
    """Material's search index whose pages are divided by :func:`sections`, and whose
    entries are kept as their JSON text until the index is written.

    A recompile storm's compile pages repeat the same sections (summary, reasons, timers)
    thousands of times with other numbers in them; lunr builds its index on the page's own
    thread from ``file://``, so each copy delays the first answer. Sections whose text and
    title are the same once digits are masked, on :data:`SHARED_MIN` or more pages, are
    indexed once (the first page's); :attr:`shared` names the others, for the code index.
    """

    def __init__(
        self,
        *,
        found_elsewhere: set[str] | None = None,
        shared_min: int | None = SHARED_MIN,
        **config: Any,
    ) -> None:
        """``found_elsewhere``: the ``location#anchor`` of sections that search finds through
        the code index (``search/code_index.js``), by their title and code: those with no
        text of their own get no entry here. ``shared_min``: None for a site without a code
        index, whose every section is indexed where it is (Material's index, the same
        entries)."""
        super().__init__(**config)
        self._shared_min = shared_min
        #: (page url, the entry's key with digits masked or None for a page's own, JSON)
        self.docs: list[tuple[str, str | None, str]] = []
        self._found_elsewhere = found_elsewhere or set()
        self._titles: dict[str, str] = {}  # page url -> title
        #: ``[[page url, title], ...]`` and ``{indexed location: [page index or
        #: [page index, anchor, title], ...]}``: where else a shared section is
        self.shared_pages: list[list[str]] = []
        self.shared: dict[str, list[object]] = {}
        #: a storm's pages divided once per shape (the same HTML but for its digits)
        self.shapes = Shapes(sections, _section_texts, _sections_made)

    def add_entry_from_context(self, page: Any) -> None:
        """Index the page's sections as Material's ``SearchIndex`` does."""
        search = page.meta.get("search") or {}
        if search.get("exclude"):
            return
        self._titles[page.url] = str(page.meta.get("title", page.title))
        if material_search.jieba is not None:  # Chinese segmentation: Material's own way
            super().add_entry_from_context(page)
        else:
            for section in sections_alike(page.content, self.shapes.get):  # a job's ranks: once
                if section.excluded:
                    continue
                entry = _entry(section, page, search)
                if self._shared_min is not None:
                    entry["text"] = _repeats_once(entry["text"])
                if entry["text"] or entry["location"] not in self._found_elsewhere:
                    self.entries.append(entry)
        for entry in self.entries:
            # the encoding Material gives the whole index (compact, ASCII, str() for the rest)
            text = json.dumps(entry, separators=(",", ":"), default=str)
            location = entry["location"]
            key = None
            if "#" in location:  # a page's own entry stays: search finds a compile id there
                # the anchor and the rest of the entry's JSON, after its location (an entry
                # starts with it, here as in Material's)
                anchor = location.partition("#")[2]
                rest = text[len(_LOCATION_KEY) + len(json.dumps(location)) + 1 :]
                key = _DIGITS.sub("0", anchor + rest)
            self.docs.append((page.url, key, text))
        self.entries = []

    def generate_search_index(self, prev: Any) -> str:
        """The index Material writes: its configuration, then every entry not shared."""
        config = {key: self.config[key] for key in ("lang", "separator", "pipeline", "fields")}
        head = json.dumps({"config": config}, separators=(",", ":"), default=str)
        return f'{head[:-1]},"docs":[{",".join(self._indexed())}]}}'

    def _indexed(self) -> list[str]:
        """The entries' JSON, each section shared by a storm's pages once (see :attr:`shared`)."""
        counts: dict[str, int] = {}
        for _url, key, _text in self.docs:
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        first: dict[str, tuple[str, str, str]] = {}  # key -> (location, anchor, title)
        page_ids: dict[str, int] = {}
        self.shared, self.shared_pages = {}, []
        kept: list[str] = []
        for url, key, text in self.docs:
            if key is None or self._shared_min is None or counts[key] < self._shared_min:
                kept.append(text)
                continue
            entry = json.loads(text)
            location, title = entry["location"], entry["title"]
            anchor = location.partition("#")[2]
            if key not in first:
                first[key] = (location, anchor, title)
                self.shared[location] = []
                kept.append(text)
                continue
            if url not in page_ids:
                page_ids[url] = len(self.shared_pages)
                self.shared_pages.append([url, self._titles.get(url, url)])
            indexed, indexed_anchor, indexed_title = first[key]
            member: object = page_ids[url]
            if (anchor, title) != (indexed_anchor, indexed_title):
                member = [page_ids[url], anchor, title]
            self.shared[indexed].append(member)
        return kept


def _repeats_once(text: str) -> str:
    """``text`` with each long code span it holds :data:`SHARED_MIN` or more times kept
    only where it first is: a storm's tables (recompiles, a frame's compiles) repeat one guard
    on every row, and each copy is more for lunr to index, not more for search to find."""
    if text.count("<code>") < SHARED_MIN:
        return text
    counts: dict[str, int] = {}
    for span in _CODE_SPAN.findall(text):
        counts[span] = counts.get(span, 0) + 1
    seen: set[str] = set()

    def once(match: re.Match[str]) -> str:
        span = match.group(0)
        if counts[span] < SHARED_MIN or span not in seen:
            seen.add(span)
            return span
        return ""

    return _CODE_SPAN.sub(once, text)


def _entry(section: _Section, page: Any, search: dict[str, Any]) -> dict[str, Any]:
    """Material's ``SearchIndex.create_entry_for_section`` (a heading's id is its TOC anchor)."""
    location = f"{page.url}#{section.id}" if section.id else page.url
    title = section.title or [str(page.meta.get("title", page.title))]
    entry: dict[str, Any] = {
        "location": location,
        "title": "".join(title).strip(),
        "text": "".join(section.text).strip(),
    }
    tags = page.meta.get("tags")
    if isinstance(tags, list):
        entry["tags"] = [
            str(name) for name in tags if name and isinstance(name, (str, int, float, bool))
        ]
    if "boost" in search:
        entry["boost"] = search["boost"]
    return entry


#: What Material's search plugin removes from every page once it is indexed: its pattern.
_SEARCH_ATTRIBUTE = re.compile(r"\s?data-search-\w+=\"[^\"]+\"")
#: The same pattern from its literal on: where an attribute found by its name ends.
_SEARCH_ATTRIBUTE_FROM_NAME = re.compile(r"data-search-\w+=\"[^\"]+\"")
_SEARCH_ATTRIBUTE_NAME = "data-search-"


def without_search_attributes(html: str) -> str:
    """``html`` without the ``data-search-*`` attributes, as Material's
    ``re.sub(_SEARCH_ATTRIBUTE, "", html)`` leaves it.

    Material's pattern starts with an optional space, so the regular expression engine tries
    it at every character of every page; here each attribute is found by its name
    (``str.find``) and its pattern is tried there only, with the space before it when the
    space is not part of the attribute removed before it (the name never overlaps itself).
    """
    at = html.find(_SEARCH_ATTRIBUTE_NAME)
    if at < 0:
        return html
    kept: list[str] = []
    done = 0  # html[:done] is decided
    while at >= 0:
        match = _SEARCH_ATTRIBUTE_FROM_NAME.match(html, at)
        if match is None:
            at = html.find(_SEARCH_ATTRIBUTE_NAME, at + 1)
            continue
        start = at - 1 if at > done and html[at - 1].isspace() else at
        kept.append(html[done:start])
        done = match.end()
        at = html.find(_SEARCH_ATTRIBUTE_NAME, done)
    kept.append(html[done:])
    return "".join(kept)


#: What Material's handler does, as its compiled code names it: index the page, then
#: ``re.sub`` its pattern out of the content. Another body is not replaced.
_MATERIALS_HANDLER_NAMES = (
    "config",
    "enabled",
    "search_index",
    "add_entry_from_context",
    "re",
    "sub",
    "content",
)


def _is_materials_handler(handler: Any) -> bool:
    """Whether ``handler`` does what :func:`index_pages_with` puts in its place (a Material
    whose handler does more, or another pattern, keeps its own)."""
    code = getattr(getattr(handler, "__func__", None), "__code__", None)
    return (
        code is not None
        and code.co_names == _MATERIALS_HANDLER_NAMES
        and _SEARCH_ATTRIBUTE.pattern in code.co_consts
    )


def use_report_index(config: Any, **options: Any) -> None:
    """Put a :class:`ReportSearchIndex` (with ``options``) in place of Material's search
    index, its pages indexed by :func:`index_pages_with`; a search plugin whose index is not
    Material's own (``mkdocs serve --dirty`` needs that one) keeps it."""
    search = config.plugins.get("material/search")
    index = getattr(search, "search_index", None)
    if type(index) is SearchIndex:
        search.search_index = ReportSearchIndex(**options, **index.config)
        index_pages_with(search, config)


def index_pages_with(search: Any, config: Any) -> None:
    """Have Material's search plugin ``search`` (its index replaced by a
    :class:`ReportSearchIndex`) index each page with :func:`without_search_attributes` for
    its pattern, in its place among the ``page_context`` event's handlers (the same order
    as before: the other plugins' handlers see the page as they did)."""
    handlers = config.plugins.events["page_context"]
    found = [
        at
        for at, handler in enumerate(handlers)
        if getattr(handler, "__self__", None) is search and handler.__name__ == "on_page_context"
    ]
    if not found or not _is_materials_handler(handlers[found[0]]):
        return  # another Material, or a handler wrapped: Material's own indexes the pages
    at = found[0]
    handler = handlers[at]

    def on_page_context(context: Any, *, page: Any, config: Any, nav: Any) -> Any:
        if not search.config.enabled:
            return None
        search.search_index.add_entry_from_context(page)
        page.content = without_search_attributes(page.content)
        return None

    handlers[at] = on_page_context
    origins = getattr(config.plugins, "_event_origins", None)  # MkDocs' names for its log
    if isinstance(origins, dict) and handler in origins:
        origins[on_page_context] = origins[handler]

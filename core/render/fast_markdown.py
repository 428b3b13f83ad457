"""Convert a compile page's body without Python-Markdown, when it is in a small subset.

A recompile storm has thousands of compile pages, and Python-Markdown costs about a
millisecond even on a body of headings only. In a site build, a compile page's body is made
of ATX headings (with an attr_list id where given), raw HTML blocks from templates, and
md_in_html blocks (``<details markdown>``, an admonition's ``<div markdown>``) around the
placeholders of :mod:`.page`, which ``tlsite markdown`` fills with fences. For such a body,
:func:`convert` returns exactly the HTML and table of contents that Python-Markdown makes
with the site's extensions (toc with permalinks, attr_list, md_in_html...), slugs from the
toc extension's own ``slugify`` and ``unique``. A body outside the subset gives None, and the
page goes through Python-Markdown.

A comparison site's compile pages (``diff_compile.md``) are prose: one-line paragraphs and
pipe tables of the text :func:`~.escape.md_text` writes, ``**strong**`` spans, status badges
(a ``<span>`` with a class and title) and a link to a page of the site. With ``prose`` those
are in the subset too, each written as Python-Markdown writes it; a link's target is what
``link`` (MkDocs' own rewriting of the page's links) makes of it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from markdown.extensions.toc import nest_toc_tokens, slugify, strip_tags, unique

#: Python-Markdown's block-level tags that templates start raw HTML blocks with.
_RAW_TAGS = frozenset({"p", "div", "details", "table", "ol", "ul", "dl", "blockquote", "figure"})
_RAW_START = re.compile(r"<([a-z]+)[\s>]")
_PLACEHOLDER = r"<!--tlsite-(?:code|part):[A-Za-z0-9_-]+-->"
_HEADING = re.compile(r"(#{1,6}) (.*)")
_HEADING_ID = re.compile(r" +\{ #([A-Za-z][A-Za-z0-9_-]*) \}$")  # attr_list's, an id alone
_MARKDOWN_ATTRIBUTE = re.compile(r"\smarkdown[\s=>]")
#: Heading text as :func:`~.escape.md_text` and :func:`~.escape.md_code` write it: backslash
#: escapes, the entities they write, ``<code>`` tags (inline raw HTML, kept as is) and
#: characters that no inline pattern of the site's extensions starts with (no control
#: characters either).
_HEADING_TEXT = re.compile(
    r"(?:\\[\\`*_{}\[\]()#+\-.!|]|&(?:lt|gt|amp|#124);|</?code>|[^\\`*_{}\[\]<>&\x00-\x1f])+"
)
_ESCAPE = re.compile(r"\\(.)")
#: An md_in_html block: ``<details ... markdown><summary>...</summary>`` or ``<div ...
#: markdown>`` and an admonition title on the next line; then paragraphs of text, code and
#: links, then placeholders, each after a blank line; a blank line and the closing tag.
#: md_in_html writes it back with its attributes sorted, its children one per line.
_INLINE = r'(?:[^<\n]|</?code>|<a href="[^"<>\n]*"(?: rel="noopener noreferrer")?>|</a>)*'
_MD_BLOCK = re.compile(
    r'<(details|div)((?: [a-z-]+(?:="[\w -]*")?)*) markdown>'
    rf'(<summary>[^<>\n]*</summary>|\n<p class="admonition-title">{_INLINE}</p>)'
    rf"((?:\n\n<p>{_INLINE}</p>)*)((?:\n\n{_PLACEHOLDER})*)\n\n</\1>"
)
_ATTRIBUTE = re.compile(r' ([a-z-]+)(?:="([\w -]*)")?')
#: What Python-Markdown's preprocessors change or act on anywhere in the text: tabs and
#: carriage returns (normalized), its placeholder markers, blank lines of spaces, and fences
#: (superfences finds them inside raw HTML too).
_REFUSED = re.compile(r"[\t\r\x02\x03]|^ +$|^ {0,3}(?:```|~~~)", re.MULTILINE)

#: Prose (``prose=True``): inline text as :func:`~.escape.md_text` and the diff templates write
#: it. Backslash escapes, the entities md_text writes, ``<code>``, a status badge's ``<span>``
#: (class and title only; the title as :func:`~.escape.h` escapes it), ``**``, a link
#: ``[text](path)`` (a relative path, or ``#anchor`` alone) and a code span of plain text
#: are tokens; any other
#: character that a block or inline pattern of the site's extensions acts on is refused (no
#: control characters or line separators either).
_INLINE_TOKEN = re.compile(
    r"(?P<escape>\\[\\`*_{}\[\]()#+\-.!])"
    r"|(?P<kept>&(?:lt|gt|amp|#124);|</?code>|</span>"
    r'|<span class="[a-z0-9 -]*"(?: title="(?:[^"<>&\\`*_{}\[\]\x00-\x1f]'
    r'|&(?:amp|lt|gt|quot|#x27|#123|#125);)*")?>)'
    r"|(?P<strong>\*\*)"
    r"|(?P<link>\[(?P<text>(?:\\.|[^\[\]\\\n])*)\]\((?P<url>#[A-Za-z0-9_-]+|[A-Za-z0-9_./-]+)\))"
    r"|(?P<code>`[^`\\<>&\s](?:[^`\\<>&\n]*[^`\\<>&\s])?`(?!`))"
    r"|(?P<plain>[^\\`*_{}\[\]<>&|!\x00-\x1f\x7f-\x9f\u2028\u2029]+|!(?!\[))"
)
#: A line a block processor would take for something else than a paragraph's text: a list
#: item, a quote, an admonition, details or tab, a horizontal rule, a heading, a table row,
#: indented code, a setext heading's underline (a line may open with ``**strong``), or a
#: link reference definition.
_NOT_PROSE_LINE = re.compile(r"[ #|>!?=+\-<]|\*(?!\*[^*\s])|\d+[.)]|\[[^\[\]]*\]:|$")
_TABLE_SEPARATOR = re.compile(r"\|(?:---\|)+")
#: An admonition's first line (its kind, and a title); its content follows after a blank
#: line, indented by four spaces.
_ADMONITION = re.compile(r'!!! ([a-z]+) "([^"\n]+)"')

Chunk = tuple[str, str, int, str | None]  # (kind, html, heading level, explicit heading id)
Link = Callable[[str], str | None]


def convert(
    body: str, *, prose: bool = False, link: Link | None = None
) -> tuple[str, list[dict[str, Any]]] | None:
    """``body``'s HTML and toc tokens as Python-Markdown makes them, or None if the body is not
    in the subset (see the module docstring). ``prose``: paragraphs and tables too;
    ``link``: a link's target as the page writes it (no links without it)."""
    if _REFUSED.search(body):
        return None
    chunks = _chunks(body.strip("\n"), (link or _no_link) if prose else None)
    if chunks is None:
        return None
    used = {anchor for kind, _, _, anchor in chunks if anchor}  # toc never changes these
    out: list[str] = []
    tokens: list[dict[str, Any]] = []
    for kind, text, level, anchor in chunks:
        if kind != "h":
            out += (text, "\n\n" if kind == "raw" else "\n")
            continue
        name = strip_tags(text)
        if not anchor:
            anchor = unique(slugify(html.unescape(name), "-"), used)  # 2 arguments: any release
        permalink = f'<a class="headerlink" href="#{anchor}" title="Permanent link">&para;</a>'
        out += (f'<h{level} id="{anchor}">{text}{permalink}</h{level}>', "\n")
        tokens.append(
            {"level": level, "id": anchor, "name": name, "html": text, "data-toc-label": ""}
        )
    return "".join(out).strip(), nest_toc_tokens(tokens)


def _no_link(url: str) -> str | None:
    return None


def _chunks(text: str, prose: Callable[[str], str | None] | None = None) -> list[Chunk] | None:
    """The blocks of ``text``, each a heading (``"h"``), an md_in_html block (``"md"``) or a
    raw HTML block (``"raw"``), and with ``prose`` (a link's target) a paragraph or table
    (``"p"``); None outside the subset."""
    chunks: list[Chunk] = []
    pos = 0
    while pos < len(text):
        block = _MD_BLOCK.match(text, pos)
        if block is not None:
            if block.end() != len(text) and not text.startswith("\n\n", block.end()):
                return None
            md_html = _md_block(*block.groups())
            if md_html is None:
                return None
            chunks.append(("md", md_html, 0, None))
            pos = block.end()
        else:
            end = _raw_end(text, pos)
            if end is None:
                end = text.find("\n\n", pos)
                end = len(text) if end < 0 else end
            chunk = _chunk(text[pos:end])
            if chunk is not None:
                chunks.append(chunk)
            elif prose is None:
                return None
            elif _ADMONITION.fullmatch(text, pos, end):
                found_end = _admonition(text, pos, end, prose, chunks)
                if found_end is None:
                    return None
                end = found_end
            else:
                found = _prose(text[pos:end], prose)
                if found is None:
                    return None
                chunks += found
            pos = end
        while text.startswith("\n", pos):
            pos += 1
    return chunks


def _raw_end(text: str, pos: int) -> int | None:
    """The end of the raw HTML block that starts at ``pos``, blank lines inside it included
    (a ``<pre>`` of code has them), as Python-Markdown finds it: where the block's first tag
    closes, at a line's end followed by a blank line or by the end of ``text``. None if no
    block-level tag starts there or it does not close so."""
    start = _RAW_START.match(text, pos)
    if start is None or start.group(1) not in _RAW_TAGS:
        return None
    depth = 0
    for match in _tag_pattern(start.group(1)).finditer(text, pos):
        depth += -1 if match.group(1) else 1
        if depth == 0:
            end = text.find(">", match.start()) + 1
            return end if end == len(text) or text.startswith("\n\n", end) else None
    return None


def _chunk(text: str) -> Chunk | None:
    """A block: a heading, a placeholder or raw HTML (which alone may hold blank lines)."""
    if text.startswith("#"):
        return _heading(text)
    if re.fullmatch(_PLACEHOLDER, text) or _raw_block(text):
        return ("raw", text, 0, None)
    return None


def _md_block(
    tag: str, attributes: str, child: str, paragraphs: str, placeholders: str
) -> str | None:
    """An md_in_html block as md_in_html writes it, or None for attributes it would change
    other than by sorting them and giving bare ones their name as value."""
    pairs = sorted((name, value or name) for name, value in _ATTRIBUTE.findall(attributes))
    names = [name for name, _ in pairs]
    if "id" in names or "markdown" in names or len(set(names)) < len(names):
        return None
    opening = "".join(f' {name}="{value}"' for name, value in pairs)
    inner = "\n".join([child.strip("\n"), *paragraphs.split("\n\n")[1:], *placeholders.split()])
    return f"<{tag}{opening}>\n{inner}\n</{tag}>"


def _heading(text: str) -> Chunk | None:
    match = _HEADING.fullmatch(text)
    if match is None:
        return None
    hashes, content = match.groups()
    anchor = _HEADING_ID.search(content)
    if anchor is not None:
        content = content[: anchor.start()]
    content = content.strip()  # all whitespace, as Python-Markdown strips a heading
    # closing hashes, which Python-Markdown drops, are refused with the rest
    if content.endswith("#") or not _HEADING_TEXT.fullmatch(content):
        return None
    return ("h", _ESCAPE.sub(r"\1", content), len(hashes), anchor and anchor.group(1))


def _raw_block(text: str) -> bool:
    """Whether ``text`` is one raw HTML block that Python-Markdown passes through as is: it
    opens with a block-level tag at its start and closes it at its end, only there."""
    start = _RAW_START.match(text)
    if start is None or start.group(1) not in _RAW_TAGS or _MARKDOWN_ATTRIBUTE.search(text):
        return False
    tag = start.group(1)
    if not text.endswith(f"</{tag}>"):
        return False
    depth = 0
    for match in _tag_pattern(tag).finditer(text):
        depth += -1 if match.group(1) else 1
        if depth == 0 and match.end() != len(text):
            return False
    return depth == 0


@cache
def _tag_pattern(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<(/?){tag}[\s>]")


def _prose(block: str, link: Callable[[str], str | None]) -> list[Chunk] | None:
    """A block of prose: a pipe table, or paragraph lines with ATX headings among them (which
    Python-Markdown takes out of the block first); None outside the subset."""
    if block.startswith("|"):
        table = _table(block.split("\n"), link)
        return None if table is None else [("p", table, 0, None)]
    chunks: list[Chunk] = []
    lines: list[str] = []  # the paragraph so far
    for line in block.split("\n"):
        if line.startswith("#"):
            heading = _heading(line)
            if heading is None:
                return None
            if lines:
                chunks.append(("p", f"<p>{chr(10).join(lines)}</p>", 0, None))
                lines = []
            chunks.append(heading)
            continue
        inline = _prose_line(line, link)  # a paragraph's whitespace stripped: an em space too
        if inline is None:
            return None
        lines.append(inline)
    if lines:
        chunks.append(("p", f"<p>{chr(10).join(lines)}</p>", 0, None))
    return chunks


def _admonition(
    text: str, pos: int, end: int, link: Callable[[str], str | None], chunks: list[Chunk]
) -> int | None:
    """Append the admonition whose first line is ``text[pos:end]`` to ``chunks``; where its
    content ends, or None outside the subset. Its content is one block, indented by four
    spaces: a paragraph or a list of one-line items."""
    kind, title = _ADMONITION.fullmatch(text, pos, end).groups()  # type: ignore[union-attr]
    start = end + 2
    if not text.startswith("\n\n    ", end):
        return None
    stop = text.find("\n\n", start)
    stop = len(text) if stop < 0 else stop
    if text.startswith("    ", stop + 2):  # a second block of content
        return None
    lines = text[start:stop].split("\n")
    if not all(line.startswith("    ") for line in lines):
        return None
    lines = [line[4:] for line in lines]
    title_html = _inline(title, _no_link)
    if title_html is None:
        return None
    if all(line.startswith("- ") for line in lines):
        items = [_prose_line(line[2:], link) for line in lines]
        if None in items:
            return None
        content = "\n".join(["<ul>", *(f"<li>{item}</li>" for item in items), "</ul>"])
    else:
        found = [_prose_line(line, link) for line in lines]
        if None in found:
            return None
        content = f"<p>{chr(10).join(found)}</p>"  # type: ignore[arg-type]
    head = f'<div class="admonition {kind}">\n<p class="admonition-title">{title_html}</p>'
    chunks.append(("p", f"{head}\n{content}\n</div>", 0, None))
    return stop


def _prose_line(line: str, link: Callable[[str], str | None]) -> str | None:
    """A line of a paragraph (or a list item's text), or None if a block processor would
    take it for something else or Python-Markdown would strip its whitespace."""
    if not line or _NOT_PROSE_LINE.match(line) or line[0].isspace() or line[-1].isspace():
        return None
    return _inline(line, link)


def _table(rows: list[str], link: Callable[[str], str | None]) -> str | None:
    """A pipe table as the tables extension writes it: a header, the ``|---|`` separator (no
    alignment) and one or more rows of as many cells, each row between pipes."""
    if len(rows) < 3 or not _TABLE_SEPARATOR.fullmatch(rows[1]):
        return None
    columns = rows[1].count("|") - 1
    out = ["<table>", "<thead>"]
    for index, row in enumerate(rows):
        if index == 1:
            out += ["</thead>", "<tbody>"]
            continue
        cells = row.split("|")
        if len(cells) != columns + 2 or cells[0] or cells[-1]:
            return None
        tag = "th" if index == 0 else "td"
        out.append("<tr>")
        for cell in cells[1:-1]:
            inline = _inline(cell.strip(" "), link)
            if inline is None:
                return None
            out.append(f"<{tag}>{inline}</{tag}>")
        out.append("</tr>")
    out += ["</tbody>", "</table>"]
    return "\n".join(out)


def _inline(text: str, link: Callable[[str], str | None]) -> str | None:
    """One line of prose as Python-Markdown writes it, or None outside the subset."""
    out: list[str] = []
    strong = False
    pos = 0
    while pos < len(text):
        token = _INLINE_TOKEN.match(text, pos)
        if token is None:
            return None
        kind = token.lastgroup
        if kind == "strong":
            # ** opening before a non-space and closing after one, never empty or nested
            if strong:
                if text[pos - 1].isspace() or out[-1] == "<strong>":
                    return None
                out.append("</strong>")
            else:
                if text.find("**", pos + 2) < 0 or text[pos + 2 : pos + 3].isspace():
                    return None
                out.append("<strong>")
            strong = not strong
        elif kind == "escape":
            out.append(token.group()[1])
        elif kind == "code":
            if token.group().startswith(("`#!", "`:::")):  # inlinehilite's language prefixes
                return None
            out.append(f"<code>{token.group()[1:-1]}</code>")
        elif kind == "link":
            target = link(token.group("url"))
            inner = _inline(token.group("text"), _no_link)
            if target is None or inner is None or not inner or "<strong>" in inner:
                return None
            out.append(f'<a href="{html.escape(target)}">{inner}</a>')
        else:
            out.append(token.group())
        pos = token.end()
    return None if strong else "".join(out)

"""Long tables written in pieces that the browser lays out only when they near the screen.

A list page of a recompile storm has a row per compile id. While such a page loads,
Material's scripts measure it several times (the header's colour, each table wrapped for
scrolling, scroll offsets), and each measure lays the whole table out again: pages of
thousands of rows took seconds to answer a click. Past :data:`PIECE_ROWS` rows a table is
cut into the first rows, with the head, then tables of :data:`PIECE_ROWS` rows, each in a box
with ``content-visibility: auto``, which the browser skips until it is scrolled near. Every
row stays in the page, for find in page and the site search; ``tlsite.js`` gives the later
tables the first one's column widths, so they read as one table.

A page of hundreds of sections (a graph-break storm's Graph breaks page) is slow the same
way: its templates put every :data:`PIECE_SECTIONS` sections after the first ones in a box of
their own (``tlsite-sections-more``), and past :data:`TOC_SECTIONS` sections the page has no
table of contents, whose scroll tracking measures every heading of the page each time the
page's height changes (its table of the sections, at the top, links each one).

The tables are cut where templates write them (:mod:`.templating`), so the Markdown tree
builds the same pages with plain MkDocs.
"""

from __future__ import annotations

import itertools
import re

#: Rows of each piece of a long table; a table of at most this many rows stays whole.
PIECE_ROWS = 100
#: Sections of each box of a long page's sections after the first ones (templates read it as
#: ``pieces.PIECE_SECTIONS``).
PIECE_SECTIONS = 20
#: A page of more sections than this has no table of contents.
TOC_SECTIONS = 100
#: Height a row of a piece is guessed to have before the browser lays it out, and the height
#: of each further line in it (a list item, a paragraph): a box skipped by the browser is
#: given its guessed height, which only sets the scroll bar until the box is first shown.
ROW_PX = 36
LINE_PX = 22

# The tables templates write: a head, then a body whose rows each start with "<tr". Text
# from a trace is escaped, so "<tr" and "</tbody>" inside a cell are tags of the template;
# a body holding a table of its own is left whole.
_TABLE = re.compile(
    r"<table>(?P<head>\s*<thead>.*?</thead>\s*)<tbody>(?P<body>.*?)</tbody>\s*</table>", re.S
)
_ROW = re.compile(r"<tr[\s>]")
_LINE = re.compile(r"<(?:li|p|br)[\s>/]")


def cut_long_tables(html: str) -> str:
    """``html`` with each table of more than :data:`PIECE_ROWS` rows cut into pieces."""
    if html.count("<tr") <= PIECE_ROWS:  # most pages: no table that long
        return html
    return _TABLE.sub(_cut, html)


def _cut(table: re.Match[str]) -> str:
    body = table["body"]
    starts = [row.start() for row in _ROW.finditer(body)]
    if len(starts) <= PIECE_ROWS or "<table" in body:
        return table[0]
    cuts = [*starts[PIECE_ROWS::PIECE_ROWS], len(body)]
    first = body[: cuts[0]]
    out = [f'<div class="tlsite-rows"><table>{table["head"]}<tbody>{first}</tbody></table>']
    for start, end in itertools.pairwise(cuts):
        rows = body[start:end]
        height = ROW_PX * len(_ROW.findall(rows)) + LINE_PX * len(_LINE.findall(rows))
        out.append(
            f'<div class="tlsite-rows-more" style="contain-intrinsic-block-size: auto {height}px">'
            f"<table><tbody>{rows}</tbody></table></div>"
        )
    out.append("</div>")
    return "".join(out)

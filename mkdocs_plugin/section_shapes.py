"""A page's search sections divided once per page *shape*: the same HTML but for its digits.

A recompile storm's compile pages are one HTML with other numbers in it (compile ids, sizes,
times, line numbers); dividing each into search sections again was the biggest cost of
writing it. :class:`SectionShapes` divides the HTML of a shape once, with a mark of its own
in place of each digit, and gives every other page of that shape those sections with its own
digits put back where the marks are.

That is exact because a digit is plain text to the division (:func:`.search_index.sections`):
nothing it decides depends on which digit is where, except in the few places a digit is not
free, which the shape keeps as they are (a page with one of the others is divided as usual):
a heading's tag name (``<h2``), the numeric character references tlsite's escaping writes
(``&#x27;``, ``&#124;``...). A page with another ``&#`` reference, a digit in any other tag's
name or after a named reference, or a byte the shape uses as a mark is divided as usual. The
first page of a shape is divided as usual too, and the second page's template is checked
against it: a shape whose template does not give the first page's sections back is never
used.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Callable
from typing import Any

#: Where the marks of a shape's digits are: the Private Use Area (no page holds its
#: characters; one that does is divided as usual).
_MARK_BASE = 0xE000
_MARK_COUNT = 0x1900
_MARK_RANGE = re.compile("[\ue000-\uf8ff]")
#: What a shape writes in place of the text that stays as is: a heading's level (``h1`` to
#: ``h6`` wherever it is written), then the character references tlsite's escaping writes.
_KEPT = [(f"h{level}".encode(), bytes([0x10 + level])) for level in range(1, 7)] + [
    (reference.encode(), bytes([mark]))
    for reference, mark in (
        ("&#x27;", 0x02),
        ("&#124;", 0x03),
        ("&#123;", 0x04),
        ("&#125;", 0x05),
        ("&#39;", 0x06),
        ("&#34;", 0x07),
    )
]
_DIGIT_MARK = b"\x01"
_MASK = bytes.maketrans(b"0123456789", _DIGIT_MARK * 10)
_NOT_DIGITS = bytes(b for b in range(256) if not 0x30 <= b <= 0x39)
#: Every byte but those a shape uses as marks (a page that holds one is divided as usual).
_NOT_MARKS = bytes(b for b in range(256) if b not in {0x01, *range(0x02, 0x08), *range(0x11, 0x17)})
#: A digit where it is not free: in a tag's name, after a named character reference's name.
_NOT_FREE = re.compile(rb"<[A-Za-z][^\s>\x01]*\x01|&[A-Za-z]+\x01")
#: How many shapes are remembered (the oldest go first).
MAX_SHAPES = 4096


class _Template:
    """One text of a shape's sections: ``format % digits`` at the marks' places."""

    __slots__ = ("format", "pick")

    def __init__(self, text: str) -> None:
        indices: list[int] = []

        def mark(match: re.Match[str]) -> str:
            indices.append(ord(match.group(0)) - _MARK_BASE)
            return "%s"

        marked = _MARK_RANGE.sub(mark, text.replace("%", "%%"))
        #: the page's digits for the marks, in order (a str for one, a tuple for more)
        self.pick: Callable[[str], Any] | None = None
        self.format = text
        if indices:
            self.format, self.pick = marked, operator.itemgetter(*indices)

    def fill(self, digits: str) -> str:
        if self.pick is None:
            return self.format
        picked = self.pick(digits)
        return self.format % (picked if isinstance(picked, tuple) else (picked,))


class _Shape:
    """A shape's sections: for each, ``(section, title template or None, text template,
    id template or None)``; None (as a whole) for a shape whose template failed its check."""

    __slots__ = ("first", "sections")

    def __init__(self, first: tuple[str, list[Any]]) -> None:
        self.first: tuple[str, list[Any]] | None = first  # digits and sections of the first page
        self.sections: list[tuple[Any, _Template | None, _Template, _Template | None]] | None = None


class SectionShapes:
    """``divide(html)``: ``split(html)`` (:func:`.search_index.sections`), once per shape
    (see the module docstring). ``make(tag, id, excluded, title, text)`` makes a section."""

    def __init__(self, split: Callable[[str], list[Any]], make: Callable[..., Any]) -> None:
        self._split = split
        self._make = make
        self._shapes: dict[bytes, _Shape | None] = {}
        self.filled = 0  # pages whose sections came from their shape

    def divide(self, html: str) -> list[Any]:
        key = _key(html)
        if key is None:
            return self._split(html)
        masked, digits = key
        digest = hashlib.md5(masked, usedforsecurity=False).digest()
        shape = self._shapes.get(digest, _MISSING)
        if shape is _MISSING:  # the first page of its shape: divided as usual
            found = self._split(html)
            if len(self._shapes) >= MAX_SHAPES:
                del self._shapes[next(iter(self._shapes))]
            self._shapes[digest] = _Shape((digits, found))
            return found
        if shape is None:
            return self._split(html)
        assert isinstance(shape, _Shape)
        if shape.sections is None:  # the second: make the template, check it on the first
            assert shape.first is not None
            sections = _template(masked, self._split)
            first_digits, first_found = shape.first
            shape.first = None
            if sections is None or not _same(self._fill(sections, first_digits), first_found):
                self._shapes[digest] = None
                return self._split(html)
            shape.sections = sections
        self.filled += 1
        return self._fill(shape.sections, digits)

    def _fill(
        self,
        sections: list[tuple[Any, _Template | None, _Template, _Template | None]],
        digits: str,
    ) -> list[Any]:
        filled = []
        for section, title, text, anchor in sections:
            filled.append(
                self._make(
                    section.tag,
                    None if anchor is None else anchor.fill(digits),
                    section.excluded,
                    [] if title is None else [title.fill(digits)],
                    [text.fill(digits)],
                )
            )
        return filled


_MISSING = object()


def _key(html: str) -> tuple[bytes, str] | None:
    """``html`` with its free digits masked and the rest of what a shape keeps marked, and
    its free digits in order; None for a page to divide as usual."""
    data = html.encode("utf-8", "surrogatepass")
    if data.translate(None, _NOT_MARKS):  # it holds a byte the shape uses as a mark
        return None
    if (b"\xee" in data or b"\xef" in data) and _MARK_RANGE.search(html):  # or a mark
        return None
    for text, mark in _KEPT:
        if text in data:
            data = data.replace(text, mark)
    if b"&#" in data:
        return None
    masked = data.translate(_MASK)
    digits = data.translate(None, _NOT_DIGITS)
    if len(digits) > _MARK_COUNT:
        return None
    return masked, digits.decode("ascii")


def _template(
    masked: bytes, split: Callable[[str], list[Any]]
) -> list[tuple[Any, _Template | None, _Template, _Template | None]] | None:
    """The sections of a shape (``masked``: see :func:`_key`), divided with a mark for each
    digit; None if a digit of the shape is not free (in a tag's name, after a named
    reference's: the same for every page of the shape)."""
    if _NOT_FREE.search(masked):
        return None
    pieces = masked.split(_DIGIT_MARK)
    parts: list[bytes] = [pieces[0]]
    for index, piece in enumerate(pieces[1:]):
        parts += (chr(_MARK_BASE + index).encode("utf-8"), piece)
    data = b"".join(parts)
    for text, mark in _KEPT:
        data = data.replace(mark, text)
    html = data.decode("utf-8", "surrogatepass")
    template = []
    for section in split(html):
        title = "".join(section.title)
        template.append(
            (
                section,
                _Template(title) if section.title else None,
                _Template("".join(section.text)),
                None if section.id is None else _Template(section.id),
            )
        )
    return template


def _same(filled: list[Any], found: list[Any]) -> bool:
    """Whether two pages' sections give the same search entries."""
    return len(filled) == len(found) and all(
        (a.tag, a.id, a.excluded, bool(a.title), "".join(a.title), "".join(a.text))
        == (b.tag, b.id, b.excluded, bool(b.title), "".join(b.title), "".join(b.text))
        for a, b in zip(filled, found, strict=True)
    )

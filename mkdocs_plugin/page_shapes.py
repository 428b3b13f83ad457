"""What a page's text gives, worked out once per *shape*: the same text but for its numbers.

A recompile storm's compile pages are one Markdown body, and one HTML, with other numbers in
them (compile ids, sizes, times, line numbers); converting each and dividing it into search
sections again was much of the cost of writing it. :class:`Shapes` works out a function of a
page's text (converting a body, dividing HTML into sections) once per shape, as templates with
a slot for each number the result takes from the text, and gives every other page of that
shape the templates filled with its own numbers. A number is a run of digits, of any length.

The templates come from the function itself, run on the shape with a one-digit number in
each place, chosen so that each slot tells which number of the text it holds: all zeros, all
ones, then the units, tens, hundreds... of each number's position. A result whose characters
other than those digits differ between the runs (the function treated numbers by their
values: ids made unique, references read) gives no template, and the shape is worked out page
by page. The first pages of a shape are worked out as usual, and the templates are checked
against them when they are made (:data:`TEMPLATES_AT`). What stays as it is in a shape: a
heading's level (``h1``: a tag's name) and the character references tlsite's escaping writes
(``&#x27;``); a page with another ``&#`` reference or a byte the shape uses as a mark is
worked out as usual.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")

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
#: The kept texts, as two patterns that each start with a literal (``h``, ``&#``): the
#: regular expression engine then skips to where they may start, not trying each byte.
_KEPT_PATTERNS = [
    re.compile(b"|".join(re.escape(text) for text, _ in _KEPT if text.startswith(start)))
    for start in (b"h", b"&#")
]
_KEPT_MARKS = dict(_KEPT)
_DIGIT_MARK = b"\x01"
_MASK = bytes.maketrans(b"0123456789", _DIGIT_MARK * 10)
#: Every byte but a digit as a space: the numbers of a text, split apart.
_NUMBERS_APART = bytes(b if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
#: Every byte but those a shape uses as marks (a page that holds one is worked out as usual).
_NOT_MARKS = bytes(b for b in range(256) if b not in {0x01, *range(0x02, 0x08), *range(0x11, 0x17)})
#: How many shapes are remembered (the oldest go first).
MAX_SHAPES = 4096
#: The page of a shape whose turn it is to make the templates (the pages before it are worked
#: out as usual): making them costs a few times working one page out, which a shape seen two
#: or three times would not win back.
TEMPLATES_AT = 4
_MISSING = object()
_DECIMAL = frozenset("0123456789")
_DIGIT_BYTES = {digit: bytes([digit]) for digit in b"0123456789"}


class _Template:
    """One text of a shape's result: ``format`` with a page's numbers at its slots."""

    __slots__ = ("format", "pick")

    def __init__(self, format: str, slots: list[int]) -> None:
        self.format = format
        #: the page's numbers for the slots, in order (a str for one, a tuple for more)
        self.pick: Callable[[list[str]], Any] | None = (
            operator.itemgetter(*slots) if slots else None
        )

    def fill(self, numbers: list[str]) -> str:
        if self.pick is None:
            return self.format
        picked = self.pick(numbers)
        return self.format % (picked if isinstance(picked, tuple) else (picked,))


class _Shape:
    """A shape: until its templates are made, its pages' numbers and results' texts."""

    __slots__ = ("samples", "templates")

    def __init__(self, first: tuple[list[str], list[str | None]]) -> None:
        self.samples: list[tuple[list[str], list[str | None]]] = [first]
        self.templates: list[_Template | None] | None = None


class Shapes(Generic[T]):
    """``get(text)``: ``work(text)``, once per shape (see the module docstring).

    ``texts(result)`` lists the texts a result is made of (None where it has none, or for a
    result of None), and ``make(texts)`` makes the result from them again. ``check(result)``,
    if given, tells whether a result filled from templates may stand (one the probes cannot
    vouch for: numbers that collide only at some values); else the page is worked out as usual.
    """

    def __init__(
        self,
        work: Callable[[str], T],
        texts: Callable[[T], list[str | None]],
        make: Callable[[list[str | None]], T],
        check: Callable[[T], bool] | None = None,
    ) -> None:
        self._work = work
        self._texts = texts
        self._make = make
        self._check = check
        self._shapes: dict[bytes, _Shape | None] = {}
        self.filled = 0  # pages whose result came from their shape

    def get(self, text: str) -> T:
        key = _key(text)
        if key is None:
            return self._work(text)
        masked, numbers = key
        digest = hashlib.md5(masked, usedforsecurity=False).digest()
        shape = self._shapes.get(digest, _MISSING)
        if shape is _MISSING:  # the first page of its shape: worked out as usual
            result = self._work(text)
            if len(self._shapes) >= MAX_SHAPES:
                del self._shapes[next(iter(self._shapes))]
            self._shapes[digest] = _Shape((numbers, self._texts(result)))
            return result
        if shape is None:
            return self._work(text)
        assert isinstance(shape, _Shape)
        if shape.templates is None:  # make the templates in time, check them on the pages
            if len(shape.samples) < TEMPLATES_AT - 1:
                result = self._work(text)
                shape.samples.append((numbers, self._texts(result)))
                return result
            templates = self._templates(masked)
            if templates is None or any(
                _filled(templates, sample) != texts for sample, texts in shape.samples
            ):
                self._shapes[digest] = None
                return self._work(text)
            shape.samples.clear()
            shape.templates = templates
        result = self._make(_filled(shape.templates, numbers))
        if self._check is not None and not self._check(result):
            return self._work(text)
        self.filled += 1
        return result

    def _templates(self, masked: bytes) -> list[_Template | None] | None:
        """The shape's templates, from its results with the numbers of :func:`_runs`; None if
        the results differ elsewhere than where the text's numbers went."""
        pieces = masked.split(_DIGIT_MARK)
        count = len(pieces) - 1
        runs = [self._texts(self._work(_text(pieces, digits))) for digits in _runs(count)]
        if any(len(texts) != len(runs[0]) for texts in runs):
            return None
        templates: list[_Template | None] = []
        for texts in zip(*runs, strict=True):
            if any(t is None for t in texts):
                if any(t is not None for t in texts):
                    return None
                templates.append(None)
                continue
            template = _template(texts, count)  # type: ignore[arg-type]
            if template is None:
                return None
            templates.append(template)
        return templates


def _key(text: str) -> tuple[bytes, list[str]] | None:
    """``text`` with each number (a run of digits) masked and what a shape keeps marked, and
    its numbers in order; None for a page to work out as usual."""
    data = text.encode("utf-8", "surrogatepass")
    if data.translate(None, _NOT_MARKS):  # it holds a byte the shape uses as a mark
        return None
    for pattern in _KEPT_PATTERNS:
        data = pattern.sub(_kept_mark, data)
    if b"&#" in data:
        return None
    numbers = data.translate(_NUMBERS_APART).decode("ascii").split()
    if not numbers:
        return data, numbers
    # each number's digits are marks; a number's marks are adjacent, so the pieces between
    # marks are empty inside a number (the first and last piece stay, empty or not)
    pieces = data.translate(_MASK).split(_DIGIT_MARK)
    inner = [piece for piece in pieces[1:-1] if piece]
    return _DIGIT_MARK.join([pieces[0], *inner, pieces[-1]]), numbers


def _kept_mark(match: re.Match[bytes]) -> bytes:
    return _KEPT_MARKS[match.group()]


def _text(pieces: list[bytes], digits: str) -> str:
    """The shape's text (its ``pieces`` between numbers) with a number of one digit in each
    place, from ``digits``."""
    parts: list[bytes] = [b""] * (2 * len(pieces) - 1)
    parts[::2] = pieces
    parts[1::2] = map(_DIGIT_BYTES.__getitem__, digits.encode("ascii"))
    data = b"".join(parts)
    for kept, mark in _KEPT:
        data = data.replace(mark, kept)
    return data.decode("utf-8", "surrogatepass")


def _runs(count: int) -> list[str]:
    """The numbers a shape of ``count`` numbers is worked out with, a digit each: all zeros,
    all ones, then the units, tens, hundreds... of each number's position."""
    runs = ["0" * count, "1" * count]
    place = 1
    while True:
        cycle = "".join(digit * place for digit in "0123456789")
        runs.append((cycle * (count // len(cycle) + 1))[:count])
        if place * 10 >= count:
            return runs
        place *= 10


def _template(texts: Sequence[str], count: int) -> _Template | None:
    """One text's template from its runs (see :func:`_runs`); None if they differ elsewhere
    than where a number of the text went."""
    first = texts[0]
    if any(len(t) != len(first) for t in texts):
        return None
    zeros, ones, places = texts[0], texts[1], texts[2:]
    # where a number of the text went: a 0 in the zeros' run that is a 1 in the ones'
    changed: list[int] = []
    at = zeros.find("0")
    while at >= 0:
        if ones[at] == "1":
            changed.append(at)
        at = zeros.find("0", at + 1)
    for run in (ones, *places):  # elsewhere the same as the zeros' run
        chars = list(run)
        for at in changed:
            if chars[at] not in _DECIMAL:
                return None
            chars[at] = "0"
        if "".join(chars) != zeros:
            return None
    if not changed:
        return _Template(first, [])
    slots = [sum(int(p[at]) * 10**i for i, p in enumerate(places)) for at in changed]
    if max(slots) >= count:
        return None
    parts, start = [], 0
    for at in changed:
        parts += (first[start:at].replace("%", "%%"), "%s")
        start = at + 1
    parts.append(first[start:].replace("%", "%%"))
    return _Template("".join(parts), slots)


def _filled(templates: list[_Template | None], numbers: list[str]) -> list[str | None]:
    return [None if t is None else t.fill(numbers) for t in templates]

"""A storm's pages divided into search sections once per shape (issue #19, ``storm07``).

A recompile storm's compile pages are one HTML with other numbers in it; the search index
divides a shape's HTML once and puts each page's own digits back
(:mod:`tlsite.mkdocs_plugin.page_shapes`). What a user finds with search must not change:
every page's sections are the ones dividing it alone gives, on crafted pages (digits in ids,
links, entities, ``%``, excluded parts) and on a storm's whole site, whose search index is
byte for byte the one built without shapes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from corpus import PROJECT_ROOT

from tlsite.mkdocs_plugin import search_index
from tlsite.mkdocs_plugin.page_shapes import Shapes
from tlsite.mkdocs_plugin.search_index import _section_texts, _sections_made, sections


def _flat(found: list[search_index._Section]) -> list[tuple[object, ...]]:
    return [
        (s.tag, s.id, s.excluded, bool(s.title), "".join(s.title), "".join(s.text)) for s in found
    ]


def _page(n: int, extra: str = "") -> str:
    """A compile page's HTML, its numbers from ``n`` (``n`` digits long at times)."""
    return (
        f'<h1 id="0{n}-f">[0/{n}] f<a class="headerlink" href="#0{n}-f">&para;</a></h1>\n'
        f"<p>Success <code>f.py:{n * 7}</code> · frame 0 compile {n + 1} of 300 (50%)</p>\n"
        f'<p data-search-exclude="true"><a href="../-_0_{n}_0/index.html">[0/{n}]</a></p>\n'
        f'<h2 id="artifact-{800 + n}">graph ({800 + n})<a class="headerlink" '
        f'href="#artifact-{800 + n}">&para;</a></h2>\n'
        f"<table><tr><td>Guards</td><td>{n % 10}</td></tr><tr><td>time</td>"
        f"<td>0.{n:03d} s</td></tr></table>\n"
        f"<p>it&#x27;s &#124; {n}&amp;{n} &lt;{n}&gt; x{n} {n}%s</p>\n"
        f"<pre><code>line {n}\n  {n}\n</code></pre>{extra}"
    )


def test_pages_alike_but_for_digits_get_the_sections_each_alone_gets() -> None:
    shapes = Shapes(sections, _section_texts, _sections_made)
    for n in [*range(100, 130), *range(3, 9), 100, 555]:
        html = _page(n)
        assert _flat(shapes.get(html)) == _flat(sections(html)), n
    assert shapes.filled >= 30  # the shape served most pages


@pytest.mark.parametrize(
    "extra",
    [
        "<p>&#65;&#{n}; and &sup2; and &frac12;</p>",  # references the shape does not keep
        "<p>\ue001 a mark of its own</p>",
        "<p>\x01 a byte the shape uses</p>",
        "<x-1>a tag named with a digit</x-1><x-2>b</x-2>",
        '<h3 id="a-{n}">h{n} <code>{n}</code></h3><p>100% of {n}</p>',
    ],
)
def test_pages_the_shape_cannot_hold_are_divided_as_usual(extra: str) -> None:
    shapes = Shapes(sections, _section_texts, _sections_made)
    for n in range(10, 40):
        html = _page(n, extra.replace("{n}", str(n)))
        assert _flat(shapes.get(html)) == _flat(sections(html)), (extra, n)


@pytest.mark.slow
def test_a_storms_search_index_is_the_one_built_without_shapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tlsite.cli import build

    log = tmp_path / "storm40.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py")]
    subprocess.run([*make, "--storm", "40", "-o", str(log)], check=True)
    filled: list[int] = []
    get = Shapes.get

    def counted(self: Shapes, html: str) -> object:
        found = get(self, html)
        filled[:] = [self.filled]
        return found

    monkeypatch.setattr(Shapes, "get", counted)
    with_shapes = build(str(log), tmp_path / "shapes", make_zip=False).site
    assert filled and filled[0] >= 25  # most of the 40 compile pages came from their shape
    monkeypatch.setattr(Shapes, "get", lambda self, text: self._work(text))
    without = build(str(log), tmp_path / "plain", make_zip=False).site
    for name in ("search/search_index.json", "search/code_index.js"):
        assert (with_shapes / name).read_bytes() == (without / name).read_bytes(), name

"""A storm's pages converted and divided into search sections once per shape (issue #19,
``storm07``).

A recompile storm's compile pages are one text with other numbers in it; a site build converts
a shape's body and divides its HTML once and puts each page's own numbers back
(:mod:`tlsite.mkdocs_plugin.page_shapes`). What a user sees and finds must not change: every
page's HTML, table of contents and sections are the ones working it out alone gives, on
crafted pages (numbers in ids, links, entities, ``%``, excluded parts, numbers that grow a
digit, headings whose ids collide when their numbers do) and on a storm's whole site, byte
for byte the one built without shapes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from corpus import PROJECT_ROOT

from tlsite.core.render import fast_markdown
from tlsite.mkdocs_plugin import search_index
from tlsite.mkdocs_plugin.deferred_page import conversions
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


def _body(n: int, other: int, second: str) -> str:
    """A compile page's Markdown body (see ``compile_unit.md``)."""
    return (
        f"# \\[0/{n}\\] f\n\n"
        f'<p data-search-exclude="true"><a href="../-_0_{n}_0/index.html">[0/{n}]</a></p>\n\n'
        f"## Graph {n % 3}\n\n## {second} {other}\n\n"
        f"### recompile\\_reasons ({800 + n}) {{ #artifact-{800 + n} }}\n\n"
        f"<!--tlsite-part:facts-{800 + n}-->\n\n"
        f'<details class="tlsite-artifact" data-search-exclude markdown><summary>g</summary>\n\n'
        f"<!--tlsite-code:artifact-{800 + n}-->\n\n</details>\n\n"
        f"<p>{n}% of {n * 7} &#x27;{n}&#x27;</p>"
    )


@pytest.mark.parametrize("second", ["Table", "Graph"])
def test_bodies_alike_but_for_numbers_convert_as_each_alone(second: str) -> None:
    """Numbers that grow a digit; headings whose ids collide (``graph-1``, ``graph-1_1``) on
    some pages of a shape and not on others: that shape is converted page by page."""
    shapes = conversions()
    for n in [*range(5, 40), *range(95, 130), 1000, 7]:
        body = _body(n, n % 3 if n % 10 == 0 else n % 3 + 1, second)
        expected = fast_markdown.convert(body)
        assert expected is not None
        assert shapes.get(body) == expected, n
    assert shapes.filled >= 40 if second == "Table" else shapes.filled == 0


def test_headings_whose_numbers_make_one_slug_only_at_some_values_keep_distinct_ids() -> None:
    """ "1.2" and "12" slug alike: the page where they meet gets the ids converting it alone
    gives (``v-12`` and ``v-12_1``), not two ``v-12`` from its shape's templates."""
    shapes = conversions()
    for a, b, c in [(1, 1, 3), (1, 3, 5), (2, 4, 7), (3, 1, 9), (1, 2, 12), (4, 5, 6)]:
        body = f"## v {a}.{b}\n\n## v {c}\n"
        assert shapes.get(body) == fast_markdown.convert(body), (a, b, c)
    assert shapes.filled == 2  # the 4th page (its templates made then) and the last


@pytest.mark.slow
def test_a_storms_site_is_the_one_built_without_shapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tlsite.cli import build

    log = tmp_path / "storm40.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py")]
    subprocess.run([*make, "--storm", "40", "-o", str(log)], check=True)
    filled: dict[int, int] = {}  # each Shapes (conversion, search sections): pages it filled
    get = Shapes.get

    def counted(self: Shapes, html: str) -> object:
        found = get(self, html)
        filled[id(self)] = self.filled
        return found

    monkeypatch.setattr(Shapes, "get", counted)
    with_shapes = build(str(log), tmp_path / "shapes", make_zip=False).site
    # most of the 40 compile pages came from their shape, in conversion and in search alike
    assert len(filled) == 2 and min(filled.values()) >= 25, filled
    monkeypatch.setattr(Shapes, "get", lambda self, text: self._work(text))
    without = build(str(log), tmp_path / "plain", make_zip=False).site
    pages = sorted(p.relative_to(without) for p in without.rglob("*") if p.is_file())
    assert pages == sorted(
        p.relative_to(with_shapes) for p in with_shapes.rglob("*") if p.is_file()
    )
    assert len(pages) > 300
    for page in pages:
        assert (with_shapes / page).read_bytes() == (without / page).read_bytes(), page

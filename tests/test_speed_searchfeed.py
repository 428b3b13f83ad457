"""The search sections of a page, read by tlsite's token loop, are Material's (issue #19).

:func:`~tlsite.mkdocs_plugin.search_index.sections` handles most tags (a table's cells, a code
block's spans, kept tags such as ``<p>`` and ``<code>``) in its token loop, matches a leaf
element (``<td>x</td>``) as one token, and reads a tag's attributes only where they can
change a section: a heading's id, a permalink's class, ``data-search-exclude`` and
``class="linenodiv"``, however they are spelled. These tests
compare it with Material's own parser where those shortcuts are taken, and on every page of
real traces' sites (a storm's compile pages, a training run, a hostile trace, tlparse's
inputs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import TLPARSE_INPUTS, TORCH_213
from test_hostile_trace import LOG_NAME, hostile_trace
from test_site import RECOMPILES
from test_speed_site import materials, ours

#: HTML where the token loop decides from a tag's name and raw attributes whether to read
#: them: exclusion spelled in capitals or with an entity, an unquoted permalink class, links
#: inside and outside headings, self-closed and mismatched tags, a script holding a heading,
#: a heading nested in an element, kept tags inside and after an excluded element, entities.
CASES = [
    "<DIV DATA-SEARCH-EXCLUDE><p>hidden</p><div>nested</div> hidden</DIV><p>shown</p>",
    '<table><tr><td class="&#108;inenodiv"><pre>1\n2</pre></td>'
    "<td><pre><code>x = 1\n\n</code></pre></td></tr></table>",
    '<h2 id="a">T <code>c</code><A CLASS=headerlink href="#a">&para;</A></h2>'
    '<p>x<a href="#a">in a link</a></p>',
    "<p>one<span/>two<div/>three</p><p>x<br>y</br></p><p>z<code></code></p>",
    "<div><span>a</div>b</span></div><p>c</p>",
    '<script>"<h2 id=\'no\'>"</script><h2 id="yes">Y</h2><STYLE>p {}</style ><p>after</p>',
    '<div><section><h2 id="n">N</h2><p>in</p></section><p>after section</p></div><p>after</p>',
    '<div data-search-exclude><code>x</code><h3 id="h">H</h3><p>p</p></div><code>y</code>'
    "<p></p><code> </code>",
    '<p title="a &amp; b">x &lt;y&gt; &amp;amp;</p><ul><li><a href="?a=1&amp;b=2">l</a></li></ul>',
    '<h1 id="t">Title</h1><p>text\nwith\nnewlines</p>\n\n<p> </p>\n<pre>  keep\n\n  </pre>',
]


@pytest.mark.parametrize("html", CASES)
def test_the_token_loop_reads_sections_as_material_does(html: str) -> None:
    assert ours(html) == materials(html)


def _training() -> Path | None:
    return next(iter(sorted(TORCH_213.glob("training/*.log"))), None)


@pytest.fixture(scope="module")
def hostile_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("hostile") / LOG_NAME
    log.write_text(hostile_trace(), encoding="utf-8")
    return log


@pytest.mark.slow
@pytest.mark.parametrize(
    "trace",
    ["recompiles", "training", "hostile", "comp_failure.log", "export.log", "cache_hit_miss.log"],
)
def test_every_page_of_a_real_trace_indexes_as_material_would(
    trace: str, hostile_log: Path, tmp_path: Path
) -> None:
    from tlsite.cli import build

    path = {"recompiles": RECOMPILES, "training": _training(), "hostile": hostile_log}.get(
        trace, TLPARSE_INPUTS / trace
    )
    if path is None or not path.exists():
        pytest.skip(f"no {trace} trace")
    outcome = build(str(path), tmp_path / "site", make_zip=False)
    pages = [p for p in outcome.site.rglob("*.html") if "assets" not in p.parts]
    assert len(pages) > 5
    compared = 0
    for page in pages:
        html = page.read_text(encoding="utf-8")
        if "<article" not in html:
            continue
        article = html[html.index("<article") : html.index("</article>")]
        assert ours(article) == materials(article), page
        compared += 1
    assert compared > 5

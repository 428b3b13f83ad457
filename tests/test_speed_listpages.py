"""The pages whose size grows with the compile ids skip Python-Markdown too (issue #19).

Config, compile time, recompiles, each frame's page, the provenance index and each
provenance page list every compile id (or every setting) in tables: their bodies are now
headings and raw HTML from templates, which ``core.render.fast_markdown`` converts itself. On
real traces each of those pages must convert so, to exactly what Python-Markdown makes with
the site's extensions; trace text must stay escaped; and the Markdown tree built by plain
``mkdocs build`` must show the same pages, with no warning about their links.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, TORCH_213, TRAINING_TRACE_GLOB
from test_hostile_trace import scan
from test_speed_fasthtml import (  # noqa: F401 (fixtures)
    built_recording_python_markdown,
    converted,
    hostile,
    python_markdown,
    shown,
    storm,
)
from test_speed_pages import build, pages, plain_tree_pages

from tlsite.core import limits, load
from tlsite.core.render import fast_markdown
from tlsite.core.render.pages import render_tree
from tlsite.mkdocs_plugin.prepared import split_front_matter

#: The pages listed per compile id, frame or setting (``frames/frame_<n>.md``, one per frame;
#: ``provenance_tracking_<id>.md``, one per node mapping).
LIST_PAGE = re.compile(
    r"(config|compile_time|recompiles|provenance|frames/frame_\w+|provenance_tracking_[^/]+)\.md"
)

TRACES = [
    *sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))[:1],
    *(
        log
        for version in ("2.4", "2.6", "2.10", "2.15")
        for log in sorted((FIXTURE_TRACES / f"torch-{version}").glob("*.log"))
    ),
    FIXTURE_TRACES / "zipstorm" / "zipstorm.log",  # a cut of a real torch 2.15 storm
    FIXTURE_TRACES / "cache_hits" / "cache_hits.log",  # provenance pages
    FIXTURE_TRACES / "compile_error" / "compile_error.log",
]


def list_bodies(trace: Path) -> dict[str, str]:
    """Each list page's body as the site build converts it."""
    bodies = {}
    for page in render_tree(load(str(trace))).pages:
        if LIST_PAGE.fullmatch(page.path):
            parts = split_front_matter(page.markdown)
            assert parts is not None
            bodies[page.path] = parts[1]
    assert bodies
    return bodies


def all_converted(bodies: dict[str, str]) -> dict[str, str]:
    """Each page's HTML from the fast converter, which must take every page and make what
    Python-Markdown makes of it (HTML and table of contents: see ``converted``)."""
    done = converted(bodies)
    assert [path for path in bodies if path not in done] == [], "went to Python-Markdown"
    return {path: html for path, (html, _) in done.items()}


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: f"{p.parent.name}/{p.stem[:24]}")
def test_list_pages_skip_python_markdown_and_show_what_it_makes(trace: Path) -> None:
    if not trace.is_file():
        pytest.skip(f"{trace} is not here")
    done = all_converted(list_bodies(trace))
    assert {"compile_time.md", "recompiles.md"} <= set(done)  # config: torch 2.5+


def test_a_storms_list_pages_skip_python_markdown(storm: Path) -> None:  # noqa: F811
    done = all_converted(list_bodies(storm))
    # the tables a user reads: one row per compile id, links to its page
    rows = re.findall(r'<tr><td><a href="(-_0_\d+_0/index\.html)">', done["recompiles.md"])
    assert len(rows) >= 30 and rows[0] == "-_0_0_0/index.html"
    assert '<th style="text-align: right;">Total (s)</th>' in done["compile_time.md"]
    assert '<a href="../-_0_29_0/index.html">[0/29]</a>' in done["frames/frame_0.md"]
    assert '<h2 id="dynamo_config">Dynamo config (<code>dynamo_config</code>)' in done["config.md"]


def test_provenance_pages_skip_python_markdown() -> None:
    """A provenance page's panes hold code with blank lines: one raw HTML block all the same."""
    done = all_converted(list_bodies(FIXTURE_TRACES / "cache_hits" / "cache_hits.log"))
    views = [path for path in done if path.startswith("provenance_tracking_")]
    assert views and "provenance.md" in done
    page = done[views[0]]
    assert '<div class="admonition warning">' in page or "tlsite-prov-pane" in page
    assert 'Compile id <a href="-_0_0_0/index.html">[0/0]</a>' in page
    assert f'<a href="{views[0].replace(".md", ".html")}">' in done["provenance.md"]


def test_a_hostile_traces_list_pages_stay_escaped(hostile: Path) -> None:  # noqa: F811
    """No element, handler or URL from the trace; its markup shown as text."""
    done = all_converted(list_bodies(hostile))
    for html in done.values():
        assert scan(html).found == []
    assert any("&lt;" in html for path, html in done.items() if path.startswith("frames/"))


def test_lists_cut_at_their_limits_still_skip_python_markdown(
    storm: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past limits.ROWS a table ends with where the rest is: a link to the compile ids."""
    monkeypatch.setattr(limits, "ROWS", 5)
    done = all_converted(list_bodies(storm))
    for path in ("compile_time.md", "recompiles.md", "frames/frame_0.md"):
        assert done[path].count("<tr><td><a href=") <= 6, path
        assert (
            "more compile ids not shown" in done[path] or "more recompiles not shown" in done[path]
        ), path
        assert 'compile_ids.html">compile ids</a> page lists every' in done[path], path


@pytest.mark.parametrize(
    "body",
    [
        "<p>x\n\n</p>",
        "# A\n\n<div>a\n\nb</div>\n\n<p>c</p>",
        '<div class="x">\n<pre>a\n\n\nb</pre>\n<script type="application/json">{}</script>\n</div>',
        "<table>\n<tr><td>a\n\n</td></tr></table>\n\n## B",
    ],
)
def test_raw_html_blocks_with_blank_lines_inside_are_what_python_markdown_makes(
    body: str,
) -> None:
    """A raw HTML block ends where its first tag closes, not at a blank line inside it."""
    fast = fast_markdown.convert(body)
    assert fast is not None and fast == python_markdown(body)


@pytest.mark.parametrize("body", ["<div>a\n\n</div>x", "<div>a\n\n<p>b</p>", "<p>a\n\n"])
def test_raw_html_blocks_that_do_not_close_at_a_lines_end_are_refused(body: str) -> None:
    assert fast_markdown.convert(body) is None


@pytest.mark.slow
@pytest.mark.parametrize("which", ["storm", "cache_hits"])
def test_the_markdown_tree_built_by_plain_mkdocs_shows_the_same_list_pages(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Plain MkDocs shows the same list pages, and does not warn: raw-HTML links name
    ``.html`` pages that exist."""
    if which == "cache_hits":
        trace = FIXTURE_TRACES / "cache_hits" / "cache_hits.log"
    else:
        trace = request.getfixturevalue(which)
    site = pages(build(trace, tmp_path / "site"))
    plain = plain_tree_pages(trace, tmp_path)
    listed = [name for name in site if LIST_PAGE.fullmatch(name.replace(".html", ".md"))]
    assert len(listed) >= 4 and [name for name in listed if name not in plain] == []
    assert [name for name in listed if shown(plain[name]) != shown(site[name])] == []
    links = [
        (page, href)
        for page in (plain[name] for name in listed)
        for href in re.findall(r'href="([^"#:]+\.html)', article_html(page))
    ]
    broken = [(str(page), href) for page, href in links if not (page.parent / href).is_file()]
    assert links and broken == []


def article_html(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    start = text.index("<article")
    return text[start : text.index("</article>", start)]


def test_a_storm_site_build_converts_no_list_page_with_python_markdown(
    storm: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The build's own pages: Python-Markdown sees none of the list pages."""
    site, sources = built_recording_python_markdown(storm, tmp_path / "site", monkeypatch)
    titles = ("# Config\n", "# Compile time\n", "# Recompiles\n", "# Frame ")
    assert sources and [s[:40] for s in sources if s.startswith(titles)] == []
    page = (site / "recompiles.html").read_text(encoding="utf-8")
    assert '<a href="-_0_1_0/index.html">[0/1]</a>' in page
    # search reads a table's cells as words apart, as it did Python-Markdown's tables
    index = json.loads((site / "search" / "search_index.json").read_text("utf-8"))
    text = {doc["location"]: doc["text"] for doc in index["docs"]}
    assert "Compile id Status Compile time (s) Why it (re)compiled" in text["frames/frame_0.html"]
    assert re.search(r"\[0/1\] ok 0\.\d{3} <code>0/0: ", text["frames/frame_0.html"])
    assert "Setting Value <code>" in text["config.html#dynamo_config"]


@pytest.mark.parametrize(
    ("valid", "linked", "kernels", "kind", "empty"),
    [
        (True, 3, ["triton_poi_0"], "forward", False),
        (True, 0, ["triton_<poi>_0", "k1", "k2", "k3", "k4", "k5"], "backward", False),
        (True, 0, None, "inference", False),
        (True, 0, [], "forward", False),
        (False, 0, None, "forward", False),
        (False, 0, None, "forward", True),
    ],
)
def test_every_provenance_note_skips_python_markdown(
    valid: bool, linked: int, kernels: list[str] | None, kind: str, empty: bool
) -> None:
    """Each note a provenance page can carry (the traces at hand show one), with several node
    mappings and a kernel page: converted as Python-Markdown would, trace text escaped."""
    from types import SimpleNamespace

    from markupsafe import Markup

    from tlsite.core.render.templating import render_markdown

    md = render_markdown(
        "provenance.md",
        title="Provenance [0/0] <b>x</b>",
        unit=SimpleNamespace(display="[0/0]"),
        function="f<script>",
        unit_href="-_0_0_0/index.md",
        mapping={"name": "node_<mappings>", "number": 7, "report_md": "-_0_0_0/index.md#a-7"},
        index=2,
        others=[
            {"label": "forward <1>", "path": "provenance_tracking_-_0_0_0.0.md"},
            {"label": "backward", "path": "provenance_tracking_-_0_0_0.md"},
        ],
        valid=valid,
        linked=linked,
        is_cpp=False,
        kind=kind,
        kernels=kernels,
        kernel_href="kernel_traces_-_0_0_0.md",
        also=[{"display": "[0/<3>]", "href": "-_0_3_0/index.md"}],
        empty_mapping=empty,
        pre_logged=kind != "inference",
        panes=Markup('<div class="tlsite-prov-wrap">\n<pre>a\n\n\nb</pre>\n</div>'),
    )
    parts = split_front_matter(md)
    assert parts is not None
    html = all_converted({"provenance_tracking_-_0_0_0.md": parts[1]})[
        "provenance_tracking_-_0_0_0.md"
    ]
    assert scan(html).found == [] and "f&lt;script&gt;" in html
    assert '<a href="provenance_tracking_-_0_0_0.0.html">forward &lt;1&gt;</a>' in html
    assert '<a href="kernel_traces_-_0_0_0.html">kernel stack traces</a>' in html
    assert '<a href="-_0_3_0/index.html">[0/&lt;3&gt;]</a>' in html  # the shared page's
    assert ("The node mapping is empty" in html) == empty
    assert ("admonition" in html) == (not valid or not linked)

"""Compile pages skip Python-Markdown, and show exactly what it would have made (issue #19).

In a site build a compile page's body is a small subset of Markdown (headings, raw HTML from
templates, md_in_html wrappers around placeholders) that ``core.render.fast_markdown``
converts itself. On real traces, each page it converts must be the HTML and table of
contents Python-Markdown makes with the site's extensions (ids of repeated headings
included); a recompile storm's compile pages must all be converted; and the Markdown tree
(``tlsite markdown`` built by plain ``mkdocs build``) must keep showing the same pages.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import markdown
import pytest
from corpus import FIXTURE_TRACES, PROJECT_ROOT, TORCH_213, TRAINING_TRACE_GLOB
from test_hostile_trace import hostile_trace, scan
from test_speed_pages import article, build, pages, plain_tree_pages

from tlsite.core import load
from tlsite.core.render import fast_markdown
from tlsite.core.render.escape import WORD_JOINER
from tlsite.core.render.pages import ReportRenderer, render_tree
from tlsite.mkdocs_plugin.prepared import split_front_matter
from tlsite.mkdocs_plugin.site_config import MARKDOWN_EXTENSIONS

STORM_IDS = 30

TRACES = [
    *sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))[:1],
    *(
        log
        for version in ("2.4", "2.6", "2.10", "2.15")
        for log in sorted((FIXTURE_TRACES / f"torch-{version}").glob("*.log"))
    ),
    FIXTURE_TRACES / "compile_error" / "compile_error.log",  # <lambda> frames, failures
    FIXTURE_TRACES / "cache_hits" / "cache_hits.log",
]


def python_markdown(body: str) -> tuple[str, list]:
    """What MkDocs' ``Page.render`` gets from Python-Markdown with the site's extensions
    (MkDocs puts its built-in ``toc``, ``tables`` and ``fenced_code`` first)."""
    names = ["toc", "tables", "fenced_code"]
    settings = {}
    for entry in MARKDOWN_EXTENSIONS:
        name = next(iter(entry)) if isinstance(entry, dict) else entry
        if isinstance(entry, dict):
            settings[name] = entry[name]
        if name not in names:
            names.append(name)
    md = markdown.Markdown(extensions=names, extension_configs=settings)
    return md.convert(body), md.toc_tokens


def compile_bodies(trace: Path) -> dict[str, str]:
    """Each compile page's body as the site build converts it."""
    loaded = load(str(trace))
    paths = {ReportRenderer.unit_path(unit) for unit in loaded.units.values()}
    bodies = {}
    for page in render_tree(loaded).pages:
        if page.path in paths:
            parts = split_front_matter(page.markdown)
            assert parts is not None
            bodies[page.path] = parts[1]
    assert bodies
    return bodies


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recompile storm made by bench/make_trace.py from the recompiles fixture."""
    out = tmp_path_factory.mktemp("storm") / "storm.log"
    subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py"), "--storm",
         str(STORM_IDS), "-o", str(out)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hostile trace of test_hostile_trace: markup, fences and ``<lambda>`` in names."""
    out = tmp_path_factory.mktemp("hostile") / "hostile.log"
    out.write_text(hostile_trace(), encoding="utf-8")
    return out


def converted(bodies: dict[str, str]) -> dict[str, tuple[str, list]]:
    """The pages the converter takes, each checked against Python-Markdown."""
    done = {}
    for path, body in bodies.items():
        fast = fast_markdown.convert(body)
        if fast is None:
            continue
        html, toc = python_markdown(body)
        assert fast[0] == html, path
        assert fast[1] == toc, path
        done[path] = fast
    return done


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: f"{p.parent.name}/{p.stem[:24]}")
def test_converted_compile_pages_are_what_python_markdown_makes(trace: Path) -> None:
    if not trace.is_file():
        pytest.skip(f"{trace} is not here")
    converted(compile_bodies(trace))


def test_a_storms_compile_pages_all_skip_python_markdown(storm: Path) -> None:
    bodies = compile_bodies(storm)
    done = converted(bodies)
    assert len(bodies) >= STORM_IDS and sorted(done) == sorted(bodies)
    # the storm repeats its headings: ids from attr_list and toc's own slugs, the same
    page = done["-_0_7_0/index.md"][0]
    assert '<h2 id="why-it-recompiled">' in page and '<h3 id="artifact-' in page


def test_a_real_storms_compile_pages_all_skip_python_markdown() -> None:
    """A torch storm's recompiles list every cache entry checked (a make_trace storm has one)."""
    bodies = compile_bodies(FIXTURE_TRACES / "zipstorm" / "zipstorm.log")
    done = converted(bodies)
    assert sorted(done) == sorted(bodies)
    assert any("cache entries that were checked" in html for html, _ in done.values())


def test_failing_and_graph_break_compile_pages_skip_python_markdown() -> None:
    """A failed compile (admonition, traceback fence), a restart and graph breaks."""
    shown = "\n".join(
        html
        for name in ("compile_error", "graph_breaks")
        for html, _ in converted(
            compile_bodies(FIXTURE_TRACES / "torch-2.6" / f"{name}.log")
        ).values()
    )
    assert '<div class="admonition failure">' in shown
    assert '<p class="admonition-title">Graph break: ' in shown
    assert "Dynamo restarted analysis" in shown


def test_a_hostile_traces_compile_pages_stay_escaped(hostile: Path) -> None:
    """No element, handler or URL from the trace; its markup shown as text."""
    done = converted(compile_bodies(hostile))
    assert done
    for html, _ in done.values():
        assert scan(html).found == []
    assert any("&lt;script&gt;" in html for html, _ in done.values())


@pytest.mark.parametrize(
    "body",
    [
        "# A\n\nSome *Markdown* text.",
        "# A\n\n- a list",
        "# A *b*",
        "# A\n<p>x</p>",
        "<p>x</p>\n<p>y</p>",
        "<p>a\n```\nb</p>",
        "<p>\ta</p>",
        "<span>inline</span>",
        "<details markdown><summary>s</summary>\n\n<!--tlsite-code:a-->\n\nmore\n\n</details>",
        '<div id="x" markdown>\n<p class="admonition-title">t</p>\n\n<!--tlsite-part:a-->'
        "\n\n</div>",
    ],
)
def test_bodies_outside_the_subset_are_refused(body: str) -> None:
    assert fast_markdown.convert(body) is None


def test_repeated_headings_get_toc_ids() -> None:
    body = (
        "# \\[0/1\\] f &lt;lambda&gt;\n\n## Config\n\n## Config { #config_1 }\n\n## Config\n\n"
        '<details class="x" open markdown><summary>s &amp; t</summary>\n\n<!--tlsite-code:a-->'
        "\n\n</details>\n\n## config\n\n<!--tlsite-part:b-->"
    )
    fast = fast_markdown.convert(body)
    assert fast is not None and fast == python_markdown(body)
    assert [t["id"] for t in fast[1][0]["children"]] == [
        "config",
        "config_1",
        "config_2",
        "config_3",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("which", ["storm", "hostile", "compile_error"])
def test_the_markdown_tree_built_by_plain_mkdocs_shows_the_same_compile_pages(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """As test_speed_pages' check, on a storm, a hostile trace and a failing compile; plain
    MkDocs must not warn about the tree's links (raw-HTML links name ``.html`` pages)."""
    if which == "compile_error":
        trace = FIXTURE_TRACES / "compile_error" / "compile_error.log"
    else:
        trace = request.getfixturevalue(which)
    site = pages(build(trace, tmp_path / "site"))
    plain = plain_tree_pages(trace, tmp_path)
    units = [name for name in site if name.startswith("-_") and name.endswith("/index.html")]
    assert units and [name for name in units if name not in plain] == []
    assert [name for name in units if shown(plain[name]) != shown(site[name])] == []


def shown(page: Path) -> tuple[list[str], list]:
    """The page's words and headings; without the invisible joiner that the tree's fences put
    into template syntax from the trace (``{{``, ``{%``), which highlighted blocks need not."""
    words, headings = article(page)
    return [word.replace(WORD_JOINER, "") for word in words], headings


def recording_python_markdown(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The list every source Python-Markdown converts from now on (in this test) goes to."""
    sources: list[str] = []
    convert = markdown.Markdown.convert

    def recorded(self: markdown.Markdown, source: str) -> str:
        sources.append(source)
        return convert(self, source)

    monkeypatch.setattr(markdown.Markdown, "convert", recorded)
    return sources


def built_recording_python_markdown(
    trace: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[str]]:
    """``trace``'s site built (no bundle) into ``out``, and every source Python-Markdown
    converted while it was."""
    from tlsite.cli import build as build_site

    sources = recording_python_markdown(monkeypatch)
    return build_site(str(trace), out, make_zip=False).site, sources


def test_a_storm_site_build_converts_no_compile_page_with_python_markdown(
    storm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build's own pages: what Python-Markdown converts is every page but the compiles'."""
    site, sources = built_recording_python_markdown(storm, tmp_path / "site", monkeypatch)
    compiles = [s for s in sources if s.startswith("# \\[0/")]
    assert sources and compiles == []
    page = (site / "-_0_7_0" / "index.html").read_text(encoding="utf-8")
    assert '<h2 id="why-it-recompiled">Why it recompiled<a class="headerlink"' in page
    assert '<a href="#artifact-' in page  # the table of contents, from the converter's tokens

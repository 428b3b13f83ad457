"""A job's comparisons at their pages' cost (issue #19, ``jobdiff09``).

A comparison site (``tlsite diff``, and each diverging pair of a job's ranks) has a page per
compile pair. Those without a code diff are prose (``diff_compile.md``: paragraphs, pipe
tables, ``**strong**``, status badges, a link back to the summary), which
``fast_markdown.convert(prose=True)`` converts itself: each page it takes must be exactly what
Python-Markdown makes, and a site build must not call Python-Markdown for them. With
``TLSITE_BASE_REV`` set, the comparison sites of ``tlsite diff`` are compared byte for byte with
the base revision's (the job's are, by ``test_speed_job16.py``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, PROJECT_ROOT
from revisions import BASE_REV, needs_base_rev, site_files, snapshot
from test_hostile_trace import hostile_trace
from test_speed_fasthtml import python_markdown, recording_python_markdown

from tlsite.core import load, load_source
from tlsite.core.analysis.diff import diff_traces
from tlsite.core.render import fast_markdown
from tlsite.core.render.diff_pages import render_pages
from tlsite.core.render.escape import md_code, md_reason, md_text
from tlsite.mkdocs_plugin.diff_build import build_diff_site
from tlsite.mkdocs_plugin.prepared import split_front_matter

SCENARIOS = ("gbfix", "newgb", "dynamic", "versions")


def _side(scenario: str, which: str) -> Path:
    return FIXTURE_TRACES / f"diff_{scenario}" / f"{which}.log"


def _bodies(before: object, after: object) -> dict[str, str]:
    """Each page of the comparison, its body as MkDocs converts it (front matter apart)."""
    bodies = {}
    for page in render_pages(diff_traces(before, after)):  # type: ignore[arg-type]
        parts = split_front_matter(page.markdown)
        assert parts is not None
        bodies[page.path] = parts[1]
    return bodies


def _same_as_python_markdown(bodies: dict[str, str]) -> list[str]:
    """The pages the converter takes (each checked against Python-Markdown, whose links
    MkDocs would rewrite afterwards: here they stay as written)."""
    taken = []
    for path, body in bodies.items():
        fast = fast_markdown.convert(body, prose=True, link=lambda url: url)
        if fast is None:
            continue
        assert fast == python_markdown(body), path
        taken.append(path)
    return taken


@pytest.fixture(scope="module")
def job_bodies(ddp16_job: object) -> dict[str, str]:
    """The pages of the 16-rank job's six comparisons."""
    logs = {log.rank: log for log in ddp16_job.logs}  # type: ignore[attr-defined]
    traces = {rank: load_source(logs[rank]) for rank in (0, 1, 3, 5, 6, 11)}
    bodies = {}
    for a, b in [(0, 3), (6, 0), (6, 1), (6, 11), (6, 3), (6, 5)]:
        for path, body in _bodies(traces[a], traces[b]).items():
            bodies[f"diff_{a}_{b}/{path}"] = body
    for trace in traces.values():
        trace.close()
    return bodies


def test_the_jobs_compile_pair_pages_are_converted_as_python_markdown_does(
    job_bodies: dict[str, str],
) -> None:
    taken = _same_as_python_markdown(job_bodies)
    without_code_diff = [p for p in job_bodies if "```" not in job_bodies[p]]
    assert len(without_code_diff) >= 36
    assert sum(p.endswith("/index.md") for p in without_code_diff) == 6  # the summaries
    assert sorted(taken) == sorted(without_code_diff)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_fixture_pairs_compile_pages_are_converted_as_python_markdown_does(
    scenario: str,
) -> None:
    bodies = _bodies(load(str(_side(scenario, "before"))), load(str(_side(scenario, "after"))))
    taken = _same_as_python_markdown(bodies)
    assert "index.md" in taken or "```" in bodies["index.md"] or "!!! warning" in bodies["index.md"]


def test_a_hostile_pairs_pages_are_refused_or_converted_as_python_markdown_does(
    tmp_path: Path,
) -> None:
    from corpus import trace_lines
    from test_hostile_trace import CID0, hostile

    before = tmp_path / "before.log"
    before.write_text(hostile_trace(), encoding="utf-8")
    after = tmp_path / "after.log"
    changed = trace_lines({"dynamo_output_graph": {}, **CID0}, f"{hostile('n1')} = t(x)")
    after.write_text(hostile_trace() + changed, encoding="utf-8")
    _same_as_python_markdown(_bodies(load(str(before)), load(str(after))))


#: Characters a trace's text may hold that Markdown, HTML or the site's extensions act on.
_TRICKY = [
    *"\\`*_{}[]()#+-.!|<>&\"'~=:;@%$^/ ",
    "\u2003", "\u00a0", "\u2028", "\x0b", "\x0c", "\x1f", "\x7f", "\x85", "é", "→", "—",
    "**", "  ", "&amp;", "&#124;", "http://x.y/", "<code>", "</span>", "1.", "- ", "!!! ",
]  # fmt: skip


def _random_text(rng: random.Random) -> str:
    """Mostly words, a tricky piece now and then."""
    words = ["a", "b", "9", " x ", "word", "0.5"]
    pieces = (
        rng.choice(_TRICKY if rng.random() < 0.2 else words) for _ in range(rng.randint(0, 8))
    )
    return "".join(pieces)


def _random_body(rng: random.Random) -> str:
    """A page built from the diff templates' pieces with random trace text in them."""
    escape = [md_text, md_code, md_reason]
    cell = lambda: str(rng.choice(escape)(_random_text(rng)))  # noqa: E731
    blocks = [
        f"# {md_code(_random_text(rng))} \\[0/0\\] → \\[0/1\\]",
        "[← What changed](../index.md)",
    ]
    for _ in range(rng.randint(1, 5)):
        kind = rng.randrange(8)
        if kind == 0:
            rows = ["| A | B |", "|---|---|"]
            rows += [f"| {cell()} | **{cell()}** |" for _ in range(rng.randint(1, 3))]
            blocks.append("\n".join(rows))
        elif kind == 1:
            blocks.append(f"**Added ({rng.randint(0, 9)}):** {cell()}, {cell()}")
        elif kind == 2:
            blocks.append(f"{cell()}\n## {cell()}")
        elif kind == 3:
            badge = f'<span class="tlsite-badge status-ok" title="{_random_text(rng)}">x</span>'
            blocks.append(f"| Status | {badge} |\n|---|---|\n| {cell()} | — |")
        elif kind == 4:
            blocks.append(f"The same {cell()} ({cell()}).\n{cell()} [{cell()}](#a-b) `x.json`")
        elif kind == 5:
            items = "\n".join(f"    - [{cell()}](compiles/0_1.md) {cell()}" for _ in range(2))
            blocks.append(f'!!! failure "Worse in AFTER ({cell()})"\n\n{items}')
        elif kind == 6:
            blocks.append(f'!!! success "No change"\n\n    {cell()}\n    {cell()} `--fail-on`')
        else:
            blocks.append(f"| A |\n|---|\n| [\\[0/1\\] → {cell()}](compiles/0_1.md) |")
    return "\n\n".join(blocks) + "\n"


def test_random_trace_text_in_prose_is_refused_or_converted_as_python_markdown_does() -> None:
    rng = random.Random(19)
    taken = 0
    for _ in range(1000):
        body = _random_body(rng)
        fast = fast_markdown.convert(body, prose=True, link=lambda url: url)
        if fast is not None:
            assert fast == python_markdown(body), body
            taken += 1
    assert taken >= 150  # the subset is not empty


#: Pieces of Markdown syntax, for text written into the templates' places unescaped too.
_SYNTAX = [
    *_TRICKY,
    *("`a`", "``", "` a`", "\\", "<b>", '<span class="x">', "[", "](", "a.md)", "](#x)"),
    *("*", "_", "\\[", "\\]", "]:", '!!! note "t"', "    ", "\n", "\n\n", "- ", "#x"),
]


def test_markdown_syntax_in_prose_is_refused_or_converted_as_python_markdown_does() -> None:
    rng = random.Random(11)
    taken = [0] * 6
    for _ in range(3000):
        pieces = (
            rng.choice(_SYNTAX if rng.random() < 0.5 else ["a", " ", "9", "x y"])
            for _ in range(rng.randint(1, 10))
        )
        raw = "".join(pieces)
        kind = rng.randrange(6)
        body = [
            raw,
            str(rng.choice([md_text, md_code, md_reason])(raw)),
            f"| A | B |\n|---|---|\n| [{raw}](#a) | {md_text(raw)} |",
            f'!!! failure "{raw}"\n\n    - {raw}\n    - [{md_text(raw)}](x.md)',
            f'!!! warning "W"\n\n    {raw}\n    {md_text(raw)}\n\n{raw}',
            f"**{md_text(raw)}** {raw}\n## {md_code(raw)}\n{raw} `{raw}`",
        ][kind]
        fast = fast_markdown.convert(body, prose=True, link=lambda url: url)
        if fast is not None:
            assert fast == python_markdown(body), body
            taken[kind] += 1
    assert min(taken) >= 50, taken


@pytest.mark.parametrize(
    "body",
    [
        "Some *emphasis*.",
        "- a list",
        "1. a list",
        "> a quote",
        "!!! note\n\n    text",
        "a line with a break  \nand more",
        "**a **",
        "** a**",
        "****",
        "**open",
        "[a link](http://example.com/)",
        "[a link](page.md#anchor)",
        "![an image](a.md)",
        "`code` then `",
        "a | b\n--|--\nc | d",
        "| a | b |\n|:--|---|\n| c | d |",
        "| a | b |\n|---|---|",
        "| a | b |\n|---|---|\n| c |",
        "| a |\n|---|\n| b |\n## h",
        "text\n---",
        "    indented",
        '<span onclick="x">a</span>',
        "```\nfence\n```",
        "a\\",
        "x {: .cls }",
        "`a``b`",
        "[a]: b.md",
        '!!! note "t"\n\n    a\n\n    b',
        '!!! note "t"\n\n    - a\n    b',
        '!!! note "t"\n\n        a',
        '!!! note "t"\nnot indented',
        "[a](b.md#c)",
        "[a](?x)",
        "`#!python x`",  # inlinehilite highlights these
        "`:::python x`",
    ],
)
def test_prose_outside_the_subset_is_refused(body: str) -> None:
    assert fast_markdown.convert(body, prose=True, link=lambda url: url) is None


def test_links_only_where_the_page_says_how_to_write_them() -> None:
    body = "[← What changed](../index.md)"
    assert fast_markdown.convert(body, prose=True) is None  # no link rewriting given
    assert fast_markdown.convert(body, prose=True, link=lambda url: None) is None
    converted = fast_markdown.convert(body, prose=True, link=lambda url: "../index.html")
    assert converted == ('<p><a href="../index.html">← What changed</a></p>', [])
    assert fast_markdown.convert("**a** text", link=lambda url: url) is None  # no prose


def test_a_comparison_site_converts_only_pages_with_a_code_diff_with_python_markdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ddp16_job: object
) -> None:
    """Python-Markdown is called for the compile pages with a code diff (fences), not for
    the others nor the summary; the pages still link back to the summary, and the summary
    to them."""
    logs = {log.rank: log for log in ddp16_job.logs}  # type: ignore[attr-defined]
    before, after = load_source(logs[6]), load_source(logs[3])
    try:
        diff = diff_traces(before, after)
        bodies = {page.path: page.markdown for page in render_pages(diff)}
        converted = recording_python_markdown(monkeypatch)
        build_diff_site(diff, tmp_path / "site", in_job=True)
    finally:
        before.close()
        after.close()
    fenced = [path for path, text in bodies.items() if "```" in text]
    assert len(converted) == len(fenced) < len(bodies) - 5
    for path in bodies:
        if path.startswith("compiles/"):
            page = (tmp_path / "site" / path).with_suffix(".html").read_text(encoding="utf-8")
            assert '<p><a href="../index.html">← What changed</a></p>' in page
            summary = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
            assert f'<a href="{Path(path).with_suffix(".html").as_posix()}">' in summary


@pytest.mark.slow
@needs_base_rev
def test_tlsite_diff_sites_are_built_as_by_the_base_revision(tmp_path: Path) -> None:
    """``tlsite diff`` of the fixture pairs and of a hostile pair: every file of the site
    byte for byte what the base revision writes."""
    assert BASE_REV
    base = snapshot(BASE_REV, tmp_path / "base")
    hostile = tmp_path / "hostile.log"
    hostile.write_text(hostile_trace(), encoding="utf-8")
    pairs = [(_side(s, "before"), _side(s, "after")) for s in SCENARIOS]
    pairs.append((_side("gbfix", "before"), hostile))
    for index, (before, after) in enumerate(pairs):
        sites = []
        for label, pythonpath in (("now", PROJECT_ROOT.parent), ("base", base)):
            out = tmp_path / label / f"d{index}"
            command = [sys.executable, "-m", "tlsite", "diff", str(before), str(after)]
            command += ["-o", str(out), "--no-browser", "--quiet"]
            env = dict(os.environ, PYTHONPATH=str(pythonpath))
            subprocess.run(command, check=False, env=env, capture_output=True, timeout=300)
            sites.append(site_files(out))
        assert sites[0] and sites[0] == sites[1], (before, after)


def test_a_comparison_sites_search_index_is_materials_without_its_html_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ddp16_job: object
) -> None:
    """The pages are divided into sections by the report's reader of HTML, every section
    indexed where it is: the same index as Material's parser makes of the same pages."""
    from material.plugins.search import plugin as material_search

    from tlsite.mkdocs_plugin import search_index

    logs = {log.rank: log for log in ddp16_job.logs}  # type: ignore[attr-defined]
    before, after = load_source(logs[6]), load_source(logs[5])
    fed: list[str] = []
    try:
        diff = diff_traces(before, after)
        with monkeypatch.context() as patched:
            feed = material_search.Parser.feed
            patched.setattr(
                material_search.Parser,
                "feed",
                lambda self, html: (fed.append(html), feed(self, html)),
            )
            build_diff_site(diff, tmp_path / "site", in_job=True)
        assert fed == []
        # the plugin's index is not Material's own: Material's handler indexes the pages
        monkeypatch.setattr(search_index, "SearchIndex", type("NotMaterials", (), {}))
        build_diff_site(diff, tmp_path / "materials", in_job=True)  # Material indexes it
    finally:
        before.close()
        after.close()
    assert fed == []
    index = (tmp_path / "site" / "search" / "search_index.json").read_bytes()
    assert index == (tmp_path / "materials" / "search" / "search_index.json").read_bytes()
    assert index.count(b'"location":"compiles/') >= 20

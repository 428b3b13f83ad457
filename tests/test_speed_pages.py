"""Faster compile pages show what they showed: every page's visible text and headings.

The parts of a compile page that are tables (its summary, its compile-time phases) are HTML
from templates, put in after Python-Markdown has converted the rest (issue #19: Markdown was
the largest cost of a recompile storm's pages). What a reader sees must not change, and the
Markdown tree (``tlsite markdown`` built by plain ``mkdocs build``) must stay the same report.
(When the change landed, every page's visible text was also compared with the build before it
on three traces; a test pinned to that revision fails on every later change to any page, so
the lasting check is the Markdown tree's.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, TORCH_213, TRAINING_TRACE_GLOB

TIMEOUT_S = 600

TRACES = [
    FIXTURE_TRACES / "recompiles" / "recompiles.log",
    FIXTURE_TRACES / "torch-2.15" / "dynamic_shapes.log",
    FIXTURE_TRACES / "gbstorm" / "gbstorm.log",  # f-strings in its stacks: braces in the trie
    *sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))[:1],
]


class _Visible(HTMLParser):
    """A page's visible text (scripts, styles and the head left out) and its headings."""

    _HIDDEN = frozenset({"script", "style", "head", "template"})
    _VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "source", "wbr", "col", "area"})
    #: tags a browser shows apart from their neighbours, whatever the whitespace between them
    _BLOCK = frozenset(
        {"br", "div", "p", "li", "tr", "td", "th", "table", "summary", "details", "pre"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.headings: list[tuple[str, str | None, str]] = []
        self._hidden = 0
        self._heading: list[str] | None = None
        self._heading_tag: tuple[str, str | None] = ("", None)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._BLOCK:
            self.text.append(" ")
        if tag in self._VOID:
            return
        if tag in self._HIDDEN:
            self._hidden += 1
        if re.fullmatch(r"h[1-6]", tag):
            self._heading, self._heading_tag = [], (tag, dict(attrs).get("id"))

    def handle_endtag(self, tag: str) -> None:
        if tag in self._BLOCK:
            self.text.append(" ")
        if tag in self._HIDDEN:
            self._hidden -= 1
        if self._heading is not None and tag == self._heading_tag[0]:
            text = " ".join("".join(self._heading).split())
            self.headings.append((*self._heading_tag, text))
            self._heading = None

    @property
    def words(self) -> list[str]:
        """The text as words (a highlighter's spans split words apart, not whitespace)."""
        return "".join(self.text).split()

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        self.text.append(data)
        if self._heading is not None:
            self._heading.append(data)


def article(page: Path) -> tuple[list[str], list[tuple[str, str | None, str]]]:
    """The visible text and headings of the page's content (Material's ``<article>``)."""
    text = page.read_text(encoding="utf-8")
    start = text.index("<article")
    parser = _Visible()
    parser.feed(text[start : text.index("</article>", start)])
    return parser.words, parser.headings


def run(*command: str, cwd: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", *command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode in (0, 3), done.stderr[-3000:]


def build(trace: Path, out: Path) -> Path:
    run("tlsite", "build", str(trace), "-o", str(out), "--no-browser", "--quiet",
        "--no-zip", cwd=out.parent)  # fmt: skip
    return out


def pages(site: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(site)): p
        for p in site.rglob("*.html")
        if p.relative_to(site).parts[0] not in ("assets", "search")
    }


def plain_tree_pages(trace: Path, tmp_path: Path) -> dict[str, Path]:
    """The pages of ``tlsite markdown``'s tree of ``trace`` built by plain ``mkdocs build``,
    which must succeed without a warning (the tree's links name pages that exist)."""
    tree = tmp_path / "md"
    run("tlsite", "markdown", str(trace), "-o", str(tree), "--quiet", cwd=tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-f", str(tree / "mkdocs.yml")],
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.findall(r"^WARNING.*", done.stderr, re.MULTILINE) == []
    return pages(tree / "site")


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.parent.name + "/" + p.stem[:20])
def test_the_markdown_tree_built_by_plain_mkdocs_shows_the_same_pages(
    trace: Path, tmp_path: Path
) -> None:
    if not trace.is_file():
        pytest.skip(f"{trace} is not here")
    site = pages(build(trace, tmp_path / "site"))
    markdown = tmp_path / "md"
    run("tlsite", "markdown", str(trace), "-o", str(markdown), "--quiet",
        cwd=tmp_path)  # fmt: skip
    unit = next((markdown / "docs").glob("-_0_*/index.md")).read_text(encoding="utf-8")
    assert "tlsite-html" not in unit and '<th scope="row">First logged at</th>' in unit
    run("mkdocs", "build", "-f", str(markdown / "mkdocs.yml"),
        cwd=tmp_path)  # fmt: skip
    plain = pages(markdown / "site")
    report = [name for name in sorted(site) if "<article" in site[name].read_text("utf-8")]
    assert len(report) > 5 and [name for name in report if name not in plain] == []
    differ = [name for name in report if article(plain[name]) != article(site[name])]
    assert differ == []

"""Compile pages written from the stamp of Material's page template are Material's pages.

``tlsite build`` writes the pages outside the navigation from one render of Material's
``main.html`` per page shape (``mkdocs_plugin/stamp.py``), with the whitespace of the chrome
collapsed. Each site here is built twice, with the stamp and with every page rendered by
Material, and every HTML file is compared: the same bytes, or for a stamped page the same
article bytes and the same page once whitespace runs are collapsed; the stamp must also have
written pages, or the comparison would prove nothing.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, PROJECT_ROOT, TORCH_213, TRAINING_TRACE_GLOB
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, InclusionLevel
from mkdocs.structure.pages import Page
from test_hostile_trace import hostile_trace

from tlsite.cli import build
from tlsite.mkdocs_plugin import stamp


def _training() -> Path:
    found = sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))
    if not found:
        pytest.skip(f"no training trace in {TORCH_213}")
    return found[0]


def _hostile(folder: Path) -> Path:
    """Function names, file names and compile ids full of HTML, Markdown and Jinja syntax."""
    log = folder / "hostile.log"
    log.write_text(hostile_trace(), encoding="utf-8")
    return log


def _storm(folder: Path) -> Path:
    """One frame recompiled 30 times (``bench/make_trace.py``, from the recompiles fixture)."""
    log = folder / "storm.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py"), "--storm", "30"]
    subprocess.run([*make, "-o", str(log)], check=True, capture_output=True)
    return log


def _fixture(name: str) -> Callable[[Path], Path]:
    return lambda folder: FIXTURE_TRACES / name


TRACES: dict[str, Callable[[Path], Path]] = {
    "torch-2.13-training": lambda folder: _training(),
    "torch-2.4-recompiles": _fixture("torch-2.4/recompiles.log"),
    "torch-2.6-graph-breaks": _fixture("torch-2.6/graph_breaks.log"),
    "torch-2.15-dynamic-shapes": _fixture("torch-2.15/dynamic_shapes.log"),
    "hostile-names": _hostile,
    "storm-30": _storm,
}


def _build(
    log: Path, out: Path, monkeypatch: pytest.MonkeyPatch, *, stamped: bool
) -> tuple[dict[str, bytes], int]:
    """Every HTML file of the site (by path) and how many pages the stamp wrote."""
    stamps: list[stamp.PageStamp] = []

    class Counted(stamp.PageStamp):
        def __init__(self, files: list[File]) -> None:
            super().__init__(files)
            stamps.append(self)

    with monkeypatch.context() as patch:
        patch.setattr(stamp, "ENABLED", stamped)
        patch.setattr(stamp, "PageStamp", Counted)
        build(str(log), out, make_zip=False)
    pages = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.html"))}
    return pages, sum(s.stamped for s in stamps)


def _first_difference(ours: bytes, theirs: bytes) -> str:
    lines = difflib.unified_diff(
        theirs.decode().splitlines(),
        ours.decode().splitlines(),
        "material",
        "stamp",
        n=0,
        lineterm="",
    )
    return "\n".join(line[:200] for line in list(lines)[:12])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TRACES))
def test_stamped_site_is_the_site_material_writes(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = TRACES[name](tmp_path)
    ours, written = _build(log, tmp_path / "stamped", monkeypatch, stamped=True)
    theirs, none = _build(log, tmp_path / "material", monkeypatch, stamped=False)
    assert none == 0
    compile_pages = [p for p in ours if p.startswith("-_") and p.endswith("/index.html")]
    # every compile page but the first of its shape (rendered in full, to check the stamp)
    assert written >= len(compile_pages) - 1 > 0, (written, len(compile_pages))
    assert sorted(ours) == sorted(theirs)
    for path in ours:
        if ours[path] == theirs[path]:
            continue
        assert _article(ours[path]) == _article(theirs[path]), path
        mine, material = (stamp.collapse_whitespace(p[path].decode()) for p in (ours, theirs))
        assert mine == material, f"{path}:\n{_first_difference(mine.encode(), material.encode())}"


def _article(page: bytes) -> bytes:
    """The page's content (in its ``<article>``, without the template's indentation around
    it): the stamp never changes a byte of it."""
    start, end = page.index(b">", page.index(b"<article")) + 1, page.index(b"</article>")
    return page[start:end].strip()


def _config(tmp_path: Path) -> MkDocsConfig:
    config = MkDocsConfig()
    config.load_dict({"site_name": "t", "docs_dir": str(tmp_path), "use_directory_urls": False})
    errors, _ = config.validate()
    assert not errors
    return config


def _page(tmp_path: Path, path: str, meta: dict, *, in_nav: bool = False) -> Page:
    config = _config(tmp_path)
    inclusion = InclusionLevel.UNDEFINED if in_nav else InclusionLevel.NOT_IN_NAV
    file = File(path, str(tmp_path), config.site_dir, False, inclusion=inclusion)
    page = Page("t", file, config)
    page.meta = meta
    return page


@pytest.mark.parametrize(
    ("path", "meta", "in_nav", "selected"),
    [
        ("-_0_1_0/index.md", {"title": "[0/1] f", "render_macros": False}, False, True),
        ("compile_ids.md", {"title": "Compile ids"}, False, True),
        ("-_0_1_0/index.md", {"title": "[0/1] f"}, True, False),  # in the nav
        ("-_0_1_0/index.md", {"title": "[0/1] f", "hide": ["toc"]}, False, False),
        ("-_0_1_0/index.md", {"title": "[0/1] f", "status": "new"}, False, False),
        ("-_0_1_0/index.md", {"template": "other.html"}, False, False),
        ("assets/x/index.md", {}, False, False),  # beside the theme's files
        ("overview/x.md", {}, False, False),  # beside a navigation page
    ],
)
def test_only_pages_nothing_else_of_which_reaches_the_template_are_selected(
    tmp_path: Path, path: str, meta: dict, in_nav: bool, selected: bool
) -> None:
    nav_page = _page(tmp_path, "overview/index.md", {}, in_nav=True).file
    theme_file = File("assets/app.js", str(tmp_path), str(tmp_path / "site"), False)
    page = _page(tmp_path, path, meta, in_nav=in_nav)
    assert stamp.PageStamp([nav_page, theme_file]).select(page) is selected

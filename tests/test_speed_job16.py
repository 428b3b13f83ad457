"""A multi-rank job's per-site work done once per process (issue #19), the same site as before.

A job's site is built as many MkDocs sites (a landing page, a report per rank, a comparison
per diverging pair of ranks), several in each process: what does not depend on the site is
looked up once per process. Checked on the real 16-rank DDP job of ``tests/fixtures/traces/
ddp16``; with ``TLSITE_BASE_REV`` set to the revision before the change, the slow test builds
it with both revisions and compares every file of the sites and every entry of their zips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from corpus import FIXTURE_TRACES
from revisions import assert_built_as_by_base, needs_base_rev

from tlsite.core import load_source, resolve_input
from tlsite.core.analysis.diff import diff_traces
from tlsite.mkdocs_plugin import diff_build, stamp
from tlsite.mkdocs_plugin.site_config import build_site, site_config

JOB = FIXTURE_TRACES / "ddp16" / "ddp16.7z"


def _small_site(folder: Path) -> None:
    docs = folder / "docs"
    docs.mkdir(parents=True)
    (docs / "index.md").write_text("# A page\n\nText.\n", encoding="utf-8")
    config = site_config(docs_dir=str(docs), site_dir=str(folder / "site"), site_name="x")
    build_site(config, config_dir=str(folder))


def test_sites_of_a_process_list_the_installed_themes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MkDocs finds the theme among every installed package's entry points, and forgot the
    list after each site: a 16-rank job scanned them two dozen times."""
    _small_site(tmp_path / "first")
    from mkdocs import utils

    scans = []
    scan = utils.entry_points  # what MkDocs lists the installed themes with

    def counted(**kwargs: object) -> object:
        scans.append(kwargs)
        return scan(**kwargs)

    monkeypatch.setattr(utils, "entry_points", counted)
    for name in ("second", "third"):
        _small_site(tmp_path / name)
    assert scans == []
    assert (tmp_path / "third" / "site" / "index.html").is_file()


def _comparison_site(out: Path, monkeypatch: pytest.MonkeyPatch, *, fast: bool) -> int:
    """Build the comparison of ranks 6 and 3 into ``out``, with the stamp or with Material's
    page template for every page; how many pages the stamp wrote."""
    stamps: list[stamp.PageStamp] = []

    class Counted(stamp.PageStamp):
        def __init__(self, files: Any) -> None:
            super().__init__(files)
            stamps.append(self)

    with monkeypatch.context() as patch, resolve_input(str(JOB)) as resolved:
        patch.setattr(stamp, "ENABLED", fast)
        patch.setattr(stamp, "PageStamp", Counted)
        logs = {log.rank: log for log in resolved.logs}
        before, after = load_source(logs[6]), load_source(logs[3])
        try:
            diff_build.build_diff_site(diff_traces(before, after), out, in_job=True)
        finally:
            before.close()
            after.close()
    return sum(s.stamped for s in stamps)


@pytest.mark.slow
def test_a_comparison_writes_its_compile_pages_from_one_render_of_the_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's comparison of two ranks has a page per compile outside its navigation, for
    each of which Material rendered its page template in full. Written from the stamp, every
    file of the site is the same, but for the stamped pages' chrome whitespace (collapsed)."""
    stamped = _comparison_site(tmp_path / "fast", monkeypatch, fast=True)
    _comparison_site(tmp_path / "material", monkeypatch, fast=False)
    ours = {p.relative_to(tmp_path / "fast"): p for p in (tmp_path / "fast").rglob("*")}
    theirs = {p.relative_to(tmp_path / "material"): p for p in (tmp_path / "material").rglob("*")}
    assert ours.keys() == theirs.keys()
    files = [p for p in ours if ours[p].is_file()]
    differ = [p for p in files if ours[p].read_bytes() != theirs[p].read_bytes()]
    for path in differ:
        mine, material = (f[path].read_text(encoding="utf-8") for f in (ours, theirs))
        article = [
            p[p.index(">", p.index("<article")) + 1 : p.index("</article>")].strip()
            for p in (mine, material)
        ]
        assert article[0] == article[1], path
        assert stamp.collapse_whitespace(mine) == stamp.collapse_whitespace(material), path
    compile_pages = [p for p in files if p.parts[0] == "compiles" and p.suffix == ".html"]
    assert len(compile_pages) >= 5
    # the first page of each shape is rendered in full (and compared); the others are stamped
    assert stamped >= len(compile_pages) - 2


@pytest.mark.slow
@needs_base_rev
def test_the_ddp16_job_is_built_as_by_the_base_revision(tmp_path: Path) -> None:
    """Every page of the landing, rank and comparison sites, the search indexes and the zip's
    entries: byte for byte what the revision before the change builds."""
    assert_built_as_by_base(JOB, tmp_path)

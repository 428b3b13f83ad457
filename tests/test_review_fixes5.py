"""Fixes from the session-five review of the speed work (#19)."""

from __future__ import annotations

from pathlib import Path

from corpus import TORCH_213, TRAINING_TRACE_GLOB
from mkdocs import utils

from tlsite.cli import build
from tlsite.mkdocs_plugin import site_config


def test_builds_that_overlap_leave_mkdocs_its_own_theme_list() -> None:
    """Two builds in threads whose theme-list swaps interleave (one ends while the other
    runs) leave MkDocs' own ``get_themes`` in place when both are done."""
    mkdocs_own = utils.get_themes
    first, second = site_config._themes_listed_once(), site_config._themes_listed_once()
    first.__enter__()
    second.__enter__()
    assert utils.get_themes is not mkdocs_own
    first.__exit__(None, None, None)
    assert utils.get_themes is not mkdocs_own  # the second build still lists them once
    second.__exit__(None, None, None)
    assert utils.get_themes is mkdocs_own


def test_a_metrics_records_raw_file_is_not_called_empty(tmp_path: Path) -> None:
    """A compile page's ``compilation_metrics`` artifact line: its payload is empty (the
    fields are in the record), so it must not read "0 bytes"; it says where the fields are,
    and that table is on the page."""
    log = sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))[0]
    build(str(log), tmp_path / "site", make_zip=False)
    page = (tmp_path / "site" / "-_0_0_0" / "index.html").read_text(encoding="utf-8")
    heading = page.index(">compilation_metrics (")
    line = page[heading : page.index("</p>", heading)]
    assert "compilation_metrics_" in line and "raw file" in line
    assert "0 bytes" not in line and "metrics tables at the end of this page" in line
    assert 'id="metrics-0">Compilation metrics' in page

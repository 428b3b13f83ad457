"""Fixes from the session-five review of the speed work (#19)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from corpus import TORCH_213, TRAINING_TRACE_GLOB
from mkdocs import utils

from tlsite import __version__
from tlsite.cli import build
from tlsite.core import bundle
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


def test_a_zip_that_left_files_out_says_so_in_its_note(tmp_path: Path) -> None:
    """The manifest's note says the zip holds tlparse's files (raw.log, ...); a zip over the
    limit that left some out must not say so unqualified."""
    site = build(str(sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))[0]), tmp_path / "s").site

    def note() -> str:
        with zipfile.ZipFile(tmp_path / "s.zip") as opened:
            name = next(n for n in opened.namelist() if n.endswith("/" + bundle.MANIFEST_NAME))
            return json.loads(opened.read(name))["note"]

    assert "left_out_of_zip" not in note()  # everything is in
    (tmp_path / "s.zip").unlink()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", 1)
        bundle.write_bundle(site, "zip", trace="t.log", version=__version__)
    assert bundle.left_out_of_zip(site)
    assert "leaves some of those files out" in note() and "left_out_of_zip" in note()

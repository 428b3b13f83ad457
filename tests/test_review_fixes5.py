"""Fixes from the session-five review of the speed work (#19)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from corpus import TORCH_213, TRAINING_TRACE_GLOB
from mkdocs import utils
from zlib_ng import zlib_ng

from tlsite import __version__
from tlsite.cli import build, example_trace
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


@pytest.mark.slow
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


def _deflated(data: bytes, level: int) -> int:
    compressor = zlib_ng.compressobj(level, zlib_ng.DEFLATED, -15)  # raw deflate, as a zip entry
    return len(compressor.compress(data) + compressor.flush())


@pytest.mark.slow
def test_copies_that_fit_deflated_smaller_stay_when_the_fast_zip_came_out_too_big(
    tmp_path: Path,
) -> None:
    """The zip chose the fast level expecting to fit, and came out bigger than expected: the
    input's copies that fit at the default level go in at it, not left out."""
    site = build(str(sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))[0]), tmp_path / "s").site
    archive = tmp_path / "s.zip"
    with zipfile.ZipFile(archive) as opened:
        infos = {info.filename.split("/", 1)[1]: info for info in opened.infolist()}
    copies = [name for name in infos if bundle.input_copy_kind(name)]
    assert copies and {info.compress_size for info in infos.values()}  # all in, fast
    fast = sum(infos[name].compress_size for name in copies)
    small = sum(_deflated((site / name).read_bytes(), bundle.SMALL_LEVEL) for name in copies)
    assert fast - small > 100_000  # what deflating them smaller saves
    limit = archive.stat().st_size - 10_000  # just under what the fast zip took
    archive.unlink()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", limit)
        patch.setattr(bundle, "_site_level", lambda site, listing: bundle.FAST_LEVEL)
        bundle.write_bundle(site, "zip", trace="t.log", version=__version__)
    assert bundle.left_out_of_zip(site) == {}
    assert archive.stat().st_size <= limit
    with zipfile.ZipFile(archive) as opened:
        assert opened.testzip() is None
        names = {info.filename.split("/", 1)[1] for info in opened.infolist()}
    assert set(copies) <= names


def test_the_zip_estimate_does_not_depend_on_where_the_site_is(tmp_path: Path) -> None:
    """One site, two folders: the estimate (which picks the zip's level and what fits) is
    the same, as the zip's entry names are."""
    site = build(str(example_trace()), tmp_path / "s", make_zip=False).site
    names = bundle.site_listing(site)
    here = bundle.compressed_estimate(site, names, bundle.FAST_LEVEL)
    deep = tmp_path / ("d" * 100) / ("e" * 100)
    deep.mkdir(parents=True)
    moved = site.rename(deep / site.name)
    assert bundle.compressed_estimate(moved, names, bundle.FAST_LEVEL) == here

"""A recompile storm's zip stays attachable to a GitHub issue with every page in it: past the
limit it leaves out, after the copies of the input, tlparse's per-artifact copies of text the
compile pages show in full, and says so in the manifest and the summary.

On the first compile ids of a real torch 2.6 storm (``fixtures/traces/zipstorm``), with the
attachment limit lowered so that a small storm passes it.
"""

from __future__ import annotations

import html
import json
import re
import zipfile
from pathlib import Path

import pytest
from site_copies import copies_linked

import tlsite.core.bundle as bundle
from tlsite import __version__
from tlsite.cli import build, main

STORM = Path(__file__).parent / "fixtures" / "traces" / "zipstorm" / "zipstorm.log"
# a compile folder's file (a shown artifact whose raw file is a payload stays: not tlparse's copy)
_COPY_LINK = re.compile(r'<a href="\.\./(-_[^"]+)" class="tlsite-copy"[^>]*>raw file</a>')


@pytest.fixture(scope="module")
def storm_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("storm") / "storm"
    return build(str(STORM), out, bundle="none").site


def _zip(site: Path, tmp: Path) -> tuple[dict[str, int], dict]:
    """The site's zip (moved into ``tmp``): its entries' compressed sizes, and the manifest."""
    copies = copies_linked(site)
    dest, _ = bundle.write_bundle(site, "zip", trace=str(STORM), version=__version__, copies=copies)
    assert dest is not None
    tmp.mkdir()
    moved = dest.replace(tmp / dest.name)
    with zipfile.ZipFile(moved) as archive:
        sizes = {info.filename.split("/", 1)[1]: info.compress_size for info in archive.infolist()}
    manifest = json.loads((site / "manifest.json").read_text(encoding="utf-8"))
    return sizes, manifest


def _copies_shown(site: Path) -> dict[str, str]:
    """Each file of a compile's folder that its page links as a copy, with the page's text."""
    copies = {}
    for page in sorted(site.glob("-_*/index.html")):
        text = page.read_text(encoding="utf-8")
        for href in _COPY_LINK.findall(text):
            copies[href] = text
    return copies


def test_a_zip_under_the_limit_keeps_every_file(storm_site: Path, tmp_path: Path) -> None:
    sizes, manifest = _zip(storm_site, tmp_path / "whole")
    assert "left_out_of_zip" not in manifest
    assert set(sizes) == {f["path"] for f in manifest["files"]} | {"manifest.json"}


def test_a_storm_zip_over_the_limit_leaves_out_the_copies_of_text_its_pages_show(
    storm_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one deflate level (the limits below are measured at it)
    monkeypatch.setattr(bundle, "FAST_LEVEL", bundle.SMALL_LEVEL)
    whole, _ = _zip(storm_site, tmp_path / "whole")
    copies = _copies_shown(storm_site)
    assert len(copies) > 40  # seven inductor compiles: graphs, guards, cache entries, ...
    # a limit that the pages fit under, but not with the artifacts' copies
    inputs = {"raw.log", "raw.jsonl"}
    pages = sum(size for name, size in whole.items() if name not in {*copies, *inputs})
    limit = pages + sum(whole[name] for name in copies) // 2
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", limit)

    sizes, manifest = _zip(storm_site, tmp_path / "small")
    small = tmp_path / "small" / f"{storm_site.name}.zip"
    assert small.stat().st_size <= limit
    left = bundle.left_out_of_zip(storm_site)
    assert set(left) == {*copies, *inputs}
    assert set(sizes) == set(whole) - set(left)
    every_page = {p.relative_to(storm_site).as_posix() for p in storm_site.rglob("*.html")}
    metrics = {name for name in copies if "compilation_metrics_" in name}
    assert metrics and every_page - metrics <= set(sizes)  # tlparse's output code pages too
    assert {f["path"] for f in manifest["files"]} >= set(left)  # still listed, in the folder
    assert "compile page shows in full" in left["-_0_3_0/dynamo_output_graph_30.txt"]
    for name, page in copies.items():  # what was left out, the page shows (its start)
        if name in metrics:
            continue  # a pointer to the page's table of the record (see test_speed_zipfit)
        shown = re.sub(r"\s+", "", html.unescape(re.sub(r"<[^>]+>", "", page)))
        start = re.sub(r"\s+", "", (storm_site / name).read_text(encoding="utf-8"))[:200]
        assert start in shown, name


def test_the_summary_says_what_the_zip_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", 1)
    assert main(["build", str(STORM), "-o", str(tmp_path / "site")]) == 0
    out = capsys.readouterr().out
    copies = len(_copies_shown(tmp_path / "site"))
    assert (
        f"Note: raw.jsonl and raw.log (copies of the input log) and {copies:,} raw artifact "
        "files (tlparse's copies of text the compile pages show in full" in out
    )
    assert "listed in manifest.json" in out


def test_the_overview_says_a_zip_may_leave_out_the_artifacts_raw_files(storm_site: Path) -> None:
    text = (storm_site / "index.html").read_text(encoding="utf-8")
    assert "each artifact&rsquo;s raw file whose text" in text or "raw file whose text" in text


def test_a_storm_compile_page_lists_every_checked_cache_entry_in_a_light_block(
    storm_site: Path,
) -> None:
    """Compile ``[0/k]`` of a storm checked ``k`` cache entries: the list of their failed
    guards grows with the square of the storm, and as a Markdown code block each line carried
    an anchor and a link (three ids) that made it most of a real storm's compile pages."""
    page = (storm_site / "-_0_6_0" / "index.html").read_text(encoding="utf-8")
    start = page.index("All 6 cache entries that were checked")
    block = page[start : page.index("</details>", start)]
    text = html.unescape(re.sub(r"<[^>]+>", "", block.split("</summary>", 1)[1]))
    entries = [line.strip() for line in text.strip().splitlines()]
    assert entries == [f"0/{k}: L['i'] == {k}" for k in range(5, -1, -1)]
    assert "__codelineno" not in block
    assert len(block) < 2 * len(text)  # the markup is not several times the text

"""A recompile storm's zip fits GitHub's attachment limit with every report page in it: over
the limit, its manifest names each group of files left out once (with why), without the
SHA-256 of files the zip does not hold, and tlparse's pages of compilation metrics records
(pointers to the compile page's table of the record) go out with the other copies of what the
compile pages show, their "raw file" links marked as such.

On the first compile ids of a real torch 2.6 storm (``fixtures/traces/zipstorm``), with the
attachment limit lowered so that a small storm passes it.
"""

from __future__ import annotations

import hashlib
import html
import json
import posixpath
import re
import zipfile
from pathlib import Path
from urllib.parse import unquote

import pytest
from site_copies import copies_linked

import tlsite.core.bundle as bundle
from tlsite import __version__
from tlsite.cli import build

STORM = Path(__file__).parent / "fixtures" / "traces" / "zipstorm" / "zipstorm.log"
_ANCHOR = re.compile(r"<a\b([^>]*)>")
_HREF = re.compile(r'\bhref="([^"]*)"')


@pytest.fixture(scope="module")
def storm_zip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The storm's site and its zip written with an attachment limit no zip fits under."""
    out = tmp_path_factory.mktemp("storm") / "storm"
    site = build(str(STORM), out, bundle="none").site
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", 1)
        copies = copies_linked(site)
        dest, _ = bundle.write_bundle(
            site, "zip", trace=str(STORM), version=__version__, copies=copies
        )
    assert dest is not None
    return site, dest


def _entries(archive: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(archive) as opened:
        return {info.filename.split("/", 1)[1]: opened.read(info) for info in opened.infolist()}


def test_the_manifest_says_each_left_out_group_once_and_vouches_only_for_what_the_zip_holds(
    storm_zip: tuple[Path, Path],
) -> None:
    site, archive = storm_zip
    entries = _entries(archive)
    text = entries[bundle.MANIFEST_NAME].decode("utf-8")
    manifest = json.loads(text)
    groups = manifest["left_out_of_zip"]
    assert set(groups) == {"artifact copies", "raw.log", "raw.jsonl"}
    left = bundle.left_out_of_zip(site)
    assert len(groups["artifact copies"]["files"]) > 40
    for group in groups.values():
        assert text.count(json.dumps(group["why"])) == 1  # said once, not once per file
        assert set(group["files"]) <= set(left)
    assert sorted(left) == sorted(name for g in groups.values() for name in g["files"])
    # every file of the folder is listed (how --overwrite knows the folder is tlsite's)
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) == set(bundle.site_listing(site))
    assert set(listed) == (set(entries) - {bundle.MANIFEST_NAME}) | set(left)
    for name, fields in listed.items():
        assert fields["size"] == (site / name).stat().st_size, name
        if name in left:  # not in the zip: no digest to check it against
            assert "sha256" not in fields, name
            assert name not in entries
        else:
            assert fields["sha256"] == hashlib.sha256(entries[name]).hexdigest(), name


def test_tlparse_metrics_pages_go_out_with_the_copies_and_no_page_links_a_missing_file_unmarked(
    storm_zip: tuple[Path, Path],
) -> None:
    site, archive = storm_zip
    entries = _entries(archive)
    left = bundle.left_out_of_zip(site)
    metrics = sorted(site.glob("-_*/*compilation_metrics_*.html"))
    assert len(metrics) >= 7  # one per compile id
    for page in metrics:
        name = page.relative_to(site).as_posix()
        assert name in left and name not in entries
        # a pointer to the compile page, whose table shows every field of the record
        assert "Every field of this record is in the Compilation metrics table" in page.read_text(
            encoding="utf-8"
        )
    # every other page of the site is in the zip: the report's and tlparse's own
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert pages - set(left) <= set(entries)
    assert {"index.html", "-_0_0_0/index.html", "compile_ids.html"} <= set(entries)
    # a page of the zip links a file the zip lacks only by a "raw file" link marked as a copy
    unmarked = []
    for name, data in entries.items():
        if not name.endswith(".html"):
            continue
        folder = posixpath.dirname(name)
        for attrs in _ANCHOR.findall(data.decode("utf-8")):
            href = _HREF.search(attrs)
            path = unquote(html.unescape(href.group(1))).split("#")[0] if href else ""
            if not path or re.match(r"[a-z][a-z0-9+.-]*:", path) or path.startswith("/"):
                continue
            target = posixpath.normpath(posixpath.join(folder, path))
            if target not in entries and 'class="tlsite-copy"' not in attrs:
                unmarked.append(f"{name} -> {target}")
    assert unmarked == []
    compile_page = (site / "-_0_0_0" / "index.html").read_text(encoding="utf-8")
    metrics_name = next(p.name for p in metrics if p.parent.name == "-_0_0_0")
    assert f'href="../-_0_0_0/{metrics_name}" class="tlsite-copy"' in compile_page
    assert 'id="metrics-0"' in compile_page  # the table the pointer points to

"""A big trace's zip, written while its site is built: the files of its compile folders are
deflated while the pages are, the small ones too when the folders' files are big on average
(a big trace's), not after the last page, when only the zip's worker is left running. A
storm's many small files are still deflated only at the end, once the zip knows they fit.
The zip holds every file's bytes either way.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from site_copies import zip_as_the_worker_late

import tlsite.core.bundle as bundle


def _site(root: Path, sizes: list[int]) -> Path:
    """A site with one page and a compile folder of files of ``sizes`` bytes."""
    site = root / "site"
    (site / "-_0_0_0").mkdir(parents=True)
    (site / "index.html").write_text("<p>report</p>\n" * 100)
    for number, size in enumerate(sizes):
        line = f"    add_{number} = torch.ops.aten.add.Tensor(x, y)\n"
        text = line * (size // len(line) + 1)
        (site / "-_0_0_0" / f"artifact_{number}.txt").write_text(text[:size])
    return site


#: A big trace's or a storm's input: its zip is not expected to fit at the fast level (one
#: that is deflates every file ahead whatever its size: test_speed_job16c).
BIG_INPUT = int(bundle.GITHUB_ATTACHMENT_LIMIT / bundle.FAST_ZIP_PER_INPUT_BYTE) + 1


def _deflated_late(site: Path, dest: Path) -> list[str]:
    """Zip ``site`` as the build's worker does for a big input; the files it deflated after
    the last page."""
    assert bundle.deflate_level(BIG_INPUT * bundle.FAST_ZIP_PER_INPUT_BYTE) != bundle.FAST_LEVEL
    late = zip_as_the_worker_late(site, dest, BIG_INPUT)
    with zipfile.ZipFile(dest) as archive:
        assert archive.testzip() is None
        for info in archive.infolist():
            assert archive.read(info) == (site / info.filename.split("/", 1)[1]).read_bytes()
        names = {info.filename.split("/", 1)[1] for info in archive.infolist()}
    assert names == {*bundle.site_listing(site), bundle.MANIFEST_NAME}  # every file
    return late


def test_a_big_traces_small_artifact_files_are_deflated_before_the_last_page(
    tmp_path: Path,
) -> None:
    site = _site(tmp_path, [200_000, 2_000, 3_000, 200_000, 1_000])
    assert _deflated_late(site, tmp_path / "site.zip") == [bundle.MANIFEST_NAME]


def test_a_storms_small_artifact_files_wait_for_the_end(tmp_path: Path) -> None:
    site = _site(tmp_path, [20_000, *[2_000] * 20])
    late = _deflated_late(site, tmp_path / "site.zip")
    assert len([name for name in late if name.startswith("-_0_0_0/")]) == 20


def test_mutated_outputs_are_counted_at_word_starts_as_the_word_boundary_pattern_does() -> None:
    from tlsite.core.analysis import artifact_details

    cases = [
        "mutates_data=True",
        "x mutates_data=True, mutates_data=True)",
        "xmutates_data=True _mutates_data=True émutates_data=True ٣mutates_data=True",
        "(mutates_data=True\nmutates_data=True-mutates_data=Truemutates_data=True",
        "mutates_data=False",
    ]
    for text in cases:
        view = artifact_details.text_view("aot_forward_graph_fw_metadata", text)
        assert view is not None
        assert view.mutated == len(re.findall(r"\bmutates_data=True", text)), text

"""A storm's pages written with less per-page work around them (issue #19, ``storm08``).

A recompile storm's compile pages each carry HTML kept in the payload store (the metrics and
artifact tables), are stripped of search's ``data-search-*`` attributes and are handed to the
zip's helper as they are written. Per page, each of these cost more than the work itself: the
pack file opened once per block, a regular expression with no literal to look for run over
every page, a message apiece to the zip's helper. What a user gets must not change: the same
pages, byte for byte, and the same zip.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from corpus import PROJECT_ROOT

from tlsite.core.render import page as page_module


def _storm(folder: Path, compile_ids: int) -> Path:
    """One frame recompiled ``compile_ids`` times (``bench/make_trace.py``)."""
    log = folder / f"storm{compile_ids}.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py")]
    subprocess.run([*make, "--storm", str(compile_ids), "-o", str(log)], check=True)
    return log


def _files(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


def _zip(site: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(site.with_name(f"{site.name}.zip")) as bundle:
        return [(name.split("/", 1)[1], bundle.read(name)) for name in bundle.namelist()]


@pytest.mark.slow
def test_a_storms_stored_tables_are_read_without_opening_the_pack_per_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every compile page shows its metrics table; the build read none of the tables by
    opening the pack file anew (``read_slice``), and the pages are the ones it gave."""
    from tlsite.cli import build

    trace = _storm(tmp_path, 20)
    opened: list[int] = []
    read_slice = page_module.read_slice

    def counted(path: str, offset: int, size: int) -> bytes:
        opened.append(size)
        return read_slice(path, offset, size)

    monkeypatch.setattr(page_module, "read_slice", counted)
    site = build(str(trace), tmp_path / "site", make_zip=False).site
    pages = sorted(site.glob("-_0_*/index.html"))
    assert len(pages) == 20
    for compile_page in pages:
        assert "Compilation metrics" in compile_page.read_text(encoding="utf-8")
    assert opened == []

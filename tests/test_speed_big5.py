"""A big trace's pages get their highlighted code without the build process handling it
(issue #19, 128 MB traces).

A 128 MB trace's compile pages are 130 MB of HTML, almost all of it highlighted code that
the highlight workers already wrote to their pack files as UTF-8. The build process read
each block back, decoded it, put it into the page's text, and MkDocs encoded and wrote the
page again. In tlsite's own site the plugin is the last to see a page, so MkDocs now writes
a page of much code with the code placeholders left in, and the code is copied into the file
from the pack by the kernel (``Highlighter.copy_into``); a page of little code (a storm's)
gets it before it is written. The pages, the search index and the zip must be
byte for byte what the base revision built.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from corpus import PROJECT_ROOT, TORCH_213, TRAINING_TRACE_GLOB
from mkdocs.plugins import BasePlugin
from revisions import BASE_REV, assert_built_as_by_base

from tlsite.cli import build
from tlsite.core import load
from tlsite.core.render.highlight import BLOCK_ID, CodeBlock, Highlighter
from tlsite.mkdocs_plugin import pipeline, report
from tlsite.mkdocs_plugin.build import build_report

#: The revision whose sites are the reference: the last whose compile pages these match (the
#: last change to what a site holds: session ten's graph-break storm pages).
BASE = BASE_REV or "ad5750e"  # session thirteen: tlsite.css (long artifact names)
TRAINING = sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))[0] if TORCH_213.exists() else None
needs_training = pytest.mark.skipif(TRAINING is None, reason="no torch 2.13 training trace")


@pytest.mark.parametrize("sendfile", [True, False], ids=["sendfile", "no-sendfile"])
def test_copy_into_writes_the_bytes_html_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sendfile: bool
) -> None:
    """With the block id put in, after what the page file holds already; code that holds
    the id's marker itself gets it replaced there too, as ``html()`` does. Without
    ``sendfile`` (Windows; macOS sends only to sockets) the bytes are read and written."""
    if not sendfile:
        monkeypatch.setattr(os, "sendfile", _no_sendfile, raising=False)
    code = tmp_path / "pack"
    texts = [
        "def f(x):\n    return x + 1  # plain\n",
        f"s = '{BLOCK_ID}'  # the marker in the code\nt = \"é ✓\"\n",
        '{"key": [1, 2.5, null]}\n',
    ]
    data = [text.encode("utf-8") for text in texts]
    code.write_bytes(b"".join(data))
    blocks, offset = [], 0
    for n, (piece, lang) in enumerate(zip(data, ["python", "python", "json"], strict=True)):
        blocks.append(CodeBlock(str(code), offset, len(piece), f"md5-{n}", lang))
        offset += len(piece)
    for workers in (0, 1):
        highlighter = Highlighter(tmp_path / f"cache-{workers}", workers=workers)
        try:
            highlighter.start()
            keys = [highlighter.submit(block) for block in blocks]
            for n, key in enumerate(keys):
                page = tmp_path / f"page-{workers}-{n}.html"
                with open(page, "wb") as dest:
                    dest.write("<p>before ✓</p>".encode())
                    highlighter.copy_into(key, f"artifact-{n}", dest)
                    dest.write(b"<p>after</p>")
                expected = "<p>before ✓</p>" + highlighter.html(key, f"artifact-{n}")
                assert page.read_bytes() == (expected + "<p>after</p>").encode("utf-8")
                assert BLOCK_ID not in page.read_text(encoding="utf-8")
        finally:
            highlighter.close()


def _no_sendfile(*args: object) -> int:
    raise OSError(errno.ENOTSOCK, "sendfile to a file")


@needs_training
@pytest.mark.slow  # three builds
def test_a_page_gets_its_code_after_it_is_written_only_when_it_shows_much(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of much code gets it copied in by the kernel once MkDocs has written it, never
    through the build process's text; a page of little gets it before it is written (reading
    a storm's small pages back and writing them again cost more than their code). Each page
    goes one way or the other, and its bytes are the same whichever way it went."""
    decoded: list[str] = []
    copied: list[str] = []
    html, copy_into = Highlighter.html, Highlighter.copy_into

    def counted(self: Highlighter, key: str, block_id: str) -> str:
        decoded.append(block_id)
        return html(self, key, block_id)

    def copied_into(self: Highlighter, key: str, block_id: str, dest: BinaryIO) -> None:
        copied.append(block_id)
        copy_into(self, key, block_id, dest)

    code_bytes = report._code_bytes
    shown: dict[frozenset[str], int] = {}  # a page's code blocks (their ids) -> its code

    def measured(blocks: dict[str, Any]) -> int:
        size = code_bytes(blocks)
        shown[frozenset(t for t, b in blocks.items() if isinstance(b, CodeBlock))] = size
        return size

    monkeypatch.setattr(Highlighter, "html", counted)
    monkeypatch.setattr(Highlighter, "copy_into", copied_into)
    monkeypatch.setattr(report, "_code_bytes", measured)
    assert TRAINING is not None
    built: dict[str, tuple[dict[str, bytes], set[str], set[str]]] = {}
    much_code = report.CODE_AFTER_WRITING_MIN
    for name, least in (("all after", 0), ("default", much_code), ("none", 1 << 62)):
        monkeypatch.setattr(report, "CODE_AFTER_WRITING_MIN", least)
        decoded.clear()
        copied.clear()
        shown.clear()
        site = build(str(TRAINING), tmp_path / name.replace(" ", "-"), make_zip=False).site
        pages = {str(p.relative_to(site)): p.read_bytes() for p in site.glob("-_*/index.html")}
        for text in pages.values():  # every block in, each with its own id
            assert b"<!--tlsite-code:" not in text
            assert BLOCK_ID.encode() not in text
        assert sum(text.count(b'data-block="artifact-') for text in pages.values()) == len(
            decoded
        ) + len(copied)
        built[name] = (pages, set(decoded), set(copied))
    assert not built["all after"][1] and built["all after"][2]
    assert built["none"][1] and not built["none"][2]
    pages, before, after = built["default"]
    assert before and after  # the training trace has pages of a few kB and of megabytes
    for text in pages.values():
        ids = {i.decode() for i in re.findall(rb'data-block="(artifact-[0-9]+)"', text)}
        if ids:  # the whole page one way: after writing if it holds much code
            much = shown[frozenset(ids)] >= much_code
            assert ids <= (after if much else before)
    assert built["all after"][0] == pages == built["none"][0]


@needs_training
@pytest.mark.slow
def test_a_plugin_after_tlsites_sees_the_code_in_every_page(tmp_path: Path) -> None:
    """A plugin that sees pages after tlsite's (a user's minifier, say) gets them with
    their code in, as MkDocs would have written them: then the code is not put in later."""

    class Later(BasePlugin):  # type: ignore[type-arg]
        def on_post_page(self, output: str, /, *, page: Any, config: Any) -> str:
            seen.append("<!--tlsite-code:" not in output)
            return output

    seen: list[bool] = []
    later = Later()
    later.load_config({})
    trace = load(str(TRAINING))
    try:
        site = tmp_path / "later"
        build_report(trace, site, raw_log=TRAINING, extra_plugins={"later": later})
    finally:
        trace.close()
    alone = build(str(TRAINING), tmp_path / "alone", make_zip=False).site
    assert seen and all(seen)
    pages = sorted(p.relative_to(alone) for p in alone.glob("-_*/index.html"))
    assert pages
    for page in pages:
        assert (site / page).read_bytes() == (alone / page).read_bytes(), page


def _big_trace(folder: Path) -> Path:
    """A 20 MB trace of ``bench/make_trace.py --size`` (copies of the training trace: compile
    pages of megabytes, highlighted by worker processes, zipped while the site is built)."""
    log = folder / "big20.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py"), "--size", "20MB"]
    subprocess.run([*make, "-o", str(log)], check=True, capture_output=True, timeout=300)
    return log


@pytest.mark.slow
@needs_training
def test_a_big_trace_builds_the_site_and_zip_the_base_revision_built(tmp_path: Path) -> None:
    """Every file of the site and every zip entry, byte for byte (a guard: the base built
    them with the code decoded and put into each page's text)."""
    log = _big_trace(tmp_path)
    size = log.stat().st_size  # the big path: highlighted ahead, zipped while building
    assert size >= max(pipeline.HIGHLIGHT_AHEAD_MIN_BYTES, pipeline.ZIP_WHILE_BUILDING_MIN_BYTES)
    assert_built_as_by_base(log, tmp_path, BASE)

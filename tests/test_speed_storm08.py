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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import PROJECT_ROOT
from revisions import site_files, zip_in_order

from tlsite.core.render import page as page_module

if TYPE_CHECKING:
    from tlsite.core.render.highlight import CodeBlock


def _storm(folder: Path, compile_ids: int) -> Path:
    """One frame recompiled ``compile_ids`` times (``bench/make_trace.py``)."""
    log = folder / f"storm{compile_ids}.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py")]
    subprocess.run([*make, "--storm", str(compile_ids), "-o", str(log)], check=True)
    return log


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


_TRICKY = [
    "",
    "no attribute here",
    '<p data-search-exclude="true">x</p>',
    '<p\tdata-search-exclude="true">x</p>',
    '<p\u00a0data-search-exclude="true">x</p>',  # a no-break space is a space to \s
    '<p  data-search-exclude="true">two spaces</p>',
    '<p data-search-exclude="true" data-search-boost="2">both</p>',
    '<p data-search-exclude="true"data-search-x="1">no space between</p>',
    '<p data-search-exclude="true"> data-search-x="1"</p>',
    '<p data-search-="x">no name</p><p data-search-exclude="">empty</p>',
    '<p data-search-exclude="unclosed>',
    'data-search-a="1" at the start, data-search-b="2" at the end data-search-c="3"',
    ' data-search-é="1" a unicode name',
    '<p data-data-search-exclude="true">',
    'x data-search-exclude="a\nb" across lines',
]


@pytest.mark.parametrize("html", _TRICKY)
def test_search_attributes_are_removed_as_materials_pattern_removes_them(html: str) -> None:
    from tlsite.mkdocs_plugin.search_index import _SEARCH_ATTRIBUTE, without_search_attributes

    assert without_search_attributes(html) == _SEARCH_ATTRIBUTE.sub("", html)


def test_search_attributes_removed_as_material_does_on_random_text() -> None:
    import random

    from tlsite.mkdocs_plugin.search_index import _SEARCH_ATTRIBUTE, without_search_attributes

    pieces = ["data-search-", "exclude", "=", '"', "true", " ", "\n", "\t", "x", "<p", ">", "é"]
    rng = random.Random(8)
    for _ in range(3000):
        html = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        assert without_search_attributes(html) == _SEARCH_ATTRIBUTE.sub("", html), html


@pytest.mark.slow
def test_pages_lose_their_search_attributes_without_materials_scan_of_every_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No page keeps a ``data-search-*`` attribute, and Material's pattern, which has no
    literal to look for, was not run over the pages."""
    import re

    from material.plugins.search import plugin as material_search

    from tlsite.cli import build

    trace = _storm(tmp_path, 20)
    scanned: list[int] = []

    class CountingRe:
        def __getattr__(self, name: str) -> object:
            return getattr(re, name)

        @staticmethod
        def sub(pattern: str, repl: str, string: str) -> str:
            if "data-search-" in str(pattern):
                scanned.append(len(string))
            return re.sub(pattern, repl, string)

    monkeypatch.setattr(material_search, "re", CountingRe())
    site = build(str(trace), tmp_path / "site", make_zip=False).site
    pages = [p for p in site.rglob("*.html") if "assets" not in p.parts]
    assert len(pages) > 20
    for html_page in pages:
        assert "data-search-" not in html_page.read_text(encoding="utf-8"), html_page
    assert scanned == []


def test_a_material_search_handler_that_does_more_is_kept(tmp_path: Path) -> None:
    """Material's page handler is replaced only while it is the one whose work the
    replacement repeats: a Material whose handler does something else keeps its own."""
    from types import SimpleNamespace

    from material.plugins.search.plugin import SearchPlugin

    from tlsite.mkdocs_plugin.search_index import index_pages_with

    class Changed(SearchPlugin):
        def on_page_context(self, context, *, page, config, nav):  # type: ignore[no-untyped-def]
            self.search_index.add_entry_from_context(page)
            page.content = page.content.replace("x", "y")  # not what ours does

    for plugin, replaced in ((SearchPlugin(), True), (Changed(), False)):
        events = {"page_context": [plugin.on_page_context]}
        index_pages_with(plugin, SimpleNamespace(plugins=SimpleNamespace(events=events)))
        (handler,) = events["page_context"]
        assert (getattr(handler, "__self__", None) is not plugin) == replaced


@pytest.mark.slow
def test_a_storms_files_reach_the_zip_worker_in_batches_and_zip_as_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zip made while the site is built gets its files' names a batch per message, and
    holds the same entries, in the same order, as when each name was a message."""
    from tlsite.cli import build
    from tlsite.core import bundle, worker
    from tlsite.mkdocs_plugin import pipeline, report

    trace = _storm(tmp_path, 20)
    monkeypatch.setattr(pipeline, "ZIP_WHILE_BUILDING_MIN_BYTES", 0)
    monkeypatch.setattr(report, "FILES_ASIDE_MIN", 0)  # the storm's files written aside too
    messages: list[object] = []
    send = worker.WorkerProcess.send

    def counted(self: worker.WorkerProcess, message: object) -> None:
        messages.append(message)
        send(self, message)

    monkeypatch.setattr(worker.WorkerProcess, "send", counted)
    batched = build(str(trace), tmp_path / "batched", make_zip=True).site
    names = [m for m in messages if isinstance(m, (str, list)) and "index.html" in str(m)]
    files = len(site_files(batched))
    assert files > 200
    assert 0 < len(names) <= files // 16  # the zip's names, many to a message
    monkeypatch.setattr(bundle, "ZIP_BATCH", 1, raising=False)
    one_by_one = build(str(trace), tmp_path / "one_by_one", make_zip=True).site
    assert zip_in_order(batched) == zip_in_order(one_by_one)
    assert site_files(batched) == site_files(one_by_one)


def test_highlighting_ahead_measures_small_artifacts_without_reading_them_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a storm is read, each artifact's code block goes to the highlighter as the page
    will show it (the same block ``artifact_code`` gives), and no artifact smaller than the
    cut is read back from the store to be measured."""
    from tlsite.core import LogSource, load_source
    from tlsite.core.render import pages
    from tlsite.core.render.page import INLINE_LIMIT
    from tlsite.core.render.pages import artifact_code, highlight_ahead
    from tlsite.core.store import PayloadStore

    monkeypatch.setattr(pages, "AHEAD_MIN_ARTIFACT_BYTES", 0)  # a storm's small ones too
    trace_path = _storm(tmp_path, 12)
    submitted: list[object] = []

    class Collecting:
        def submit(self, block: object) -> str:
            submitted.append(block)
            return ""

    read_back: list[int] = []
    read_bytes = PayloadStore.read_bytes

    def counted(self: PayloadStore, ref: object) -> bytes:
        data = read_bytes(self, ref)  # type: ignore[arg-type]
        read_back.append(len(data))
        return data

    monkeypatch.setattr(PayloadStore, "read_bytes", counted)
    source = LogSource(trace_path.name, lambda: open(trace_path, "rb"))  # noqa: SIM115
    trace = load_source(source, on_artifact=highlight_ahead(Collecting()))  # type: ignore[arg-type]
    during_read = list(read_back)
    assert len(submitted) >= 12 * 4
    expected = []
    for unit in trace.units.values():
        for artifact in unit.artifacts:
            shown = artifact_code(trace, artifact)
            if shown is not None:
                expected.append(shown[0])
    assert submitted == expected
    small = [size for size in during_read if size <= INLINE_LIMIT]
    assert len(small) < len(submitted) // 4  # (JSON payloads read once to pretty-print)


def test_a_language_is_looked_up_once_and_highlights_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Code of a language the fast lexer lacks (a guard diff) is highlighted by Pygments
    with its lexer looked up once, not once per block: the same HTML as a lexer looked up
    for each block gives."""
    import pygments.lexers

    from tlsite.core.render import highlight

    texts = [f"--- a\n+++ b\n@@ -{n},2 +{n},2 @@\n-x = {n}\n+x = {n + 1}\n" for n in range(40)]
    highlight._lexer.cache_clear()
    fresh = [highlight.highlight_html(text, "diff") for text in texts[:1]]
    looked_up: list[str] = []
    get_lexer = pygments.lexers.get_lexer_by_name

    def counted(name: str, **options: object) -> object:
        looked_up.append(name)
        return get_lexer(name, **options)

    monkeypatch.setattr(pygments.lexers, "get_lexer_by_name", counted)
    highlight._lexer.cache_clear()
    html = [highlight.highlight_html(text, "diff") for text in texts]
    assert looked_up == ["diff"]
    assert html[0] == fresh[0]
    assert 'class="gd"' in html[3] and 'class="gi"' in html[3]  # deleted, inserted lines
    for n, text in enumerate(texts):
        highlight._lexer.cache_clear()  # a lexer of its own for this block
        assert highlight.highlight_html(text, "diff") == html[n]


def test_blocks_go_to_the_highlight_worker_a_batch_per_message(
    tmp_path: Path, code_blocks: Callable[[list[bytes]], list[CodeBlock]]
) -> None:
    """Blocks submitted once the workers are started go to them many to a message, the
    store flushed before each; every one is highlighted as when it was sent alone."""
    from tlsite.core.render.highlight import SEND_BATCH, Highlighter

    blocks = code_blocks([f"x_{n} = {n}\n".encode() for n in range(200)])
    messages: list[object] = []
    flushes: list[int] = []
    highlighter = Highlighter(tmp_path / "cache", workers=1)
    send = highlighter._workers[0].send

    def counted(message: object) -> None:
        messages.append(message)
        send(message)

    highlighter._workers[0].send = counted  # type: ignore[method-assign]
    highlighter.before_sending = lambda: flushes.append(len(messages))
    try:
        highlighter.start()
        for block in blocks:
            highlighter.submit(block)
        html = [highlighter.html(block.key, f"b{n}") for n, block in enumerate(blocks)]
    finally:
        highlighter.close()
    assert 0 < len(messages) <= len(blocks) // SEND_BATCH + 1
    assert len(flushes) == len(messages)
    alone = Highlighter(tmp_path / "alone", workers=0)
    try:
        assert html == [alone.html(alone.submit(b), f"b{n}") for n, b in enumerate(blocks)]
    finally:
        alone.close()


@pytest.mark.slow
def test_pages_are_written_while_the_helper_still_writes_the_tlparse_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build does not wait for the helper writing a storm's tlparse files before its
    first page, only at its end; the zip gets them before the pages all the same: the same
    entries in the same order as when the build waited for them at once."""
    from tlsite.cli import build
    from tlsite.core.files_aside import FilesAside
    from tlsite.mkdocs_plugin import pipeline, report

    trace = _storm(tmp_path, 20)
    monkeypatch.setattr(pipeline, "ZIP_WHILE_BUILDING_MIN_BYTES", 0)
    monkeypatch.setattr(report, "FILES_ASIDE_MIN", 0)
    pages_written: list[int] = []
    at_finish: list[int] = []
    on_post_page = report.ReportPages.on_post_page
    finish = FilesAside.finish

    def counted(self: report.ReportPages, output: str, page: object, config: object) -> str:
        pages_written.append(1)
        return on_post_page(self, output, page, config)

    def finished(self: FilesAside) -> None:
        at_finish.append(len(pages_written))
        finish(self)

    monkeypatch.setattr(report.ReportPages, "on_post_page", counted)
    monkeypatch.setattr(FilesAside, "finish", finished)
    monkeypatch.setattr(FilesAside, "done", lambda self: False, raising=False)  # not yet
    late = build(str(trace), tmp_path / "late", make_zip=True).site
    assert len(at_finish) == 1 and at_finish[0] == len(pages_written) > 20
    monkeypatch.setattr(FilesAside, "done", lambda self: True, raising=False)  # at once
    pages_written.clear()
    at_finish.clear()
    early = build(str(trace), tmp_path / "early", make_zip=True).site
    assert at_finish == [0]
    assert site_files(late) == site_files(early)
    assert zip_in_order(late) == zip_in_order(early)

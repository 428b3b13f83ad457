"""The speed-ups must not change what a user sees: each fast path against its plain twin.

- highlighting in worker processes vs in the build process: byte-identical pages;
- highlighting ahead, while the trace is read, vs once the pages are known: the blocks
  guessed from each artifact are exactly the blocks the pages show, and the sites are equal;
- templates compiled from Jinja's bytecode cache vs compiled afresh: identical pages;
- the zip bundle compressed during the build (files handed over as they are final) vs the
  zip of the finished site: the same entries, byte for byte, with the same directory fields;
- the gap-skipping highlighter (``fastlex.html_lines``) vs the plain one (``fastlex.tokens``
  rendered token by token): the same HTML for every artifact of every corpus trace and for
  generated text full of quotes, comments, keywords, numbers and entities;
- the byte-buffer reader fed one big chunk vs one line at a time: the same records;
- raw.jsonl lines that append tlparse's keys to the logged JSON vs re-encoded envelopes,
  and describe_* records spilled as logged vs re-encoded: the same JSON values;
- chromium payloads copied without decoding vs decoded and encoded: the same events.
"""

from __future__ import annotations

import gzip
import json
import re
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from corpus import TORCH_213, all_corpus_traces, tlparse_input, trace_id
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlsite import cli
from tlsite.core import load, load_source, resolve_input, select_log
from tlsite.core.builder import TraceBuilder
from tlsite.core.records import RecordReader
from tlsite.core.render import fastlex, pages, templating
from tlsite.core.render.highlight import CodeBlock, _token_lines
from tlsite.core.render.pages import highlight_ahead, render_tree
from tlsite.core.stats import ParseStats
from tlsite.mkdocs_plugin import pipeline
from tlsite.mkdocs_plugin.build import build_report

TRAINING = sorted((TORCH_213 / "training").glob("*.log"))[0]
EXAMPLE = Path(__file__).resolve().parents[1] / "core" / "examples" / "example.log"


def _site_files(site: Path, pattern: str = "*") -> dict[str, bytes]:
    """The contents of the site's files matching ``pattern``, by relative path."""
    return {
        p.relative_to(site).as_posix(): p.read_bytes()
        for p in sorted(site.rglob(pattern))
        if p.is_file()
    }


def _pages(site: Path) -> dict[str, bytes]:
    return _site_files(site, "*.html")


def _build(log: Path, site: Path, **options: Any) -> None:
    """Read ``log`` and build its site into ``site`` (``options`` go to build_report)."""
    trace = load(log)
    try:
        build_report(trace, site, raw_log=log, **options)
    finally:
        trace.close()


@pytest.mark.slow
def test_parallel_and_inline_highlighting_give_identical_pages(tmp_path: Path) -> None:
    sites = {}
    for workers in (0, 2):
        _build(EXAMPLE, tmp_path / f"site{workers}", highlight_workers=workers)
        sites[workers] = _pages(tmp_path / f"site{workers}")
    assert sites[0].keys() == sites[2].keys()
    different = [name for name in sites[0] if sites[0][name] != sites[2][name]]
    assert different == []


class _RecordingHighlighter:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def submit(self, block: CodeBlock) -> str:
        self.keys.append(block.key)
        return block.key


def _read_highlighting_ahead(log: Path) -> tuple[Any, _RecordingHighlighter]:
    """The trace of ``log``, read as a big trace is (see :func:`highlight_ahead`), and the
    highlighter that recorded the blocks handed to it meanwhile."""
    ahead = _RecordingHighlighter()
    with resolve_input(log) as resolved:
        trace = load_source(
            select_log(resolved, None, log),
            on_artifact=highlight_ahead(ahead),  # type: ignore[arg-type]
        )
    return trace, ahead


@pytest.mark.parametrize("log", all_corpus_traces(), ids=trace_id)
def test_blocks_highlighted_ahead_are_the_blocks_the_pages_show(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong guess would not change a page (blocks are looked up by content) but would
    throw the head start away: every block must be guessed (small ones too, here), and none
    in vain."""
    monkeypatch.setattr(pages, "AHEAD_MIN_ARTIFACT_BYTES", 0)
    trace, ahead = _read_highlighting_ahead(log)
    try:
        shown = {
            block.key
            for page in render_tree(trace).pages
            for block in page.blocks.values()
            if isinstance(block, CodeBlock)
        }
    finally:
        trace.close()
    assert set(ahead.keys) == shown


def _built_with_and_without(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    threshold: str,
    bundle: str,
    read: Callable[[Path], dict[str, bytes]],
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """``read(out)`` of the training trace built with the fast path that ``pipeline.<threshold>``
    (a trace size) turns on, then without it."""
    results = []
    for name, size in (("with", 0), ("without", 1 << 62)):
        monkeypatch.setattr(pipeline, threshold, size)
        out = tmp_path / name / "report"
        cli.build(str(TRAINING), out, bundle=bundle)
        results.append(read(out))
    return results[0], results[1]


def _zip_entries(out: Path) -> dict[str, Any]:
    """Each entry's bytes and directory fields."""
    with zipfile.ZipFile(out.with_name("report.zip")) as archive:
        assert archive.testzip() is None
        return {
            info.filename: (
                archive.read(info),
                info.date_time,
                info.compress_type,
                info.external_attr,
                info.CRC,
                info.file_size,
            )
            for info in archive.infolist()
        }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("threshold", "bundle", "read"),
    [
        ("HIGHLIGHT_AHEAD_MIN_BYTES", "none", _site_files),  # highlighted while reading
        ("ZIP_WHILE_BUILDING_MIN_BYTES", "zip", _zip_entries),  # zipped while building
    ],
    ids=["highlight-ahead", "zip-during-build"],
)
def test_fast_path_gives_the_same_output(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    threshold: str,
    bundle: str,
    read: Callable[[Path], dict[str, bytes]],
) -> None:
    fast, plain = _built_with_and_without(tmp_path, monkeypatch, threshold, bundle, read)
    assert sorted(fast) == sorted(plain)
    assert [name for name in fast if fast[name] != plain[name]] == []


def test_a_cut_gzip_log_says_where_its_data_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where the gzip data breaks off is found while reading, and said in the summary."""
    packed = gzip.compress(TRAINING.read_bytes())
    truncated = tmp_path / "truncated.log.gz"
    truncated.write_bytes(packed[: len(packed) // 2])
    out = tmp_path / "out"
    code = cli.main(["build", str(truncated), "-o", str(out), "--no-browser", "--no-zip"])
    summary = capsys.readouterr().out.splitlines()[0]
    raw = (out / "raw.log").read_bytes()
    assert code == cli.EXIT_OK
    assert summary.startswith("truncated.log.gz: ")
    assert f"the gzip data ends early after {len(raw):,} bytes of log" in summary


@pytest.mark.slow
def test_templates_compiled_from_the_bytecode_cache_give_identical_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First build: templates compiled and cached; second: loaded from the cache."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    for cached in (templating.bytecode_cache, templating.environment):
        cached.cache_clear()
    templating.markdown_environment.cache_clear()
    sites = []
    try:
        for run in range(2):
            _build(EXAMPLE, tmp_path / f"site{run}")
            sites.append(_pages(tmp_path / f"site{run}"))
            cache_dirs = list((tmp_path / "tmp").glob("_jinja2-cache-*"))
            assert cache_dirs and any(cache_dirs[0].iterdir())
    finally:
        for cached in (templating.bytecode_cache, templating.environment):
            cached.cache_clear()
        templating.markdown_environment.cache_clear()
    assert sites[0] == sites[1]


def test_files_are_handed_to_the_bundle_only_once_final(tmp_path: Path) -> None:
    """The zip worker reads each file when ``on_file`` names it: it must not change after."""
    handed: dict[Path, bytes] = {}

    def on_file(name: str) -> None:
        path = Path(name)
        assert path not in handed
        handed[path] = path.read_bytes()

    site = tmp_path / "site"
    _build(TRAINING, site, on_file=on_file)
    changed = [p for p, data in handed.items() if p.read_bytes() != data]
    assert changed == []
    on_disk = {p for p in site.rglob("*") if p.is_file()}
    assert set(handed) <= on_disk
    pages = {p for p in on_disk if p.name == "index.html" and p.parent.name.startswith("-_")}
    assert pages and pages <= set(handed)  # every compile-id page...
    assert site / "raw.jsonl" in handed  # ...and the tlparse files
    swept = {p.relative_to(site).as_posix() for p in on_disk - set(handed)}
    theme = [n for n in swept if n.split("/")[0] in {"assets", "search"}]
    assert swept - set(theme) <= {"404.html", "sitemap.xml", "sitemap.xml.gz"}


FAST_LEXERS = ("python", "cpp", "json")


def _plain_highlight(text: str, lang: str) -> str:
    return _token_lines(fastlex.tokens(text, lang))


@pytest.mark.slow
@pytest.mark.parametrize("log", all_corpus_traces(), ids=trace_id)
def test_fast_highlighter_matches_the_plain_one_on_every_artifact(log: Path) -> None:
    trace = load(log)
    try:
        texts = {trace.read_payload(a.payload) for a in trace.artifacts() if a.payload}
    finally:
        trace.close()
    different = [
        (lang, text[:80])
        for text in texts
        for lang in FAST_LEXERS
        if fastlex.html_lines(text, lang) != _plain_highlight(text, lang)
    ]
    assert different == []


# Pieces that start, end or almost start a token in one of the three languages.
_CODE_PIECES = [
    *("def ", "class ", "def", " def ", "if", "in", "None", "lambda", "deff", "ifx", "x1"),
    *("true", "false", "null", "int", "static_cast", "uint8_t", "sizeof"),
    *("'", '"', "'''", '"""', "\\", "\\'", '\\"', "#", "#include", "@", "@a.b", "@ "),
    *("//", "/*", "*/", "/", "*", "-", "-1", "1", "2.5", "1.e5", "1e-3", "7u", "0x1f", "1a"),
    *("\n", "\n#", "\n  #", " ", "\t", "\r", ":", " :", ",", ".", "(", ")", "_", "x", "é"),
    *("\u2028", "&", "<", ">", "&lt;", "amp", "lt", "gt;"),
]


@pytest.mark.slow
@settings(deadline=None, max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_CODE_PIECES), max_size=40), st.sampled_from(FAST_LEXERS))
def test_fast_highlighter_matches_the_plain_one_on_generated_code(
    pieces: list[str], lang: str
) -> None:
    text = "".join(pieces)
    assert fastlex.html_lines(text, lang) == _plain_highlight(text, lang)


def _records(chunks: list[bytes]) -> list[tuple]:
    stats = ParseStats()
    reader = RecordReader(chunks, stats)
    found = [
        (r.line, r.event_type, r.payload_md5, r.payload_lines, r.md5_ok, r.other_rank)
        for r in reader
    ]
    return [*found, ("stats", stats.total_lines, tuple(sorted(stats.outcomes.items())))]


@pytest.mark.slow
@pytest.mark.parametrize("log", [TRAINING, tlparse_input("simple_corrupted_json.log")])
def test_reader_gives_the_same_records_for_any_chunking(log: Path) -> None:
    data = log.read_bytes()
    whole = _records([data])
    by_line = _records(data.splitlines(keepends=True))
    odd = _records([data[i : i + 4097] for i in range(0, len(data), 4097)])
    assert whole == by_line == odd


def _spills(trace_path: Path, *, fast: bool) -> tuple[list[dict], list[dict], list[tuple]]:
    """raw.jsonl lines, chromium events and describe_* records read back as JSON values,
    with or without the fast paths."""
    trace = TraceBuilder(trace_path.name, fast_paths=fast).read([trace_path.read_bytes()])
    try:
        raw = trace.raw_jsonl_path.read_text(encoding="utf-8").splitlines()
        chromium = trace.chromium_path.read_text(encoding="utf-8").splitlines()
        describes = [
            (event.type, event.line, event.metadata)
            for unit in trace.units.values()
            for event in trace.describe_records(unit)
        ]
    finally:
        trace.close()
    return [json.loads(line) for line in raw], [json.loads(line) for line in chromium], describes


@pytest.mark.parametrize("log", [TRAINING, tlparse_input("simple_corrupted_json.log")])
def test_raw_jsonl_chromium_and_describe_fast_paths_keep_every_value(log: Path) -> None:
    fast_raw, fast_chromium, fast_describes = _spills(log, fast=True)
    slow_raw, slow_chromium, slow_describes = _spills(log, fast=False)
    assert fast_raw == slow_raw
    assert fast_chromium == slow_chromium
    assert fast_describes == slow_describes
    assert fast_chromium  # the traces have chromium events: the test compares something


def test_pages_are_converted_one_at_a_time_as_they_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MkDocs converts every page before it writes any: a report page's Markdown body waits
    in the payload store until the page is written (MkDocs converts only its front matter),
    and each page still gets its own HTML and table of contents."""
    from mkdocs.utils.meta import get_data

    from tlsite.mkdocs_plugin.plugin import TlsitePlugin

    held: dict[str, int] = {}
    on_env = TlsitePlugin.on_env

    def spy(self: TlsitePlugin, env: object, /, **kwargs: object) -> object:
        for file in kwargs["files"].documentation_pages():  # type: ignore[attr-defined]
            page = file.page
            body, meta = get_data(file.content_string)
            assert meta.get("title"), file.src_uri  # MkDocs still reads the front matter
            held[file.src_uri] = len(page.content or "") + len(page.markdown or "") + len(body)
            held[file.src_uri] += len(page.toc.items)
        return on_env(self, env, **kwargs)

    monkeypatch.setattr(TlsitePlugin, "on_env", spy)
    _build(TRAINING, tmp_path / "site")
    assert len(held) > 10
    assert {uri: size for uri, size in held.items() if size} == {}
    sections = 0
    for uri in held:  # the HTML came back for the page: its heading is in the article
        page = (tmp_path / "site" / uri).with_suffix(".html").read_text(encoding="utf-8")
        article = page.split('<article class="md-content__inner', 1)[1].split("</article>")[0]
        assert "<h1 id=" in article, uri  # the theme adds a bare <h1> to empty pages
        # and its table of contents lists the page's own sections
        toc = page.partition('data-md-component="toc"')[2].split('<div class="md-content"')[0]
        for anchor in re.findall(r'<h2 id="([^"]+)"', article):
            assert f'href="#{anchor}"' in toc, (uri, anchor)
            sections += 1
    assert sections > len(held)


def _keep_in_memory(method: str) -> object:
    """The plugin's slow path for ``method``: what MkDocs and Material do on their own."""
    assert method == "defer_bodies"
    return False  # MkDocs converts every page before it writes any


@pytest.mark.slow
@pytest.mark.parametrize("method", ["defer_bodies"])
def test_plugin_fast_path_gives_the_same_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """Pages converted as they are written: the same files (pages, search index and its
    offline script) as MkDocs gives by itself (tlsite's own search index is compared with
    Material's in test_speed_site.py)."""
    from tlsite.mkdocs_plugin.report import OwnSite

    sites = []
    for slow in (False, True):
        if slow:
            monkeypatch.setattr(OwnSite, method, _keep_in_memory(method))
        _build(TRAINING, tmp_path / f"site{slow}")
        sites.append(_site_files(tmp_path / f"site{slow}"))
    assert sites[0].keys() == sites[1].keys()
    assert [name for name in sites[0] if sites[0][name] != sites[1][name]] == []
    index = json.loads(sites[0]["search/search_index.json"])
    assert len(index["docs"]) > 40  # artifact headings are in the code index


def test_only_artifacts_of_some_size_are_highlighted_while_the_trace_is_read() -> None:
    """While a trace is read, the code of its artifacts of
    :data:`~tlsite.core.render.pages.AHEAD_MIN_ARTIFACT_BYTES` or more goes to the highlighter,
    and no smaller one: a recompile storm's thousands of small blocks cost the reader more
    to hand over than highlighting them early saves (the pages ask for them later)."""
    trace, ahead = _read_highlighting_ahead(TRAINING)
    try:
        big, small = set(), set()
        for unit in trace.units.values():
            for artifact in unit.artifacts:
                shown = pages.artifact_code(trace, artifact)
                if shown is None or artifact.payload is None:
                    continue
                if artifact.payload.size >= pages.AHEAD_MIN_ARTIFACT_BYTES:
                    big.add(shown[0].key)
                else:
                    small.add(shown[0].key)
    finally:
        trace.close()
    assert big and small - big, "the trace should have code blocks of both sizes"
    assert set(ahead.keys) == big

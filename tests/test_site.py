"""The built report, checked the way a user reads it: pages, numbers, search, code, bundle.

Every corpus trace (tlparse's single-rank inputs, the torch 2.13 simple/training/provenance
traces, our fixtures and the shipped example) is built once per test session with
``tlsite.cli.build`` (site + zip) and the HTML is checked without a browser. Expected numbers
come from ``tests/fixtures/README.md`` (what torch logged), never from tlsite's own output.

Builds are cached on disk in a folder shared by the pytest-xdist workers of one run, behind a
file lock, so each trace is built once per run however the tests are distributed;
``test_site_browser.py`` uses the same cache.
"""

from __future__ import annotations

import fcntl
import functools
import html
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from corpus import (
    FIXTURE_TRACES,
    PROJECT_ROOT,
    TORCH_213,
    fixture_traces,
    tlparse_top_level_inputs,
    trace_id,
)

from tlsite.cli import build, example_trace
from tlsite.core import load
from tlsite.core.compile_id import parse_compile_id_string

# -- the traces -----------------------------------------------------------------------------
TORCH_213_SITES = ("simple", "training", "provenance")
GRAPH_BREAKS = FIXTURE_TRACES / "graph_breaks" / "graph_breaks.log"
RECOMPILES = FIXTURE_TRACES / "recompiles" / "recompiles.log"
COMPILE_ERROR = FIXTURE_TRACES / "compile_error" / "compile_error.log"
EXPORT_DRAFT = FIXTURE_TRACES / "export_draft" / "export_draft.log"
DYNAMIC_SHAPES = FIXTURE_TRACES / "dynamic_shapes" / "dynamic_shapes.log"
CACHE_HITS = FIXTURE_TRACES / "cache_hits" / "cache_hits.log"
EXAMPLE = example_trace()
MAKE_TRACE = PROJECT_ROOT / "bench" / "make_trace.py"

#: Material loads the search index whole; above this a report gets slow to search.
SEARCH_INDEX_LIMIT = 5_000_000
#: Blocks bigger than this may legitimately be shown as plain text (Pygments is slow).
LEXER_CHECK_LIMIT = 100_000
#: Blocks bigger than this are legitimately shown only in part (the raw file has the rest).
ANCHOR_CHECK_LIMIT = 500_000


def torch_213_site_traces() -> list[Path]:
    return sorted(p for d in TORCH_213_SITES for p in (TORCH_213 / d).glob("*.log"))


def site_traces() -> list[Path]:
    """Every single-rank trace a site is built from in these tests."""
    return tlparse_top_level_inputs() + torch_213_site_traces() + fixture_traces() + [EXAMPLE]


ALL_TRACES = site_traces()
TRACE_IDS = [trace_id(p) for p in ALL_TRACES]


# -- building, once per run -----------------------------------------------------------------
@dataclass(frozen=True)
class BuiltSite:
    trace: Path
    site: Path
    bundle: Path
    summary: str
    clean: bool

    def page(self, relative: str) -> str:
        return (self.site / relative).read_text(encoding="utf-8")


class SiteCache:
    """Builds each trace once per test run (shared by xdist workers through a file lock)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._memo: dict[Path, BuiltSite] = {}

    def get(self, trace: Path) -> BuiltSite:
        trace = trace.resolve()
        if trace not in self._memo:
            self._memo[trace] = self._build(trace)
        return self._memo[trace]

    def prebuild(self, traces: list[Path]) -> None:
        """Build several traces, taking first those no other worker is building right now."""
        busy = []
        for trace in traces:
            try:
                self._memo[trace.resolve()] = self._build(trace.resolve(), wait=False)
            except BlockingIOError:
                busy.append(trace)
        for trace in busy:
            self.get(trace)

    def _build(self, trace: Path, *, wait: bool = True) -> BuiltSite:
        key = re.sub(r"[^A-Za-z0-9._-]+", "__", trace_id(trace))
        folder = self.root / key
        done = folder / "outcome.json"
        with open(self.root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not done.is_file():
                shutil.rmtree(folder, ignore_errors=True)
                outcome = build(str(trace), folder / "site", make_zip=True)
                assert outcome.bundle is not None
                record = {
                    "site": str(outcome.site),
                    "bundle": str(outcome.bundle),
                    "summary": outcome.summary,
                    "clean": outcome.clean,
                }
                done.write_text(json.dumps(record), encoding="utf-8")
            record = json.loads(done.read_text(encoding="utf-8"))
        return BuiltSite(
            trace=trace,
            site=Path(record["site"]),
            bundle=Path(record["bundle"]),
            summary=record["summary"],
            clean=record["clean"],
        )


_caches: dict[Path, SiteCache] = {}


def site_cache(tmp_path_factory: pytest.TempPathFactory) -> SiteCache:
    """The run's cache: under the run's base temp folder, shared by all xdist workers."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-of-USER/pytest-N/ (each worker has popen-gwK/ below it)
    root = base / "tlsite-built-sites"
    if root not in _caches:
        _caches[root] = SiteCache(root)
    return _caches[root]


@pytest.fixture(scope="session")
def sites(tmp_path_factory: pytest.TempPathFactory) -> SiteCache:
    return site_cache(tmp_path_factory)


@pytest.fixture(params=ALL_TRACES, ids=TRACE_IDS)
def built(request: pytest.FixtureRequest, sites: SiteCache) -> BuiltSite:
    return sites.get(request.param)


# -- what the trace holds (tlsite's reader, checked by the reader tests) ----------------------
@dataclass(frozen=True)
class ArtifactInfo:
    number: int
    kind: str
    name: str
    path: str | None
    page: str  # the compile-id page it belongs on, e.g. "-_0_0_1/index.html"
    size: int
    filename: str  # inductor_output_code's generated file name ("" otherwise)
    readable: bool  # shown as readable kernel stack traces rather than as its JSON
    raw_file: str | None = None  # a rendered page's raw text (payloads/<md5>.txt)


@functools.cache
def artifacts_of(trace: Path) -> tuple[ArtifactInfo, ...]:
    loaded = load(trace)
    try:
        return tuple(
            ArtifactInfo(
                number=a.number,
                kind=a.kind,
                name=a.name,
                path=a.path,
                raw_file=a.raw_file,
                page=f"{unit.dirname}/index.html",
                size=a.payload.size if a.payload is not None else 0,
                filename=str(a.metadata.get("filename") or ""),
                readable=a.readable_path is not None,
            )
            for unit in loaded.units.values()
            for a in unit.artifacts
        )
    finally:
        loaded.close()


@functools.cache
def inductor_kernels(trace: Path) -> frozenset[str]:
    """Kernel names as the generated code defines them: ``name = async_compile.<kind>(``."""
    loaded = load(trace)
    try:
        names: set[str] = set()
        for artifact in loaded.artifacts():
            if artifact.kind == "inductor_output_code" and artifact.payload is not None:
                code = loaded.read_payload(artifact.payload)
                names.update(re.findall(r"(?m)^(\w+) = async_compile\.\w+\(", code))
        return frozenset(names)
    finally:
        loaded.close()


def compile_directory(site: BuiltSite) -> dict[str, dict]:
    return json.loads(site.page("compile_directory.json"))


def unit_page_of(key: str) -> str:
    """The page of a compile_directory.json key: ``[0/0_1]`` → ``-_0_0_1/index.html``."""
    cid = parse_compile_id_string(key)
    assert cid is not None, f"compile_directory.json has a key that is no compile id: {key!r}"
    return f"{cid.directory_key().dirname}/index.html"


# -- reading HTML ----------------------------------------------------------------------------
def visible_text(fragment: str) -> str:
    """Text of an HTML fragment, tags removed, whitespace collapsed."""
    fragment = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", fragment)
    fragment = re.sub(r"(?i)</?(?:a|code|strong|em|b|i|span)\b[^>]*>", "", fragment)  # inline
    text = html.unescape(re.sub(r"<[^>]+>", " ", fragment))
    return re.sub(r"\s+", " ", text).strip()


def article(page_html: str) -> str:
    match = re.search(r"(?s)<article\b.*?</article>", page_html)
    assert match is not None, "page has no <article>"
    return match.group(0)


def article_text(page_html: str) -> str:
    return visible_text(article(page_html))


def h1_text(page_html: str) -> str:
    match = re.search(r"(?s)<h1\b[^>]*>(.*?)</h1>", page_html)
    assert match is not None, "page has no <h1>"
    return visible_text(match.group(1))


@dataclass
class Cell:
    text: str = ""
    hrefs: list[str] = field(default_factory=list)


class _TableParser(HTMLParser):
    """Every <table> of a page as rows of cells (text and link targets)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[Cell]]] = []
        self._depth = 0
        self._cell: Cell | None = None
        self._parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables and self.tables[-1]:
            self._cell = Cell()
            self._parts = []
            self.tables[-1][-1].append(self._cell)
        elif tag == "a" and self._cell is not None:
            href = dict(attrs).get("href")
            if href:
                self._cell.hrefs.append(href)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self._cell.text = re.sub(r"\s+", " ", "".join(self._parts)).strip()
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._parts.append(data)


def tables(page_html: str) -> list[list[list[Cell]]]:
    parser = _TableParser()
    parser.feed(article(page_html))
    return parser.tables


def glance(site: BuiltSite) -> dict[str, str]:
    """The overview's "At a glance" table: label → value text."""
    for rows in tables(site.page("index.html")):
        facts = {row[0].text: row[1].text for row in rows if len(row) == 2 and row[0].text}
        if "Log" in facts and "PyTorch" in facts:
            return facts
    raise AssertionError("the overview has no 'At a glance' table")


def artifact_sections(page_html: str) -> dict[int, str]:
    """Artifact number → the HTML from its ``id="artifact-N"`` heading to the next heading."""
    parts = re.split(r'(?=<h[1-3]\b[^>]*\bid="[^"]*")', page_html)
    sections: dict[int, str] = {}
    for part in parts:
        match = re.match(r'<h3\b[^>]*\bid="artifact-(\d+)"', part)
        if match:
            sections[int(match.group(1))] = part
    return sections


def relative_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def html_files(site: Path) -> Iterator[Path]:
    yield from sorted(site.rglob("*.html"))


# == every trace =============================================================================
def test_site_builds(built: BuiltSite) -> None:
    assert (built.site / "index.html").is_file()
    assert (built.site / "compile_directory.json").is_file()
    assert re.search(r"\d[\d,]* records from [\d,]+ lines", built.summary), built.summary
    assert built.bundle.is_file()


def test_every_compile_id_has_its_page(built: BuiltSite) -> None:
    keys = [k for k in compile_directory(built) if k != "unknown"]
    assert keys, "compile_directory.json lists no compile id"
    for key in keys:
        page = built.site / unit_page_of(key)
        if not page.is_file():  # [!0/-/-] does not show the attempt 0 its folder keeps (tlparse)
            page = built.site / unit_page_of(key).replace("_-/", "_0/")
        assert page.is_file(), f"{key}: no page at {page.relative_to(built.site)}"
        assert key in h1_text(page.read_text(encoding="utf-8")), f"{key}: not in the <h1>"


def test_every_artifact_is_on_its_compile_id_page(built: BuiltSite) -> None:
    artifacts = artifacts_of(built.trace)
    pages: dict[str, str] = {}
    for a in artifacts:
        if a.page not in pages:
            path = built.site / a.page
            assert path.is_file(), f"artifact {a.number} {a.name}: no page {a.page}"
            pages[a.page] = path.read_text(encoding="utf-8")
        assert f'id="artifact-{a.number}"' in pages[a.page], (
            f"artifact {a.number} ({a.name}) has no heading on {a.page}"
        )
        if a.path is not None:
            assert (built.site / a.path).is_file(), f"artifact {a.number}: no raw file {a.path}"


def test_raw_file_links_resolve(built: BuiltSite) -> None:
    """Each artifact's "raw file" link on its page opens that artifact's own file (for
    pages tlparse renders, such as output code, the raw text tlparse keeps in payloads/)."""
    with_paths = [a for a in artifacts_of(built.trace) if a.path is not None]
    if not with_paths:
        pytest.skip("no artifact with a file in this trace")
    sections: dict[str, dict[int, str]] = {}
    for a in with_paths:
        if a.page not in sections:
            sections[a.page] = artifact_sections(built.page(a.page))
        hrefs = re.findall(r'<a href="([^"]+)"[^>]*>raw file</a>', sections[a.page][a.number])
        assert len(hrefs) == 1, f"{a.page} artifact {a.number}: raw file links {hrefs}"
        target = ((built.site / a.page).parent / unquote(html.unescape(hrefs[0]))).resolve()
        expected = built.site / str(a.raw_file or a.path)
        assert target == expected.resolve(), f"{a.page} artifact {a.number}"
        assert target.is_file()


def test_code_blocks_use_the_right_lexer(built: BuiltSite) -> None:
    expected: list[tuple[ArtifactInfo, str]] = []
    for a in artifacts_of(built.trace):
        if a.size == 0 or a.size > LEXER_CHECK_LIMIT or a.path is None:
            continue
        python_code = a.kind == "inductor_output_code" and a.filename.endswith(".py")
        if a.kind == "dynamo_output_graph" or python_code:
            expected.append((a, "python"))
        elif a.path.endswith(".json") and not a.readable:
            expected.append((a, "json"))
    if not expected:
        pytest.skip("no graph, Python output code or JSON artifact in this trace")
    sections: dict[str, dict[int, str]] = {}
    for a, lang in expected:
        if a.page not in sections:
            sections[a.page] = artifact_sections(built.page(a.page))
        section = sections[a.page][a.number]
        langs = re.findall(r'<div class="language-([\w+-]+) highlight[" ]', section)
        assert langs == [lang], f"{a.page} artifact {a.number} ({a.name}): {langs}, not {lang}"


def code_lines(html: str, block: str) -> list[str]:
    """The line elements of the code block ``block`` (``data-block``) in ``html``."""
    match = re.search(rf'data-block="{block}"><pre><span></span><code>(.*?)</code>', html, re.S)
    return re.findall(r"<span>.*?\n</span>", match.group(1), re.S) if match else []


def test_code_lines_have_anchors(built: BuiltSite) -> None:
    """Every line of a shown text artifact is its own element (``#artifact-N-L<line>`` links
    resolve to it in the browser); element ids on the page are unique."""
    checked = 0
    for page in sorted({a.page for a in artifacts_of(built.trace)}):
        page_html = built.page(page)
        ids = Counter(re.findall(r'\bid="([^"]+)"', page_html))
        duplicates = sorted(i for i, n in ids.items() if n > 1)
        assert duplicates == [], f"{page}: duplicate element ids {duplicates[:5]}"
        sections = artifact_sections(page_html)
        for a in artifacts_of(built.trace):
            if a.page != page or a.path is None or not a.path.endswith(".txt"):
                continue
            if not 0 < a.size <= ANCHOR_CHECK_LIMIT:
                continue
            raw = (built.site / a.path).read_text(encoding="utf-8")
            lines = len(raw.removesuffix("\n").split("\n"))
            anchors = code_lines(sections[a.number], f"artifact-{a.number}")
            assert len(anchors) == lines, f"{page} artifact {a.number}: {len(anchors)}/{lines}"
            checked += 1
    if checked == 0:
        pytest.skip("no text artifact in this trace")


def test_search_index_is_small_and_names_every_compile_id_and_artifact(built: BuiltSite) -> None:
    index_json = built.site / "search" / "search_index.json"
    index_js = built.site / "search" / "search_index.js"
    assert index_json.is_file() or index_js.is_file()
    for path in (index_json, index_js):
        if path.is_file():
            assert path.stat().st_size < SEARCH_INDEX_LIMIT, f"{path.name} is too big"
    text = search_text(built)
    for key in compile_directory(built):
        if key != "unknown":
            assert key in text, f"compile id {key} is not searchable"
    missing = sorted({a.name for a in artifacts_of(built.trace) if a.name not in text})
    assert missing == [], f"artifact names not searchable: {missing}"
    kernels = inductor_kernels(built.trace)
    unsearchable = sorted(k for k in kernels if k not in text)
    assert unsearchable == [], f"inductor kernels not searchable: {unsearchable}"


@functools.cache
def _search_text(site: Path) -> str:
    path = site / "search" / "search_index.json"
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
    else:  # search_index.js: `var __index = {...}`
        raw = (site / "search" / "search_index.js").read_text(encoding="utf-8")
        data = json.loads(raw[raw.index("{") : raw.rindex("}") + 1])
    text = "\n".join(
        visible_text(doc.get("title", "")) + "\n" + visible_text(doc.get("text", ""))
        for doc in data["docs"]
    )
    # what search finds in the code (ops, kernels, guards) and the code's section titles
    # (artifact names) are in a second file
    code = site / "search" / "code_index.js"
    if code.is_file():
        raw = code.read_text(encoding="utf-8")
        data = json.loads(raw[raw.index("{") : raw.rindex("}") + 1])
        text += "\n" + "\n".join(data["terms"] + data["titles"])
    return text


def search_text(built: BuiltSite) -> str:
    return _search_text(built.site)


def test_no_page_loads_remote_scripts_or_styles(built: BuiltSite) -> None:
    tag = re.compile(r"(?is)<(script|link)\b[^>]*>")
    url = re.compile(r"""(?i)\b(?:src|href)\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]*)""")
    remote: list[str] = []
    for page in html_files(built.site):
        for match in tag.finditer(page.read_text(encoding="utf-8", errors="replace")):
            remote += [f"{page.relative_to(built.site)}: {u}" for u in url.findall(match.group())]
    assert remote == []


def test_every_link_opens_a_page_and_its_anchor(built: BuiltSite) -> None:
    """Links inside the report (not to the web) lead to a file, and to an id on that page."""
    ids: dict[Path, set[str]] = {}

    def ids_of(page: Path) -> set[str]:
        if page not in ids:
            text = page.read_text(encoding="utf-8", errors="replace")
            ids[page] = set(re.findall(r'\b(?:id|name)="([^"]+)"', text))
        return ids[page]

    broken: list[str] = []
    for page in html_files(built.site):
        text = page.read_text(encoding="utf-8", errors="replace")
        for href in map(html.unescape, re.findall(r'<a\b[^>]*?\bhref="([^"]*)"', text)):
            parts = urlsplit(href)
            if parts.scheme or href.startswith("//"):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            where = f"{page.relative_to(built.site)} -> {href}"
            if not target.exists() or (
                parts.fragment
                and target.suffix == ".html"
                and unquote(parts.fragment) not in ids_of(target)
            ):
                broken.append(where)
    assert broken == []


def test_bundle_holds_the_whole_site(built: BuiltSite, tmp_path: Path) -> None:
    with zipfile.ZipFile(built.bundle) as archive:
        assert archive.testzip() is None
        archive.extractall(tmp_path)
    roots = [p for p in tmp_path.iterdir()]
    unpacked = roots[0] if len(roots) == 1 and roots[0].is_dir() else tmp_path
    assert (unpacked / "index.html").is_file()
    site_files = relative_files(built.site)
    zip_files = relative_files(unpacked)
    assert zip_files == site_files
    for name in sorted(site_files):
        assert (unpacked / name).read_bytes() == (built.site / name).read_bytes(), name


# == what a user checks on the fixtures (tests/fixtures/README.md) ===========================
def test_overview_graph_breaks(sites: SiteCache) -> None:
    site = sites.get(GRAPH_BREAKS)
    facts = glance(site)
    assert facts["Compile ids"] == "15"
    assert facts["Frames compiled"] == "9"
    assert re.match(r"3 distinct\b", facts["Graph breaks"]), facts["Graph breaks"]
    assert facts["Restarts"] == "6"
    assert "nothing skipped" in facts["Log"]
    text = article_text(site.page("index.html"))
    assert re.search(r"×4: [^×]*graph_breaks\.py:22 — \[0/0\], \[1/0\], \[3/0\], \[5/0\]", text)
    assert re.search(r"×1: Unsupported Tensor\.item\(\) call[^×]*graph_breaks\.py:34", text)
    assert re.search(r"×1: [^×]*graph_breaks\.py:45 — \[7/0\]", text)


def test_overview_recompiles(sites: SiteCache) -> None:
    site = sites.get(RECOMPILES)
    facts = glance(site)
    assert facts["Recompiles"] == "5"
    assert facts["Compile ids"] == "6"
    assert facts["Frames compiled"] == "1"
    assert facts["Compilation failures"] == "1"  # [0/5]: the recompile limit
    text = article_text(site.page("index.html"))
    assert "Recompiled 5×" in text
    assert re.search(r"Failure in \[0/5\]: Unsupported", text)


def test_overview_compile_error(sites: SiteCache) -> None:
    site = sites.get(COMPILE_ERROR)
    facts = glance(site)
    assert facts["Compile ids"] == "9"
    assert facts["Compilation failures"] == "3"
    assert facts["Restarts"] == "2"
    text = article_text(site.page("index.html"))
    for unit, kind in (("0/0", "BackendCompilerFailed"), ("1/0", "TorchRuntimeError")):
        assert f"Failure in [{unit}]: {kind}" in text
    assert "Failure in [6/0]: Unsupported" in text


def test_overview_example(sites: SiteCache) -> None:
    site = sites.get(EXAMPLE)
    facts = glance(site)
    assert facts["Compile ids"] == "5"
    assert facts["Frames compiled"] == "2"
    assert facts["Graph breaks"].startswith("1 distinct, hit 2 times")
    assert facts["Recompiles"] == "1"
    assert facts["Restarts"] == "2"
    assert "2 bypasses" in facts["Cache"]  # aotautograd_cache_bypass ×2
    assert facts["PyTorch"].startswith("2.13.0")


def test_overview_cache_hits(sites: SiteCache) -> None:
    facts = glance(sites.get(CACHE_HITS))
    assert re.match(r"2 hits, 2 misses\b", facts["Cache"]), facts["Cache"]


def test_cache_hits_keeps_both_compilations_of_the_same_id(sites: SiteCache) -> None:
    page = sites.get(CACHE_HITS).page("-_0_0_0/index.html")
    text = article_text(page)
    assert text.count("inductor_output_code") >= 2
    for name in ("aotautograd_cache_miss", "fx_graph_cache_miss", "aotautograd_cache_hit"):
        assert name in text
    assert len(re.findall(r"<h2\b[^>]*>Compilation metrics", page)) == 2


def test_overview_dynamic_shapes(sites: SiteCache) -> None:
    facts = glance(sites.get(DYNAMIC_SHAPES))
    assert facts["Compile ids"] == "2"
    assert facts["Recompiles"] == "0"
    assert facts["Graph breaks"].startswith("0 distinct")


def test_overview_export_draft_has_no_compile_ids(sites: SiteCache) -> None:
    """A draft export compiles nothing: its summary is the export's, not zero compiles."""
    facts = glance(sites.get(EXPORT_DRAFT))
    assert "Compile ids" not in facts
    assert facts["Draft export"] == "3 issues found"  # torch's own report says 3
    assert "nothing skipped" in facts["Log"]  # tlparse 0.4.3 loses 2 lines here


def test_overview_export_draft_lists_the_issues(sites: SiteCache) -> None:
    """The 3 issues torch's own draft-export report lists are on the overview."""
    text = article_text(sites.get(EXPORT_DRAFT).page("index.html"))
    assert re.search(r"(?i)missing fake kernel.{0,80}tlsite\.scale_rows\.default", text)
    assert re.search(r"(?i)mismatched fake kernel.{0,80}tlsite\.pad_rows\.default", text)
    assert re.search(r"(?i)data.dependent.{0,80}u0 > 2", text)
    assert "export_draft.py:45" in text


def test_graph_breaks_page_lists_distinct_breaks(sites: SiteCache) -> None:
    site = sites.get(GRAPH_BREAKS)
    rows = [r for r in tables(site.page("graph_breaks.html"))[0] if r[0].text != "#"]
    by_location = {re.sub(r".*/", "", r[2].text): r for r in rows}
    assert sorted(by_location) == ["graph_breaks.py:22", "graph_breaks.py:34", "graph_breaks.py:45"]
    expected = {
        "graph_breaks.py:22": ("builtin operator", 4, ["[0/0]", "[1/0]", "[3/0]", "[5/0]"]),
        "graph_breaks.py:34": ("Tensor.item()", 1, ["[4/0]"]),
        "graph_breaks.py:45": ("marked as skipped", 1, ["[7/0]"]),
    }
    for location, (reason, hits, units) in expected.items():
        _, reason_cell, _, hits_cell, units_cell = by_location[location]
        assert reason in reason_cell.text
        assert int(hits_cell.text) == hits
        assert units_cell.text.split(", ") == units
        for unit, href in zip(units, units_cell.hrefs, strict=True):
            assert href == unit_page_of(unit)
            assert (site.site / href).is_file()
    # the detail of the print break says what it is
    assert "builtin operator `print`" in article_text(site.page("graph_breaks.html"))


def test_recompiles_page_shows_each_failed_guard(sites: SiteCache) -> None:
    site = sites.get(RECOMPILES)
    rows = tables(site.page("recompiles.html"))[0][1:]
    guard_of = {r[0].text: r[2].text for r in rows}
    assert list(guard_of) == ["[0/0]", "[0/1]", "[0/2]", "[0/3]", "[0/4]", "[0/5]"]
    assert "mode == 'relu'" in guard_of["[0/1]"]
    assert "size mismatch at index 0. expected 4, actual 6" in guard_of["[0/2]"]
    assert "dtype mismatch. expected Float, actual Double" in guard_of["[0/3]"]
    assert "dtype mismatch. expected Double, actual Float" in guard_of["[0/4]"]
    assert "mode == 'gelu'" in guard_of["[0/5]"]
    for row in rows:
        assert (site.site / row[0].hrefs[0]).is_file()
    # and the compile's own page says why it recompiled
    unit_text = article_text(site.page("-_0_2_0/index.html"))
    assert "Why it recompiled" in unit_text
    assert "size mismatch at index 0. expected 4, actual 6" in unit_text


def test_failures_page_has_tlparse_columns(sites: SiteCache) -> None:
    site = sites.get(COMPILE_ERROR)
    header, *rows = tables(site.page("failures.html"))[0]
    assert [c.text.lower() for c in header] == [
        "compile id",
        "failure type",
        "failure description",
        "failure source",
    ]
    got = [(r[0].text, r[1].text) for r in rows]
    assert got == [
        ("[0/0]", "BackendCompilerFailed"),
        ("[1/0]", "TorchRuntimeError"),
        ("[2/0_1]", "RestartAnalysis"),
        ("[3/0_1]", "RestartAnalysis"),
        ("[6/0]", "Unsupported"),
    ]
    source = {r[0].text: r[3].text for r in rows}
    assert source["[1/0]"].endswith("compile_error.py:28")
    assert source["[6/0]"].endswith("compile_error.py:42")
    text = article_text(site.page("failures.html"))
    assert "broken_backend: refusing to compile this graph" in text
    assert "a and b must have same reduction dim" in text


@pytest.mark.parametrize(
    ("trace", "phrases"),
    [
        pytest.param(
            GRAPH_BREAKS,
            [
                "forward",
                "post",
                "torch_dynamo_resume_in_post_at_45",
                "Unsupported Tensor.item() call with capture_scalar_outputs=False",
                "Attempted to call function marked as skipped",
                "Failed to trace builtin operator",
            ],
            id="graph_breaks",
        ),
        pytest.param(
            RECOMPILES,
            [
                "size mismatch at index 0. expected 4, actual 6",
                "dtype mismatch. expected Float, actual Double",
                "mode == 'relu'",
            ],
            id="recompiles",
        ),
        pytest.param(
            COMPILE_ERROR,
            [
                "bad_matmul",
                "with_helper",
                "BackendCompilerFailed",
                "TorchRuntimeError",
                "broken_backend: refusing to compile this graph",
                "RuntimeError when making fake tensor call",
            ],
            id="compile_error",
        ),
        pytest.param(EXAMPLE, ["GLOBAL_STATE changed: grad_mode", "cpp_fused_"], id="example"),
    ],
)
def test_search_finds_what_users_look_for(
    sites: SiteCache, trace: Path, phrases: list[str]
) -> None:
    text = search_text(sites.get(trace))
    missing = [p for p in phrases if p not in text]
    assert missing == []


def test_search_finds_triton_kernels(sites: SiteCache) -> None:
    """A GPU trace's Triton kernel names are searchable (any corpus trace with some)."""
    with_triton = [
        t for t in ALL_TRACES if any(k.startswith("triton_") for k in inductor_kernels(t))
    ]
    assert with_triton, "no corpus trace has a triton kernel"
    for trace in with_triton[:3]:
        text = search_text(sites.get(trace))
        missing = sorted(k for k in inductor_kernels(trace) if k not in text)
        assert missing == [], f"{trace_id(trace)}: {missing}"


def test_compile_id_page_shows_its_stack_as_a_list(sites: SiteCache) -> None:
    page = sites.get(EXAMPLE).page("-_0_0_0/index.html")
    text = article_text(page)
    assert "Stack that triggered this compile" in text
    assert "<details" not in text and "<li>" not in text  # no HTML source shown as text
    stack = re.search(r'(?s)<details class="tlsite-stack">(.*?)</details>', page)
    assert stack is not None
    assert "example.py:27" in visible_text(stack.group(1))  # forward, where [0/0] starts


def test_health_page_names_the_trace_file(sites: SiteCache) -> None:
    text = article_text(sites.get(EXAMPLE).page("health.html"))
    assert "Every line of example.log is accounted for" in text


# == size does not grow with the number of compile ids =======================================
def _make_trace(out: Path, *args: str) -> Path:
    if not MAKE_TRACE.is_file():
        pytest.skip(f"{MAKE_TRACE} is missing")
    subprocess.run(
        [sys.executable, str(MAKE_TRACE), *args, "-o", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out


def _page_size(trace: Path, out: Path, page: str) -> int:
    outcome = build(str(trace), out, make_zip=False)
    return (outcome.site / page).stat().st_size


@pytest.mark.slow
def test_compile_id_page_size_does_not_grow_in_a_recompile_storm(tmp_path: Path) -> None:
    """One frame recompiled 20 vs 120 times: page [0/7] stays the same size."""
    base_path = PROJECT_ROOT / "../shared/corpus/tlparse/inputs/comp_metrics.log"
    small = _make_trace(tmp_path / "storm20.log", "--storm", "20", "--base", str(base_path))
    big = _make_trace(tmp_path / "storm120.log", "--storm", "120", "--base", str(base_path))
    small_size = _page_size(small, tmp_path / "small", "-_0_7_0/index.html")
    big_size = _page_size(big, tmp_path / "big", "-_0_7_0/index.html")
    assert big_size <= small_size + 1_000, (small_size, big_size)


@pytest.mark.slow
def test_compile_id_page_size_does_not_grow_with_many_frames(tmp_path: Path) -> None:
    """15 vs 120 frames (the nav lists frames): page [1/0] does not grow."""
    base_path = PROJECT_ROOT / "../shared/corpus/tlparse/inputs/comp_metrics.log"
    size = base_path.stat().st_size
    small = _make_trace(tmp_path / "few.log", "--size", str(size * 5), "--base", str(base_path))
    big = _make_trace(tmp_path / "many.log", "--size", str(size * 40), "--base", str(base_path))
    small_site = build(str(small), tmp_path / "small", make_zip=False).site
    big_site = build(str(big), tmp_path / "big", make_zip=False).site
    n_small = len([k for k in compile_directory_at(small_site) if k != "unknown"])
    n_big = len([k for k in compile_directory_at(big_site) if k != "unknown"])
    assert n_big >= 5 * n_small
    page = "-_1_0_0/index.html"
    small_size = (small_site / page).stat().st_size
    big_size = (big_site / page).stat().st_size
    assert big_size <= small_size + 1_000, (small_size, big_size)


def compile_directory_at(site: Path) -> dict[str, dict]:
    return json.loads((site / "compile_directory.json").read_text(encoding="utf-8"))

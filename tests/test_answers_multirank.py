"""Multi-rank sites a user can trust (issue #16, point 12), checked on real rank logs.

Each rank's report links back to the landing page (nav and overview), the landing page says in
words what differs where it warns (with links that reach the evidence), its search box says
what it searches and hands the query to each rank's search, and no status glyph needs an
emoji font. Expected values are worked out here from the tlparse-compatible files the site
writes (``compile_directory.json``), not copied from the pages.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import markdown
import pytest
from corpus import CORPUS, TLPARSE_INPUTS

from tlsite.core import load, resolve_input
from tlsite.core.multirank import CacheEvent, RankSummary, UnitSummary
from tlsite.core.render.landing import render_landing
from tlsite.core.render.pages import render_tree
from tlsite.mkdocs_plugin.multirank_build import build_multirank

TWO_RANKS = CORPUS / "torch-2.13" / "multi_rank"
DIVERGING = TLPARSE_INPUTS / "multi_rank_logs"
SCHEDULES = TLPARSE_INPUTS / "multi_rank_schedule"

pytestmark = pytest.mark.skipif(
    not (TWO_RANKS.is_dir() and DIVERGING.is_dir()), reason="shared trace corpus not available"
)

_LINK = re.compile(r'<a\b[^>]*?\bhref="([^"]*)"[^>]*>(.*?)</a>', re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


# -- helpers ---------------------------------------------------------------------------------------
def build(source: Path, out: Path) -> Path:
    with resolve_input(str(source)) as resolved:
        build_multirank(resolved, out, jobs=1)
    return out


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(TWO_RANKS, tmp_path_factory.mktemp("two") / "site")


@pytest.fixture(scope="module")
def diverging(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(DIVERGING, tmp_path_factory.mktemp("diverging") / "site")


def text_of(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).split())


def links(page: Path) -> list[tuple[str, str]]:
    """(href, visible text) of every link on a built page."""
    source = page.read_text(encoding="utf-8")
    return [(html.unescape(href), text_of(body)) for href, body in _LINK.findall(source)]


def resolve(page: Path, href: str) -> tuple[Path, str]:
    """The file a relative link on ``page`` opens from file://, and its fragment."""
    url = urlsplit(urljoin(page.resolve().as_uri(), href))
    assert url.scheme == "file", href
    return Path(unquote(url.path)), url.fragment


def nav_links(page: Path) -> list[tuple[str, str]]:
    """Links of the primary navigation (the left sidebar)."""
    source = page.read_text(encoding="utf-8")
    start = source.index('class="md-nav md-nav--primary"')
    end = source.index("</nav>", start)
    return [(html.unescape(h), text_of(b)) for h, b in _LINK.findall(source[start:end])]


def warning(site: Path, starting: str) -> str:
    """The HTML of the landing page's warning that starts with ``starting``, up to the next."""
    source = (site / "index.html").read_text(encoding="utf-8")
    match = re.search(r'<div class="admonition warning">(.*?)</div>', source, re.DOTALL)
    assert match, "no warning box on the landing page"
    items = match.group(1).split("<strong>Warning:</strong>")
    found = [item for item in items if text_of(item).startswith(starting)]
    assert found, f"no warning {starting!r}"
    return found[0]


def directory(site: Path, rank: int) -> dict[str, list[dict]]:
    """compile id → its tlparse ``compile_directory.json`` artifacts on that rank."""
    path = site / f"rank_{rank}" / "compile_directory.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return {key: value["artifacts"] for key, value in data.items()}


def ranks_of(site: Path) -> list[int]:
    return sorted(int(p.name.split("_")[1]) for p in site.glob("rank_*") if p.is_dir())


# -- back links ------------------------------------------------------------------------------------
def test_landing_links_every_rank(two_ranks: Path) -> None:
    landing = two_ranks / "index.html"
    opened = {resolve(landing, href)[0] for href, _ in links(landing) if "://" not in href}
    for rank in ranks_of(two_ranks):
        assert two_ranks / f"rank_{rank}" / "index.html" in opened


def test_each_rank_links_back_to_the_landing_page(two_ranks: Path) -> None:
    landing = (two_ranks / "index.html").resolve()
    ranks = ranks_of(two_ranks)
    assert len(ranks) == 2
    for rank in ranks:
        root = two_ranks / f"rank_{rank}"
        deep = next(p for p in sorted(root.glob("-_*/index.html")))
        for page in (root / "index.html", root / "frames" / "index.html", deep):
            back = [href for href, text in nav_links(page) if text == "All ranks"]
            assert back, f"no 'All ranks' entry in the nav of {page}"
            assert resolve(page, back[0])[0] == landing, (page, back[0])
        overview = (root / "index.html").read_text(encoding="utf-8")
        assert f"Rank {rank} of a {len(ranks)}-rank job" in text_of(overview)
        see_all = [href for href, text in links(root / "index.html") if text == "see all ranks"]
        assert see_all and resolve(root / "index.html", see_all[0])[0] == landing


def test_standalone_report_has_no_back_link_and_the_markdown_carries_it() -> None:
    """A single-rank report links nowhere above itself; a rank of a multi-rank site gets the
    link in its Markdown (so `tlsite markdown` + plain mkdocs keep it), not from the plugin."""
    log = sorted(TWO_RANKS.glob("*rank_0*.log"))[0]
    trace = load(str(log))
    try:
        alone = render_tree(trace)
        assert "All ranks" not in json.dumps(alone.nav)
        assert "see all ranks" not in alone.pages[0].standalone_markdown()
        trace.job_ranks = 2
        ranked = render_tree(trace)
    finally:
        trace.close()
    assert ranked.nav[0] == {"All ranks": "../index.html"}
    overview = ranked.pages[0].standalone_markdown()
    assert "Rank 0 of a 2-rank job" in overview
    assert "[see all ranks](../index.html)" in overview


def test_landing_page_carries_the_reports_content_security_policy(two_ranks: Path) -> None:
    """The landing shows trace text (log names, op names) like a rank page: same policy."""

    def policy(page: Path) -> str:
        found = re.search(
            r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"',
            page.read_text(encoding="utf-8"),
        )
        assert found, f"no Content-Security-Policy on {page}"
        return re.sub(r" 'sha256-[^']*'", "", found.group(1))  # hashes differ by page

    for page in (two_ranks / "index.html", two_ranks / "404.html"):
        assert policy(page) == policy(two_ranks / "rank_0" / "index.html")


# -- the warnings say what differs -----------------------------------------------------------------
def cache_sequence(artifacts: list[dict]) -> list[tuple[str, int]]:
    """The cache lookups of a compile id as (artifact name, number), from tlparse's suffixes."""
    return [(a["name"], a["number"]) for a in artifacts if a["suffix"]]


def status(name: str) -> str:
    return next(s for s in ("miss", "hit", "bypass") if f"cache_{s}" in name)


@pytest.mark.slow
def test_cache_warning_names_the_lookup_and_links_both_ranks(two_ranks: Path) -> None:
    box = warning(two_ranks, "Diverging Cache hit/miss patterns")
    words = text_of(box)
    dirs = {rank: directory(two_ranks, rank) for rank in (0, 1)}
    differing = [
        key
        for key in dirs[0]
        if [status(n) for n, _ in cache_sequence(dirs[0][key])]
        != [status(n) for n, _ in cache_sequence(dirs[1].get(key, []))]
    ]
    assert differing, "the two ranks' caches answered alike: the corpus changed"
    verbs = {"miss": "missed", "hit": "hit", "bypass": "bypassed"}
    box_links = [(href, text) for href, text in _LINK.findall(box)]
    for key in differing[:3]:
        seqs = {r: cache_sequence(dirs[r][key]) for r in (0, 1)}
        at = next(i for i, (a, b) in enumerate(zip(*seqs.values(), strict=False)) if a != b)
        (name0, num0), (name1, num1) = seqs[0][at], seqs[1][at]
        sentence = next(s for s in re.split(r"(?=\bRank )", words) if f"for {key}" in s)
        assert f"lookup {at + 1}" in sentence
        for rank, name in ((0, name0), (1, name1)):
            assert re.search(rf"\brank {rank}\b.*\b{verbs[status(name)]}\b", sentence, re.I)
        # both ranks' lookups are linked: the artifact anchors exist on the rank's page
        for rank, number in ((0, num0), (1, num1)):
            hrefs = [h for h, _ in box_links if h.startswith(f"rank_{rank}/")]
            wanted = [h for h in hrefs if h.endswith(f"#artifact-{number}")]
            assert wanted, (rank, number, hrefs)
            target, fragment = resolve(two_ranks / "index.html", wanted[0])
            assert f'id="{fragment}"' in target.read_text(encoding="utf-8")


@pytest.mark.slow
def test_compile_id_warning_names_the_extra_ids_on_the_rank_that_has_them(
    diverging: Path,
) -> None:
    ranks = ranks_of(diverging)
    sets = {
        rank: frozenset(k for k in directory(diverging, rank) if not k.startswith("[-/"))
        for rank in ranks
    }
    largest = Counter(sets.values()).most_common(1)[0][0]
    reference = [r for r in ranks if sets[r] == largest]
    box = warning(diverging, "Diverging Compilation IDs")
    words, box_links = text_of(box), _LINK.findall(box)
    outliers = [r for r in ranks if sets[r] != largest]
    assert outliers, "the ranks compiled the same ids: the corpus changed"
    for rank in outliers:
        extra = sets[rank] - largest
        if not extra:
            continue
        them = ", ".join(map(str, reference))
        phrase = f"ank {rank} compiled {len(extra)} compile ids that ranks {them} did not"
        assert phrase in words
        # the first ids listed for this rank open that rank's own compile-id pages
        own = [(h, t) for h, t in box_links if h.startswith(f"rank_{rank}/")]
        assert own, f"no link into rank {rank}'s report"
        for href, text in own:
            assert text_of(text) in extra
            target, _ = resolve(diverging / "index.html", href)
            assert target.is_file(), href


@pytest.mark.slow
def test_collective_warning_names_the_first_op_that_differs(tmp_path: Path) -> None:
    site = build(SCHEDULES, tmp_path / "site")
    schedules: dict[str, dict[int, list[str]]] = {}
    for entry in json.loads((site / "collective_schedules.json").read_text(encoding="utf-8")):
        schedules.setdefault(entry["graph"], {})[entry["rank"]] = entry["ops"]
    words = text_of(warning(site, "Diverging collective operation sequences"))
    short = {
        op: op.removesuffix(".default").rsplit(".", 1)[-1]
        for g in schedules.values()
        for ops in g.values()
        for op in ops
    }
    checked = 0
    for graph, by_rank in schedules.items():
        if len({tuple(ops) for ops in by_rank.values()}) < 2:
            continue
        frame, fcid = graph.split("_")[1:3]
        key = f"[{frame}/{fcid}]"
        sentence = next(s for s in re.split(r"(?=\bRanks? \d)", words) if f"for {key}" in s)
        seqs = list(by_rank.values())
        at = next(
            i for i in range(max(map(len, seqs))) if len({tuple(q[i : i + 1]) for q in seqs}) > 1
        )
        for ops in seqs:
            if at < len(ops):
                assert short[ops[at]] in sentence, (key, sentence)
        assert f"collective {at + 1} of" in sentence
        checked += 1
    assert checked, "no graph's schedule differs across ranks: the corpus changed"


def test_what_differs_escapes_trace_text() -> None:
    """Op and artifact names in the sentences come from the trace: never markup or links."""
    hostile = "x<img src=x onerror=alert(1)>](javascript:alert(1))"

    def rank(number: int, ops: list[str], cache: str) -> RankSummary:
        event = CacheEvent(cache, f"{hostile}_{cache}", 5)
        unit = UnitSummary(
            "[0/0]", "-_0_0_0", 0, True, cache=(event,), schedule=tuple(ops), schedule_artifact=3
        )
        return RankSummary(rank=number, source=f"rank_{number}.log", units=[unit])

    md = render_landing([rank(0, ["all_reduce", hostile], "hit"), rank(1, ["a", "b"], "miss")])
    page = markdown.markdown(md.split("---", 2)[2], extensions=["admonition", "attr_list"])
    assert "alert(1)" in text_of(page)  # shown, as text
    assert "<img" not in page and 'href="javascript' not in page


# -- glyphs ----------------------------------------------------------------------------------------
def covered(char: str) -> bool:
    """Whether an installed font has a glyph for ``char`` (what Chromium falls back to)."""
    found = subprocess.run(
        ["fc-list", f":charset={ord(char):x}", "family"],
        capture_output=True,
        text=True,
        check=False,
    )
    return bool(found.stdout.strip())


@pytest.mark.browser
@pytest.mark.slow
def test_no_glyph_needs_a_font_chromium_lacks(open_site, two_ranks: Path, diverging: Path) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("fc-list") is None:
        pytest.skip("fontconfig's fc-list is not installed")
    pages = []
    for site in (two_ranks, diverging):
        pages += [site / "index.html", site / "rank_1" / "index.html"]
        pages.append(next(iter(sorted((site / "rank_1").glob("-_*/index.html")))))
    missing: dict[str, list[str]] = {}
    for path in pages:
        page, _report = open_site(path)
        seen = set(page.inner_text("body")) | set(page.inner_text("header"))
        for char in sorted(c for c in seen if ord(c) > 0x7F):
            if not covered(char):
                missing.setdefault(f"U+{ord(char):04X} {char}", []).append(str(path))
    assert not missing, f"glyphs no installed font has (tofu in Chromium): {missing}"


# -- search ----------------------------------------------------------------------------------------
@pytest.mark.browser
@pytest.mark.slow
def test_landing_search_says_its_scope_and_hands_the_query_to_a_rank(
    open_site,  # type: ignore[no-untyped-def]
    two_ranks: Path,
) -> None:
    page, report = open_site(two_ranks / "index.html")
    assert "searches this page only" in page.inner_text("article")
    box = page.locator('input[data-md-component="search-query"]')
    assert box.get_attribute("placeholder") == "Search this page only"
    box.click()
    box.fill("fx_graph_cache_miss")
    search = page.locator("a.tlsite-rank-search").nth(1)
    assert search.get_attribute("href") == "rank_1/index.html?q=fx_graph_cache_miss"
    page.keyboard.press("Escape")
    search.click()
    page.wait_for_url("**/rank_1/index.html?q=*")
    meta = page.locator(".md-search-result__meta")
    meta.wait_for()
    assert "matching document" in meta.inner_text()
    # the back link works from file:// too
    page.keyboard.press("Escape")
    page.locator("nav.md-nav--primary a", has_text="All ranks").first.click()
    page.wait_for_url(re.compile(r".*/site/index\.html$"))
    assert not report.outside_requests and not report.console_errors

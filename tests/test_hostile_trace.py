"""A hostile trace: no script from it ever runs, and its strings are shown as text.

Reports are opened by people who did not write the trace. tlparse 0.4.3 pages run script from
a crafted trace (unescaped failure reasons, ``javascript:`` link URLs). Here every string a
report shows (file and function names, guard text, failure and restart reasons, graph-break
reasons, artifact and link names, link URLs, payloads, metrics keys and values, event types,
compile ids, the header's path, the log's own file name) carries HTML, a ``<script>``, event
handlers, Markdown links to ``javascript:``, fence-breaking backticks, attribute lists and
template syntax. Each payload calls ``alert("<field>-<kind>")``, so a dialog names its source.

Checks: the built HTML holds no element, handler or URL from the trace (a parser walks every
page); every report page carries a Content-Security-Policy that refuses inline handlers and
any script but the theme's own; Chromium opens every page without a dialog and shows the
strings as text; links from ``link`` records are followed only for http(s) URLs; search, the
palette toggle, the stack trie and code copy still work under the policy from ``file://``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import trace_lines

from tlsite.cli import build
from tlsite.mkdocs_plugin import site_config
from tlsite.mkdocs_plugin.csp import MARKER, add_csp, inline_scripts

if TYPE_CHECKING:
    from browser import SiteOpener, SiteReport


def hostile(tag: str) -> str:
    """One string that is harmless only when shown as text; its alerts say ``tag``."""
    return (
        f'<script>alert("{tag}-s")</script><img src=x onerror=alert("{tag}-i")>'
        f'[md link](javascript:alert("{tag}-m")) <a href="javascript:alert(\'{tag}-a\')">a</a>'
        f" ``` ~~~ `x` {{{{ 7*7 }}}} {{% if 1 %}}T{{% endif %}} {{: onclick=\"alert('{tag}-c')\" }}"
        f' <svg onload=alert("{tag}-v")></svg> &amp; | * _ # {tag}-end'
    )


CID0 = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
CID1 = {"frame_id": 0, "frame_compile_id": 1, "attempt": 0}
STACK = [
    {"line": 3, "name": hostile("fn"), "filename": 0, "loc": hostile("loc")},
    {"line": 5, "name": hostile("fn2"), "filename": 1},
]
LINK_URLS = {
    "javascript": "javascript:alert('link-js')",
    "javascript_mixed_case": "  JaVaScRiPt:alert('link-js2')",
    "data": "data:text/html,<script>alert('link-data')</script>",
    "quote_breaking": 'https://ok.example/"><script>alert("link-quote")</script>',
    "vbscript": "vbscript:msgbox(1)",
    "good": "https://example.com/ok?a=1&b=2",
}
LOG_NAME = 'trace <img src=x onerror=alert("logname")>.log'


def graph_break(tag: str) -> str:
    return (
        f"Graph break in user code at /x/{hostile(tag + 'file')}.py:7\n"
        f"Graph Break Reason: Encountered graph break:\n{hostile(tag)}\n"
        " https://evil.example/'onmouseover='alert(1)'/gb/gb0001.html\n"
        f"User code traceback:\n  {hostile(tag + 'stack')}"
    )


def records_of(cid: dict[str, int], n: int) -> list[str]:
    """Every record kind whose strings a compile-id page shows, for compile ``n`` of frame 0."""
    art = {"encoding": "string"}
    out = [
        trace_lines({"dynamo_start": {"stack": STACK}, **cid}),
        trace_lines(
            {"dynamo_output_graph": {"sizes": {hostile("sz"): [1]}}, **cid}, hostile("graph")
        ),
        trace_lines({"dynamo_guards": {}, **cid}, json.dumps([{"code": hostile("guard")}])),
        trace_lines(
            {"artifact": {"name": "dynamo_graph_break_reason", **art}, **cid}, graph_break("gb")
        ),
        trace_lines({"artifact": {"name": hostile("art"), **art}, **cid}, hostile("artpayload")),
        trace_lines(
            {"artifact": {"name": hostile("artj"), "encoding": "json"}, **cid},
            json.dumps({hostile("k"): hostile("v")}),
        ),
        trace_lines({"graph_dump": {"name": hostile("gd")}, **cid}, hostile("gdpayload")),
        trace_lines({"dump_file": {"name": hostile(f"df{n}")}, **cid}, hostile("dfpayload")),
        trace_lines(
            {"inductor_output_code": {"filename": f"/tmp/ioc{n}.py"}, **cid}, hostile("code")
        ),
        trace_lines({"optimize_ddp_split_child": {"name": hostile("ddp")}, **cid}, hostile("d")),
        trace_lines(
            {
                "symbolic_shape_specialization": {
                    "symbol": hostile("sym"),
                    "value": hostile("val"),
                    "user_stack": STACK,
                    "stack": STACK,
                },
                **cid,
            }
        ),
        trace_lines(
            {
                "guard_added": {"expr": hostile("gexpr"), "prefix": "eval", "user_stack": STACK},
                **cid,
            }
        ),
        trace_lines(
            {"missing_fake_kernel": {"op": hostile("op"), "reason": hostile("mfk")}, **cid}
        ),
        trace_lines({hostile("event"): {"x": hostile("x")}, **cid}, hostile("eventpayload")),
        trace_lines({"dynamo_output_graph": {}, hostile("topkey"): 1, **cid}, "graph"),
        trace_lines(
            {"chromium_event": {}, **cid},
            json.dumps({"name": hostile("chrome"), "ts": 1.7e15, "ph": "B", "pid": 0, "tid": 0}),
        ),
    ]
    for name, url in LINK_URLS.items():
        out.append(trace_lines({"link": {"name": f"{name} {hostile('link')}", "url": url}, **cid}))
    if n:
        out.append(
            trace_lines(
                {"artifact": {"name": "recompile_reasons", "encoding": "json"}, **cid},
                json.dumps([hostile("recompile")]),
            )
        )
    metrics = {
        "co_name": hostile("coname"),
        "co_filename": hostile("cofile"),
        "co_firstlineno": 1,
        "fail_type": hostile("failtype"),
        "fail_reason": hostile("failreason"),
        "fail_user_frame_filename": hostile("failfile"),
        "fail_user_frame_lineno": 3,
        "restart_reasons": [hostile("restart")],
        hostile("mkey"): hostile("mval"),
        "dynamo_cumulative_compile_time_us": 1000 + n,
    }
    out.append(trace_lines({"compilation_metrics": metrics, **cid}))
    return out


def hostile_trace() -> str:
    parts = [
        trace_lines({"str": [hostile("file") + ".py", 0]}),
        trace_lines({"str": ["/home/u/" + hostile("file2") + ".py", 1]}),
        *records_of(CID0, 0),
        *records_of(CID1, 1),
        trace_lines(
            {"artifact": {"name": "torch_version", "encoding": "json"}},
            json.dumps({"pytorch_version": hostile("version")}),
        ),
        # a compile id that is not a number is listed under "unknown", its text on Parse health
        trace_lines({"dynamo_start": {"stack": STACK}, "frame_id": hostile("cid")}),
        trace_lines({"exported_program": {}, "frame_id": 1, "frame_compile_id": 0}, hostile("ep")),
        # a glog header path cannot hold ':' (the header pattern ends it there)
        'V1206 15:18:15.925000 1500233 torch/<img src=x onerror=alert("hdr")>.py:12] '
        + json.dumps({"artifact": {"name": "h", "encoding": "string"}})
        + "\n",
        hostile("garbage") + "\n",
    ]
    return "".join(parts)


#: Fields shown verbatim on the first compile id's page (in collapsed blocks too).
SHOWN_ON_UNIT_PAGE = [
    "coname", "cofile", "failtype", "failreason", "restart", "gb", "guard", "art", "artj",
    "artpayload", "graph", "gd", "gdpayload", "ddp", "sym", "val", "gexpr", "fn", "fn2", "loc",
    "file", "event", "mkey", "mval", "code", "link",
]  # fmt: skip


@dataclass
class Built:
    site: Path
    bundle: Path
    export: bool
    pages: list[Path] = field(default_factory=list)

    def html(self, page: str) -> str:
        return (self.site / page).read_text(encoding="utf-8")


@pytest.fixture(scope="module", params=[False, True], ids=["report", "export_report"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("hostile")
    log = root / LOG_NAME
    log.write_text(hostile_trace(), encoding="utf-8")
    outcome = build(str(log), root / "site", export_mode=request.param)
    assert outcome.bundle is not None
    pages = sorted(p for p in outcome.site.rglob("*.html") if "assets" not in p.parts)
    return Built(outcome.site, outcome.bundle, request.param, pages)


# -- the HTML as written ------------------------------------------------------------------------
_URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "poster", "data", "srcdoc"}
_SAFE_URL = re.compile(r"(?i)^\s*(https?:|#|\.|[^:]*$)")
_VOID = {"img", "br", "hr", "meta", "link", "input", "source", "wbr", "col", "area", "base"}


class _Scan(HTMLParser):
    """Everything in a page that could run script, with where it sits (tag path)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.stack: list[str] = []
        self.links: list[tuple[str, str]] = []  # (href, text) of every <a>
        self._link: list[str] | None = None
        self._href = ""

    def _where(self) -> str:
        return ">".join(self.stack[-4:])

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"{name}= on <{tag}> in {self._where()}")
            if name in _URL_ATTRS and value is not None and not _SAFE_URL.match(value):
                self.found.append(f"{name}={value[:40]!r} on <{tag}> in {self._where()}")
        if tag in ("iframe", "object", "embed", "base", "frame", "frameset"):
            self.found.append(f"<{tag}> in {self._where()}")
        if tag == "a":
            self._link, self._href = [], dict(attrs).get("href") or ""
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._link is not None:
            self.links.append((self._href, "".join(self._link)))
            self._link = None
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if self._link is not None:
            self._link.append(data)


def scan(html: str) -> _Scan:
    parser = _Scan()
    parser.feed(html)
    parser.close()
    return parser


def test_pages_hold_no_markup_from_the_trace(built: Built) -> None:
    """Content, navigation, header, ``<title>``: no handler, URL, element or script of its own.

    Python's parser reads ``<title>`` as markup (browsers do not), so an unescaped title counts.
    """
    problems = []
    for page in built.pages:
        html = page.read_text(encoding="utf-8")
        found = scan(html).found
        found += [f"<script>{s[:30]}" for s in inline_scripts(html) if "alert(" in s]
        problems += [f"{page.relative_to(built.site)}: {f}" for f in found]
    assert problems == []


def test_titles_hold_no_markup_from_the_trace(built: Built) -> None:
    """``<title>`` and the header show page titles; MkDocs themes print them unescaped."""
    for page in built.pages:
        html = page.read_text(encoding="utf-8")
        if 'class="md-header__topic"' not in html or page.name == "404.html":
            continue  # tlparse-compatible pages (autoescaped), and the 404 page (no title)
        title = re.search(r"(?s)<title>(.*?) - tlsite: .*?</title>", html)
        topic = re.search(
            r'(?s)<div class="md-header__topic" data-md-component="header-topic">\s*'
            r'<span class="md-ellipsis">\s*(.*?)\s*</span>',
            html,
        )
        assert title is not None and topic is not None, page
        for text in (title.group(1), topic.group(1)):
            assert "<" not in text and ">" not in text, (page, text)


def test_link_records_are_followed_only_for_http_urls(built: Built) -> None:
    links = scan(built.html("-_0_0_0/index.html")).links
    outward = {text.split(" ", 1)[0]: href for href, text in links if not href.startswith("#")}
    from_records = {name: href for name, href in outward.items() if name in LINK_URLS}
    assert from_records == {"good": "https://example.com/ok?a=1&b=2"}
    text = _text(built.html("-_0_0_0/index.html"))
    for name, url in LINK_URLS.items():
        if name != "good":
            assert url.strip() in text, name  # shown, as text, next to the link's name


def test_template_syntax_is_shown_literally(built: Built) -> None:
    text = _text(built.html("-_0_0_0/index.html"))
    assert text.count("{{ 7*7 }}") >= len(SHOWN_ON_UNIT_PAGE)
    assert "{% if 1 %}T{% endif %}" in text


def _text(html: str) -> str:
    """Text content as the browser shows it (entities decoded, tags dropped)."""

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []
            self.skip = 0

        def handle_starttag(self, tag: str, attrs: list) -> None:
            self.skip += tag in ("script", "style")

        def handle_endtag(self, tag: str) -> None:
            self.skip -= tag in ("script", "style")

        def handle_data(self, data: str) -> None:
            if not self.skip:
                self.parts.append(data)

    parser = Text()
    parser.feed(html)
    return "".join(parser.parts)


def test_output_files_hold_the_strings_unchanged(built: Built) -> None:
    """Raw artifact files are data, not pages: the text is written as logged."""
    texts = [p.read_text(encoding="utf-8") for p in (built.site / "-_0_0_0").glob("*.txt")]
    assert hostile("artpayload") in texts
    assert hostile("gdpayload") in texts
    directory = json.loads((built.site / "compile_directory.json").read_text(encoding="utf-8"))
    listed = {a["name"]: a["url"] for a in directory["[0/0]"]["artifacts"]}
    assert listed[f"javascript {hostile('link')}"] == LINK_URLS["javascript"]  # data, as logged


# -- the Content-Security-Policy ------------------------------------------------------------------
def csp_of(html: str) -> str:
    match = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', html)
    assert match is not None, "no Content-Security-Policy"
    return match.group(1)


def directives(policy: str) -> dict[str, list[str]]:
    out = {}
    for part in policy.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


def test_every_report_page_has_a_policy_before_any_script(built: Built) -> None:
    for page in built.pages:
        html = page.read_text(encoding="utf-8")
        if 'class="md-header__topic"' not in html:
            continue  # tlparse-compatible pages have no script at all (checked above)
        policy = directives(csp_of(html))
        head = html[: html.index("</head>")]
        assert head.index("Content-Security-Policy") < head.index("<script"), page
        script_src = policy["script-src"]
        assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
        assert policy["object-src"] == ["'none'"] and policy["base-uri"] == ["'none'"]
        hashes = {s for s in script_src if s.startswith("'sha256-")}
        trusted = {_sha(s) for s in inline_scripts(html) if "alert(" not in s}
        assert hashes == trusted, page  # the theme's scripts, and only them


def _sha(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def test_a_script_the_escaping_missed_gets_no_hash(built: Built) -> None:
    """Should trace text ever reach a page unescaped, its script gets no hash: the hashes come
    from the theme's templates, not from the page."""
    html = built.html("index.html")
    theme_scripts = inline_scripts(html)
    planted = '<script>alert("planted")</script>'
    unbuilt = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', MARKER, html, count=1)
    unbuilt = unbuilt.replace("</article>", planted + "</article>", 1)
    theme = _ThemeConfig(site_config.FEATURES)
    rebuilt = add_csp(unbuilt, page=_Page("index.html"), config={"theme": theme, "extra": {}})
    policy = csp_of(rebuilt)
    assert policy == csp_of(html)
    assert _sha('alert("planted")') not in policy
    assert all(_sha(s) in policy for s in theme_scripts)


class _ThemeConfig(dict):
    """What :mod:`tlsite.mkdocs_plugin.csp` reads of MkDocs' theme: its folders, its features."""

    def __init__(self, features: list[str]) -> None:
        super().__init__(features=features)
        import material

        self.dirs = [
            str(site_config.THEME_DIR),
            str(Path(material.__file__).parent / "templates"),
        ]


@dataclass
class _Page:
    url: str


# -- in the browser ---------------------------------------------------------------------------
def assert_nothing_ran(report: SiteReport) -> None:
    assert report.dialogs == []
    assert report.outside_requests == []
    # the only errors allowed are the browser refusing what the trace tried to run
    others = [e for e in report.console_errors if "Content Security Policy" not in e]
    assert [e for e in others if "ERR_FILE_NOT_FOUND" not in e] == []


@pytest.mark.browser
def test_no_dialog_on_any_page(built: Built, open_site: SiteOpener) -> None:
    """Every page of the site (report pages, tlparse-compatible pages, 404) in one tab."""
    page, report = open_site(built.pages[0])
    for page_path in built.pages:
        page.goto(page_path.resolve().as_uri(), wait_until="load")
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        page.mouse.move(300, 300)  # hover handlers, if any had survived
        page.mouse.move(600, 500)
        assert report.dialogs == [], page_path
    assert report.outside_requests == []


@pytest.mark.browser
def test_the_harness_sees_a_script_that_runs(built: Built, open_site: SiteOpener) -> None:
    """The dialog checks can fail: a page stripped of its policy, with an inline handler put
    in by hand, runs it and the harness sees the dialog."""
    html = built.html("index.html")
    stripped = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html, count=1)
    assert stripped != html
    planted = '<img src="missing.png" onerror="alert(\'coname\')">'
    stripped = stripped.replace("</article>", planted + "</article>", 1)
    bare = built.site / "index-without-csp.html"
    bare.write_text(stripped, encoding="utf-8")
    try:
        _, report = open_site(bare)
        assert any("coname" in dialog for dialog in report.dialogs)
    finally:
        bare.unlink()


@pytest.mark.browser
def test_strings_are_shown_as_text(built: Built, open_site: SiteOpener) -> None:
    page, report = open_site(built.site / "-_0_0_0" / "index.html")
    # the invisible joiner that splits {{ in code blocks (core/render/escape.py) is not seen
    article = "document.querySelector('article').textContent.replaceAll('\u2060', '')"
    text = page.evaluate(article)
    missing = [tag for tag in SHOWN_ON_UNIT_PAGE if hostile(tag) not in text]
    assert missing == []
    # JSON payloads are shown pretty-printed: the strings appear JSON-quoted
    assert json.dumps(hostile("v"))[1:-1] in text
    page, _ = open_site(built.site / "-_0_1_0" / "index.html")
    assert hostile("recompile") in page.evaluate(article)
    page, _ = open_site(built.site / "health.html")
    health = page.evaluate(article)
    assert hostile("garbage")[:120] in health
    assert hostile("topkey") in health
    assert_nothing_ran(report)


@pytest.mark.browser
def test_search_toggle_trie_and_copy_work_under_the_policy(
    built: Built, open_site: SiteOpener
) -> None:
    page, report = open_site(built.site / "index.html")
    # search: the index holds the hostile strings; results must show them as text
    search = page.locator(".md-search__input")
    search.click()
    search.press_sequentially("coname")
    hit = page.locator(".md-search-result__item").first
    hit.wait_for(state="visible", timeout=15_000)
    titles = page.locator(".md-search-result__article h1").all_inner_texts()
    assert any(f"[0/0] {hostile('coname')[:100]}" in title for title in titles), titles
    page.keyboard.press("Escape")
    # palette toggle
    scheme = "document.body.getAttribute('data-md-color-scheme')"
    before = page.evaluate(scheme)
    page.locator("form[data-md-component='palette'] label:visible").first.click()
    page.wait_for_function(f"{scheme} !== {json.dumps(before)}")
    # stack trie
    toggle = page.locator(".trie-toggle").first
    toggle.wait_for(state="attached")
    expanded = toggle.get_attribute("aria-expanded")
    toggle.click()
    assert toggle.get_attribute("aria-expanded") != expanded
    assert_nothing_ran(report)
    # code copy (Material adds the buttons with script; a click shows its "copied" dialog)
    unit, unit_report = open_site(built.site / "-_0_0_0" / "index.html")
    # Material mounts a code block (adds its buttons) once it is seen (content.lazy)
    unit.locator("details.tlsite-artifact[open] pre").first.scroll_into_view_if_needed()
    copy = unit.locator("button.md-code__button[data-md-type='copy']").first
    copy.wait_for(state="visible", timeout=10_000)
    copy.click()
    unit.locator(".md-dialog.md-dialog--active").wait_for(timeout=5_000)
    assert_nothing_ran(unit_report)

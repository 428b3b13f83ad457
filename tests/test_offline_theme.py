"""The offline theme works from file:// with no network: search, stack trie, line anchors.

A small hand-written docs tree is built with ``site_config`` + ``build_site`` and opened in
headless Chromium with every non-``file:`` request aborted (see ``browser.py``). A separate test
drives the Web-Worker shim directly with a tiny worker, independent of Material.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tlsite.mkdocs_plugin.site_config import THEME_DIR, build_site, site_config

pytestmark = pytest.mark.browser

SEARCH_WORD = "graphbreakzebra"

# ~50 lines of Python, so the anchor for line 20 exists and lies well inside the block.
CODE_LINES = [
    "import torch",
    "",
    "",
    "class Block(torch.nn.Module):",
    '    """A toy block, compiled by dynamo in the real trace."""',
    "",
    "    def __init__(self, width: int) -> None:",
    "        super().__init__()",
    "        self.lin = torch.nn.Linear(width, width)",
    "",
    "    def forward(self, x):",
    "        return torch.relu(self.lin(x))",
    "",
    "",
    "def step(model, batch):",
    "    out = model(batch)",
] + [f"    out = out * {i} + torch.sin(out)  # line {17 + i}" for i in range(34)]

TRIE_HTML = """\
<ul class="stack-trie">
<li class="trie-node" id="n1"><span class="trie-toggle"></span><code>train.py:10 in main</code>
<ul id="n1-children">
<li class="trie-node" id="n2"><span class="trie-toggle"></span><code>model.py:20 in forward</code>
<ul id="n2-children">
<li class="trie-node" id="n3"><span class="trie-toggle"></span><code>layers.py:30 in block</code>
<ul id="n3-children">
<li class="trie-node" id="n4"><span class="trie-toggle"></span><code>ops.py:40 in op</code></li>
</ul>
</li>
</ul>
</li>
</ul>
</li>
</ul>
"""


def _write_docs(docs: Path) -> None:
    """Four pages: index, a long page with a code block, a stack trie, a searchable word."""
    docs.mkdir(parents=True)
    (docs / "index.md").write_text(
        textwrap.dedent(
            """\
            # Trace report

            | compile id | status |
            |---|---|
            | [0/0](code.md) | <span class="status-ok">ok</span> |
            | [1/0](trie.md) | <span class="status-break">graph break</span> |
            | [2/0](notes.md) | <span class="status-error">error</span> |

            !!! note "About"
                A hand-written site for the offline theme test.
            """
        ),
        encoding="utf-8",
    )
    filler = "\n\n".join(
        f"Paragraph {i} before the code, to push it below the fold." for i in range(40)
    )
    code = "\n".join(CODE_LINES)
    (docs / "code.md").write_text(
        f"# Generated code\n\n{filler}\n\n```python\n{code}\n```\n", encoding="utf-8"
    )
    (docs / "trie.md").write_text(f"# Stack trie\n\n{TRIE_HTML}\n", encoding="utf-8")
    (docs / "notes.md").write_text(
        f"# Notes\n\nThe frame restarted because of a {SEARCH_WORD} in the user code.\n",
        encoding="utf-8",
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site directory (built once for all tests in this module)."""
    root = tmp_path_factory.mktemp("offline-site")
    _write_docs(root / "docs")
    config = site_config(
        docs_dir=str(root / "docs"), site_dir=str(root / "site"), site_name="tlsite test"
    )
    build_site(config, config_dir=str(root))
    return root / "site"


def _assert_clean(report) -> None:  # type: ignore[no-untyped-def]
    assert report.outside_requests == []
    assert report.console_errors == []
    assert report.dialogs == []


def test_site_has_no_remote_assets(site: Path) -> None:
    assert (site / "search" / "search_index.js").is_file()
    assert (site / "assets" / "tlsite" / "iframe-worker-shim.js").is_file()
    pages = sorted(site.rglob("*.html"))
    assert {p.name for p in pages} >= {"index.html", "code.html", "trie.html", "notes.html"}
    tag_url = re.compile(r"<(?:script|link)\b[^>]*?\b(?:src|href)\s*=\s*[\"']?([^\"'\s>]+)", re.I)
    for page in pages:
        html = page.read_text(encoding="utf-8")
        remote = [u for u in tag_url.findall(html) if re.match(r"(?i)(https?:)?//", u)]
        assert remote == [], f"{page.name} loads remote assets: {remote}"
        assert "unpkg.com" not in html
        assert "fonts.googleapis" not in html


def test_search_works_offline(site: Path, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(site / "index.html")
    search = page.locator(".md-search__input")
    search.click()
    search.press_sequentially(SEARCH_WORD)  # Material reacts to key events, not to fill()
    hit = page.locator(".md-search-result__item a[href*='notes.html']").first
    hit.wait_for(state="visible", timeout=15_000)
    # the search worker really runs through tlsite's shim, in a hidden iframe
    assert page.evaluate("document.querySelectorAll('body > iframe[hidden]').length") == 1
    hit.click()
    page.wait_for_url(lambda url: urlparse(url).path.endswith("/notes.html"))
    assert SEARCH_WORD in page.locator("article").inner_text()
    _assert_clean(report)


def test_stack_trie_toggles(site: Path, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(site / "trie.html")
    # depths 1 and 2 are shown, deeper levels start collapsed
    assert page.locator("#n1-children").is_visible()
    assert page.locator("#n2 > .trie-toggle").get_attribute("aria-expanded") == "false"
    assert not page.locator("#n2-children").is_visible()
    page.locator("#n2 > .trie-toggle").click()
    assert page.locator("#n2-children").is_visible()
    assert page.locator("#n2 > .trie-toggle").get_attribute("aria-expanded") == "true"
    # keyboard works too, and collapsing hides the subtree again
    page.locator("#n2 > .trie-toggle").press("Enter")
    assert not page.locator("#n2-children").is_visible()
    assert page.locator("#n4").get_attribute("class") == "trie-node trie-leaf"
    _assert_clean(report)


def test_code_line_anchor(site: Path, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(site / "code.html", fragment="__codelineno-0-20")
    anchor = page.locator("[id='__codelineno-0-20']")
    assert anchor.count() == 1
    assert page.evaluate("window.scrollY") > 0  # the browser had to scroll to reach it
    top = page.evaluate("document.getElementById('__codelineno-0-20').getBoundingClientRect().top")
    assert 0 <= top < page.viewport_size["height"]
    line = page.locator("[id='__span-0-20']").inner_text()
    assert line.strip() == CODE_LINES[19].strip()
    _assert_clean(report)


def test_palette_toggle(site: Path, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(site / "index.html")
    scheme = "document.body.getAttribute('data-md-color-scheme')"
    assert page.evaluate(scheme) == "default"
    toggle = page.locator("form[data-md-component='palette'] label:visible").first
    toggle.click()
    page.wait_for_function(f"{scheme} === 'slate'")
    _assert_clean(report)


def test_search_from_subdirectory_with_import_scripts(
    tmp_path: Path,
    open_site,  # type: ignore[no-untyped-def]
) -> None:
    """A second search language makes Material's worker call importScripts (lunr.de etc.)."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "index.md").write_text(f"# Home\n\nA {SEARCH_WORD} lives here.\n", encoding="utf-8")
    (docs / "sub" / "page.md").write_text("# Nested page\n\nNothing to find.\n", encoding="utf-8")
    config = site_config(docs_dir=str(docs), site_dir=str(tmp_path / "site"), site_name="de")
    config["plugins"] = [{"search": {"lang": ["en", "de"]}}, "offline"]
    build_site(config, config_dir=str(tmp_path))

    page, report = open_site(tmp_path / "site" / "sub" / "page.html")
    search = page.locator(".md-search__input")
    search.click()
    search.press_sequentially(SEARCH_WORD)
    hit = page.locator(".md-search-result__item a[href*='index.html']").first
    hit.wait_for(state="visible", timeout=15_000)
    loaded = page.evaluate(
        "[...document.querySelector('body > iframe').contentDocument.scripts].map(s => s.src)"
    )
    assert any(src.endswith("/assets/javascripts/lunr/min/lunr.de.min.js") for src in loaded)
    _assert_clean(report)


WORKER_JS = """\
var seen = [];
self.onmessage = function (e) { seen.push(e.data.cmd); };
self.addEventListener("message", function (e) {
  var msg = e.data;
  if (msg.cmd === "echo") {
    var ownRealm = msg.payload.list instanceof Array;
    postMessage({echo: msg.payload, seen: seen.slice(), ownRealm: ownRealm});
  } else if (msg.cmd === "import") {
    importScripts("lib/helper.js").then(function () { postMessage({helper: self.helperValue}); });
  } else if (msg.cmd === "throw") {
    throw new Error("boom from worker");
  }
});
postMessage({ready: true});
"""

HARNESS_HTML = """\
<!doctype html>
<html><head><meta charset="utf-8">
<script src="assets/iframe-worker-shim.js"></script>
</head><body>
<script>
  window.got = [];
  window.onmessageCalls = 0;
  window.errors = [];
  window.w = new Worker("worker/worker.js");
  w.addEventListener("message", function (e) { got.push(e.data); });
  w.onmessage = function () { onmessageCalls++; };
  w.onerror = function (e) { errors.push(e.message); };
  // posted before the worker script has even loaded: must be queued, not lost
  w.postMessage({cmd: "echo", payload: {list: [1, 2, 3], text: "hi"}});
</script>
</body></html>
"""


def test_worker_shim_bridges_messages(tmp_path: Path, open_site) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "assets").mkdir()
    shim = (THEME_DIR / "assets" / "tlsite" / "iframe-worker-shim.js").read_text(encoding="utf-8")
    (tmp_path / "assets" / "iframe-worker-shim.js").write_text(shim, encoding="utf-8")
    (tmp_path / "worker" / "lib").mkdir(parents=True)
    (tmp_path / "worker" / "worker.js").write_text(WORKER_JS, encoding="utf-8")
    (tmp_path / "worker" / "lib" / "helper.js").write_text("self.helperValue = 42;\n")
    (tmp_path / "index.html").write_text(HARNESS_HTML, encoding="utf-8")

    page, report = open_site(tmp_path / "index.html")
    page.wait_for_function("got.length >= 2")
    ready, echo = page.evaluate("got")
    assert ready == {"ready": True}
    assert echo["echo"] == {"list": [1, 2, 3], "text": "hi"}
    assert echo["seen"] == ["echo"]  # self.onmessage saw it as well as the listener
    assert echo["ownRealm"] is True  # the worker received a clone made in its own realm
    assert page.evaluate("onmessageCalls") == 2

    page.evaluate("w.postMessage({cmd: 'import'})")
    page.wait_for_function("got.length >= 3")
    assert page.evaluate("got[2]") == {"helper": 42}

    page.evaluate("w.postMessage({cmd: 'throw'})")
    # an uncaught worker exception reaches w.onerror; Chromium mutes the details of errors
    # from file:// scripts ("Script error."), so only its arrival is checked
    page.wait_for_function("errors.length >= 1")

    page.evaluate("w.terminate(); w.postMessage({cmd: 'echo', payload: {list: []}})")
    page.wait_for_timeout(300)
    assert page.evaluate("got.length") == 3
    assert page.evaluate("document.querySelectorAll('iframe').length") == 0

    assert report.outside_requests == []
    assert report.dialogs == []
    # the deliberate throw is logged by the browser like any uncaught worker error
    assert len(report.console_errors) == 1, report.console_errors
    assert "boom from worker" in report.console_errors[0]

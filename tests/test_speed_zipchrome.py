"""A compile page's chrome without what it repeated for nothing: the same page to the user.

Material wrote the SVG paths of its header icons and its templates' indentation into every
page: about a tenth of a storm's zip. The icons are now tlsite's empty ``<svg>`` elements that
``assets/tlsite/icons.css`` paints with Material's icon files as CSS masks, and the page stamp
collapses the whitespace of a shape's chrome once (``mkdocs_plugin/stamp.py``). These tests
check the bytes are gone and that the header still shows its icons and works when clicked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES

from tlsite.mkdocs_plugin.site_config import CHROME_ICONS, ICON_CSS, TOGGLE_ICONS
from tlsite.mkdocs_plugin.stamp import collapse_whitespace

TRACE = FIXTURE_TRACES / "torch-2.4" / "recompiles.log"
COMPILE_PAGE = "-_0_1_0/index.html"
#: Runs of whitespace a browser shows as one: in text, outside tags, scripts and code.
_INDENT = re.compile(r">[^<]*?[ \t\n]{2,}[^<]*?<")


def _chrome(page: str) -> str:
    """The page without its article (the content the renderer wrote)."""
    return page[: page.index("<article")] + page[page.index("</article>") :]


def test_collapsing_whitespace_keeps_what_a_browser_shows() -> None:
    html = (
        '<div class="a  b">\n    <span>x</span>\n\n  y  z\t</div>'
        "<pre><code>  kept\n    as is</code></pre><textarea>  a\n  b</textarea>"
        '<script>var s = "  two  spaces";</script><style>p  {  }</style>'
    )
    assert collapse_whitespace(html) == (
        '<div class="a  b">\n<span>x</span>\ny z </div>'
        "<pre><code>  kept\n    as is</code></pre><textarea>  a\n  b</textarea>"
        '<script>var s = "  two  spaces";</script><style>p  {  }</style>'
    )
    # a '>' inside an attribute's value does not end the tag
    assert collapse_whitespace('<a title="a > b    c">x  y</a>') == '<a title="a > b    c">x y</a>'


def test_compile_page_chrome_carries_no_icon_paths_nor_indentation(
    site_of: Callable[[Path], Path],
) -> None:
    site = site_of(TRACE)
    page = (site / COMPILE_PAGE).read_text(encoding="utf-8")
    chrome = _chrome(page)
    assert "<path" not in chrome
    outside_scripts = re.sub(r"<script\b.*?</script>", "<script></script>", chrome, flags=re.S)
    assert not _INDENT.findall(outside_scripts)
    # every icon the header shows is painted by the site's stylesheet with Material's icon
    css = (site / ICON_CSS).read_text(encoding="utf-8")
    shown = set(
        re.findall(r'<svg viewBox="0 0 24 24" class="tlsite-icon tlsite-icon--([\w-]+)"', page)
    )
    names = {icon.rsplit("/", 1)[1] for icon in (*CHROME_ICONS.values(), *TOGGLE_ICONS)}
    assert shown == names
    for name in names:
        rule = re.search(rf"\.tlsite-icon--{name}\{{([^}}]*)\}}", css)
        assert rule is not None, name
        assert "mask-image:url('data:image/svg+xml;charset=utf-8,<svg " in rule.group(1)
        assert '<path d="M' in rule.group(1)
    assert f'href="../{ICON_CSS}"' in page


@pytest.mark.slow
def test_markdown_tree_paints_the_icons(tmp_path: Path) -> None:
    """``tlsite markdown``'s tree has the icons' stylesheet and tlsite's icon templates, so a
    plain ``mkdocs build`` of it shows the same header."""
    from tlsite.mkdocs_plugin.markdown_export import export_markdown

    export_markdown(str(TRACE), tmp_path / "tree")
    css = (tmp_path / "tree" / "docs" / ICON_CSS).read_text(encoding="utf-8")
    for icon in (*CHROME_ICONS.values(), *TOGGLE_ICONS):
        name = icon.rsplit("/", 1)[1]
        assert f".tlsite-icon--{name}{{" in css
        assert (tmp_path / "tree" / "overrides" / ".icons" / "tlsite" / f"{name}.svg").is_file()


def _painted(page, selector: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether the element shows something: its box holds more than one colour."""
    shot = page.locator(selector).screenshot()
    colours = page.evaluate(
        """async (png) => {
          const image = new Image();
          image.src = 'data:image/png;base64,' + png;
          await image.decode();
          const canvas = document.createElement('canvas');
          [canvas.width, canvas.height] = [image.width, image.height];
          const context = canvas.getContext('2d');
          context.drawImage(image, 0, 0);
          const data = context.getImageData(0, 0, image.width, image.height).data;
          const seen = new Set();
          for (let i = 0; i < data.length; i += 4)
            seen.add(data[i] * 65536 + data[i + 1] * 256 + data[i + 2]);
          return seen.size;
        }""",
        __import__("base64").b64encode(shot).decode(),
    )
    return colours > 1


def test_header_icons_show_and_work(site_of: Callable[[Path], Path], open_site) -> None:  # type: ignore[no-untyped-def]
    site = site_of(TRACE)
    page, report = open_site(site / COMPILE_PAGE)
    page.set_viewport_size({"width": 1280, "height": 800})
    scheme = "document.body.getAttribute('data-md-color-scheme')"
    for selector in (
        ".md-header .md-logo svg",
        "label.md-search__icon svg >> nth=0",
        "form[data-md-component='palette'] label:visible svg",
    ):
        assert _painted(page, selector), selector
    page.locator("form[data-md-component='palette'] label:visible").click()
    page.wait_for_function(f"{scheme} === 'slate'")
    assert _painted(page, "form[data-md-component='palette'] label:visible svg")
    search = page.locator("input.md-search__input")
    search.click()
    search.press_sequentially("recompile")  # Material reacts to key events, not to fill()
    page.wait_for_selector(".md-search-result__item", timeout=15000)
    assert _painted(page, "button.md-search__icon[type=reset] svg")
    # a phone: the drawer's and the search's buttons
    page.keyboard.press("Escape")
    page.set_viewport_size({"width": 390, "height": 800})
    page.locator("label.md-header__button[for='__drawer']").click()
    page.wait_for_function("document.getElementById('__drawer').checked")
    assert page.locator(".md-nav--primary").is_visible()
    assert _painted(page, ".md-nav--primary .md-nav__title .md-logo svg")
    assert not report.outside_requests and not report.console_errors and not report.dialogs

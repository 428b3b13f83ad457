"""The biggest compile page of a real training trace opens without laying out its folded code.

Material measures every code block it mounts (copy button, scroll overflow); measured inside a
closed ``<details>``, Chromium has to lay out the hidden code, which made a 3.8 MB compile page
take seconds to become interactive. Blocks are now mounted when first seen (Material's
``content.lazy``). These tests check what a user sees: every line of every artifact is on the
page and found by the browser's find, a block gets its copy button once opened, a line link
still opens and marks its line, and nothing logs an error. Timings are in bench/open_bench.py.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.corpus import TORCH_213, TRAINING_TRACE_GLOB

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WORD_JOINER = "\u2060"
COPY = ".md-code__button[data-md-type=copy]"  # Material's copy button

# Each code block of the page: its id, whether it sits in a closed <details>, whether Material
# mounted it (its copy button), its text, and the raw file the heading's paragraph links to.
BLOCKS = """(copy) => [...document.querySelectorAll("[data-block]")].map(block => {
  const id = block.dataset.block, heading = document.getElementById(id);
  const link = heading && heading.nextElementSibling &&
               heading.nextElementSibling.querySelector("a[href]");
  return {id, folded: !!block.closest("details:not([open])"),
          mounted: !!block.querySelector(copy),
          text: block.querySelector("code").textContent,
          raw: link ? link.getAttribute("href") : null};
})"""


@pytest.fixture(scope="module")
def big_page(site_of) -> Path:  # type: ignore[no-untyped-def]
    """The largest compile page of the torch 2.13 training trace's site."""
    traces = sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))
    if not traces:
        pytest.skip(f"corpus trace missing: {TORCH_213 / TRAINING_TRACE_GLOB}")
    site = site_of(traces[0])
    pages = [p for p in site.glob("*/index.html") if p.parent.name.startswith("-_")]
    return max(pages, key=lambda p: p.stat().st_size)


def test_folded_code_is_all_there_and_found_by_find(big_page, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(big_page)
    blocks = page.evaluate(BLOCKS, COPY)
    assert len(blocks) >= 10 and all(b["folded"] for b in blocks)
    assert sum(len(b["text"]) for b in blocks) > 2_000_000  # the page's weight is its code
    compared = 0
    for block in blocks:
        raw = block["raw"]
        if not raw or not raw.endswith(".txt"):
            continue  # JSON artifacts are shown pretty-printed
        logged = (big_page.parent / unquote(raw)).resolve().read_text(encoding="utf-8")
        shown = block["text"].replace(WORD_JOINER, "")
        assert shown.rstrip("\n") == logged.rstrip("\n"), block["id"]
        compared += 1
    assert compared >= 10
    # the browser's find reaches the last line of the last (folded) block
    last_line = page.evaluate(
        """() => [...document.querySelectorAll("[data-block] code")].pop()
                 .lastElementChild.textContent.trim()"""
    )
    assert last_line and page.evaluate("(s) => window.find(s)", last_line)
    assert report.console_errors == [] and report.outside_requests == []


def test_folded_code_is_mounted_when_opened(big_page, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(big_page)
    page.wait_for_timeout(300)  # Material mounts components right after load
    blocks = page.evaluate(BLOCKS, COPY)
    # nothing folded was measured at load ...
    assert [b["id"] for b in blocks if b["mounted"]] == []
    # ... and a block opened by the user gets its copy button, which copies the code
    largest = max(blocks, key=lambda b: len(b["text"]))
    block = page.locator(f'[data-block="{largest["id"]}"]')
    page.locator("details", has=block).locator(":scope > summary").click()
    button = block.locator(COPY)
    button.wait_for(state="visible")
    target = button.get_attribute("data-clipboard-target")
    copied = page.evaluate("(sel) => document.querySelector(sel).innerText", target)
    assert (
        copied.replace(WORD_JOINER, "").strip() == largest["text"].replace(WORD_JOINER, "").strip()
    )
    assert report.console_errors == []


def test_line_link_opens_its_folded_block(big_page, open_site) -> None:  # type: ignore[no-untyped-def]
    page, report = open_site(big_page)
    largest = max(page.evaluate(BLOCKS, COPY), key=lambda b: len(b["text"]))
    page2, report2 = open_site(big_page, fragment=f"{largest['id']}-L40")
    line = page2.locator(f"#{largest['id']}-L40")
    assert line.evaluate("(el) => el.classList.contains('tlsite-target')")
    expected = largest["text"].split("\n")[39]
    assert line.inner_text().rstrip("\n") == expected
    page2.locator(f'[data-block="{largest["id"]}"] {COPY}').wait_for(state="attached")
    box = line.bounding_box()
    viewport = page2.viewport_size
    assert box and viewport and 0 <= box["y"] <= viewport["height"]
    assert report.console_errors == [] and report2.console_errors == []

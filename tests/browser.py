"""Headless-Chromium harness for checking a built report the way a user opens it: from disk.

Every request that is not ``file:`` is aborted and recorded, so a test fails if the site tries
to reach the network (a CDN script, a web font, a tracker) instead of quietly passing on a
machine that happens to be online. Console errors, uncaught page errors and JavaScript dialogs
(``alert``/``confirm``/``prompt``, the usual proof of an XSS) are recorded as well.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Schemes that never leave the machine; anything else counts as an outside request.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


def browser_unavailable_reason() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if importlib.util.find_spec("playwright") is None:
        return "python package 'playwright' is not installed"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium executable at {CHROMIUM}"
    return None


def launch_browser(playwright: Playwright) -> Browser:
    """Start the system Chromium (playwright's own browser downloads are not available)."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS)
    )


@dataclass
class SiteReport:
    """What a page did besides rendering; tests usually assert all lists are empty."""

    outside_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)  # "<type>: <message>", each dismissed


def _is_local(url: str) -> bool:
    return url.startswith(LOCAL_SCHEMES)


class SiteOpener:
    """Opens site pages in fresh browser contexts and records their side effects.

    Each call gets its own context, so storage (e.g. the palette choice) does not leak between
    tests; ``close()`` disposes of all of them.
    """

    def __init__(self, browser: Browser) -> None:
        self._browser = browser
        self._contexts: list[BrowserContext] = []

    def __call__(
        self,
        page_path: str | Path,
        *,
        fragment: str = "",
        wait_until: str = "load",
        init_script: str = "",
    ) -> tuple[Page, SiteReport]:
        """Open ``page_path`` (a file path or ``file:`` URL), optionally at ``#fragment``;
        ``init_script`` runs before the page's own scripts (to stand in for a slow machine)."""
        url = str(page_path)
        if not url.startswith("file:"):
            url = Path(page_path).resolve().as_uri()
        if fragment:
            url = f"{url}#{fragment.lstrip('#')}"

        report = SiteReport()
        context = self._browser.new_context(service_workers="block")
        self._contexts.append(context)

        def record(url: str) -> None:
            # the router and the request event both see most requests: count each URL once
            if url not in report.outside_requests:
                report.outside_requests.append(url)

        def route(route, request) -> None:  # type: ignore[no-untyped-def]
            if _is_local(request.url):
                route.continue_()
            else:
                record(request.url)
                route.abort()

        context.route(lambda _url: True, route)
        context.on("request", lambda r: None if _is_local(r.url) else record(r.url))

        page = context.new_page()
        page.on("websocket", lambda ws: record(ws.url))
        page.on(
            "console",
            lambda m: report.console_errors.append(m.text) if m.type == "error" else None,
        )
        page.on("pageerror", lambda exc: report.console_errors.append(f"pageerror: {exc}"))

        def on_dialog(dialog) -> None:  # type: ignore[no-untyped-def]
            report.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        if init_script:
            page.add_init_script(init_script)
        page.goto(url, wait_until=wait_until)  # type: ignore[arg-type]
        return page, report

    def close(self) -> None:
        """Close every context opened so far."""
        for context in self._contexts:
            context.close()
        self._contexts.clear()


#: True once tlsite.js has given every long table's later pieces the first piece's column
#: widths (none where the first is shown as a list of blocks: a phone). It does so from a
#: ResizeObserver once Material has mounted: on a busy machine later than any fixed wait.
PIECES_ALIGNED = """() => [...document.querySelectorAll(".tlsite-rows")].every(group => {
  const first = group.querySelector("table");
  const head = first.tHead && first.tHead.rows[0];
  const rest = [...group.querySelectorAll(".tlsite-rows-more table")];
  if (!head || getComputedStyle(first).display === "block") {
    return rest.every(table => !table.querySelector("colgroup"));
  }
  const widths = [...head.cells].map(cell => cell.getBoundingClientRect().width);
  return rest.every(table => {
    const cols = [...table.querySelectorAll("col")];
    return cols.length === widths.length &&
      cols.every((col, n) => Math.abs(parseFloat(col.style.width) - widths[n]) < 0.5);
  });
})"""


def wait_for_aligned_pieces(page: Page, *, changed: bool = False) -> None:
    """Wait until tlsite.js has aligned the pieces of every long table (:data:`PIECES_ALIGNED`);
    ``changed``: a size just changed (the window, the first piece), which the browser reports
    to tlsite.js on the next frame."""
    if changed:
        page.wait_for_timeout(100)
    page.wait_for_function(PIECES_ALIGNED)


def resize(page: Page, width: int, height: int = 800) -> None:
    """Give ``page`` a screen of ``width`` x ``height`` and wait until its pieces follow."""
    page.set_viewport_size({"width": width, "height": height})
    wait_for_aligned_pieces(page, changed=True)

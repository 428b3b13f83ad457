"""Shared fixtures: one headless Chromium per test session, and a page opener bound to it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from browser import SiteOpener, browser_unavailable_reason, launch_browser

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """System Chromium via playwright; skipped with the reason if either is missing.

    With TLSITE_REQUIRE_BROWSER=1 or CI set, that skip becomes a failure instead.
    """
    reason = browser_unavailable_reason()
    if reason is not None:
        if os.environ.get("TLSITE_REQUIRE_BROWSER") == "1" or os.environ.get("CI"):
            pytest.fail(f"browser tests required but cannot run: {reason}")
        pytest.skip(f"browser tests cannot run: {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_browser(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def open_site(browser: Browser) -> Iterator[SiteOpener]:
    """``open_site(path, fragment="") -> (page, report)``; closes its pages after the test."""
    opener = SiteOpener(browser)
    try:
        yield opener
    finally:
        opener.close()

"""Shared fixtures: one headless Chromium per test session, and a page opener bound to it."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from browser import SiteOpener, browser_unavailable_reason, launch_browser

if TYPE_CHECKING:
    from playwright.sync_api import Browser

    from tlsite.core import ResolvedInput
    from tlsite.core.render.highlight import CodeBlock


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that drives the browser is slow: the fast tier (``-m "not slow"``) skips it."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_under_pytest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Temporary files of the session (payload stores of traces a test loads and never
    closes, helper processes' scratch) go under pytest's own folder, which pytest prunes
    after a few sessions, rather than piling up in the system's: ~200 a run."""
    folder = str(tmp_path_factory.mktemp("tmp"))
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = os.environ["TMPDIR"] = folder  # TMPDIR: for worker processes too
    try:
        yield
    finally:
        tempfile.tempdir = saved[0]
        if saved[1] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[1]


@pytest.fixture(scope="session")
def site_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """``site_of(trace) -> Path``: the trace's site (no bundle), built once per session."""
    from tlsite.cli import build

    @functools.cache
    def site(trace: Path) -> Path:
        out = tmp_path_factory.mktemp(trace.stem[:40]) / "site"
        build(str(trace), out, make_zip=False)
        return out

    return site


@pytest.fixture(scope="module")
def ddp16_job() -> Iterator[ResolvedInput]:
    """The real 16-rank DDP job (``tests/fixtures/traces/ddp16``), its rank logs resolved
    (unpacked from the archive) once per test module."""
    from corpus import FIXTURE_TRACES

    from tlsite.core import resolve_input

    with resolve_input(str(FIXTURE_TRACES / "ddp16" / "ddp16.7z")) as resolved:
        yield resolved


@pytest.fixture(scope="session")
def job_site_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """``job_site_of(ranks) -> Path``: the site of a multi-rank job (a folder or archive of
    rank logs, built in this process, no bundle), built once per session."""
    from tlsite.core import resolve_input
    from tlsite.mkdocs_plugin.multirank_build import build_multirank

    @functools.cache
    def site(job: Path) -> Path:
        out = tmp_path_factory.mktemp(job.stem[:40]) / "site"
        with resolve_input(str(job)) as resolved:
            build_multirank(resolved, out, jobs=1)
        return out

    return site


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


@pytest.fixture
def code_blocks(tmp_path: Path) -> Callable[[list[bytes]], list[CodeBlock]]:
    """A Python code block per text given, each a slice of one pack file (as the payload
    store keeps them), for a :class:`~tlsite.core.render.highlight.Highlighter`."""
    from tlsite.core.render.highlight import CodeBlock

    def make(texts: list[bytes]) -> list[CodeBlock]:
        pack = tmp_path / "pack"
        pack.write_bytes(b"".join(texts))
        blocks, offset = [], 0
        for n, text in enumerate(texts):
            blocks.append(CodeBlock(str(pack), offset, len(text), f"md5-{n}", "python"))
            offset += len(text)
        return blocks

    return make

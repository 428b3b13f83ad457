"""Fixes from the session-five review of the speed work (#19)."""

from __future__ import annotations

from mkdocs import utils

from tlsite.mkdocs_plugin import site_config


def test_builds_that_overlap_leave_mkdocs_its_own_theme_list() -> None:
    """Two builds in threads whose theme-list swaps interleave (one ends while the other
    runs) leave MkDocs' own ``get_themes`` in place when both are done."""
    mkdocs_own = utils.get_themes
    first, second = site_config._themes_listed_once(), site_config._themes_listed_once()
    first.__enter__()
    second.__enter__()
    assert utils.get_themes is not mkdocs_own
    first.__exit__(None, None, None)
    assert utils.get_themes is not mkdocs_own  # the second build still lists them once
    second.__exit__(None, None, None)
    assert utils.get_themes is mkdocs_own

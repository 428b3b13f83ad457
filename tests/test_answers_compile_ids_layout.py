"""All compile ids on a desktop screen: every artifact's name is on the page.

A resume function's bytecode artifacts have names of fifty characters and more
(``torch_dynamo_resume_in_f0_at_3_ORIGINAL_BYTECODE``). Unbroken, they made the Artifacts
column wider than the page, and Material's table box cut them off at its edge: the name a
user came to click showed half, with no sign that the table scrolls sideways.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from corpus import FIXTURE_TRACES

if TYPE_CHECKING:
    from collections.abc import Callable

    from browser import SiteOpener

GRAPH_BREAK_STORM = FIXTURE_TRACES / "gbstorm" / "gbstorm.log"


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 1000])
def test_every_artifact_name_fits_the_page(
    site_of: Callable[[Path], Path], open_site: SiteOpener, width: int
) -> None:
    page, _ = open_site(site_of(GRAPH_BREAK_STORM) / "compile_ids.html")
    page.set_viewport_size({"width": width, "height": 900})
    names, cut = page.evaluate(
        """() => {
          const right = document.querySelector("article").getBoundingClientRect().right;
          const links = [...document.querySelectorAll(".tlsite-artifact-list a")];
          return [links.map(a => a.textContent),
                  links.filter(a => a.getBoundingClientRect().right > right + 0.5)
                       .map(a => a.textContent)];
        }"""
    )
    assert any(name.endswith("_ORIGINAL_BYTECODE") for name in names)
    assert cut == []
    sideways = page.evaluate(
        """() => [...document.querySelectorAll(".tlsite-compile-ids .md-typeset__scrollwrap")]
            .map(box => box.scrollWidth - box.clientWidth)"""
    )
    assert sideways and all(extra <= 0 for extra in sideways)

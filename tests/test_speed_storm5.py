"""Per-compile-id costs of a recompile storm's build (issue #19).

A storm's search index: each entry encoded once, and the site and zip as the base
revision's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, PROJECT_ROOT
from revisions import assert_built_as_by_base, needs_base_rev

_SEARCH_CONFIG = {"lang": ["en"], "separator": r"[\s\-]+", "pipeline": [], "fields": {}}


def test_each_search_entry_is_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A storm's index has some fifteen entries per compile page: each was encoded twice (its
    JSON, then again without its location to find the sections many pages share)."""
    from tlsite.mkdocs_plugin import search_index

    html = (
        '<h1 id="page">[0/3] f</h1><p>text</p>'
        '<h2 id="summary">Summary</h2><table><tr><td>1.5 s</td></tr></table>'
        '<h2 id="config">Config</h2><p>Same as the <code>baseline</code> 3.</p>'
    )

    class _Page:
        url = "-_0_3_0/index.html"
        title = "[0/3] f"
        content = html

        def __init__(self) -> None:
            self.meta: dict[str, object] = {}

    encoded: list[object] = []
    dumps = json.dumps

    def counted(value: object, **options: object) -> str:
        if isinstance(value, dict):
            encoded.append(value)
        return dumps(value, **options)  # type: ignore[arg-type]

    index = search_index.ReportSearchIndex(**_SEARCH_CONFIG)
    monkeypatch.setattr(search_index.json, "dumps", counted)
    index.add_entry_from_context(_Page())
    monkeypatch.undo()
    assert len(index.docs) == 3
    assert len(encoded) == len(index.docs)
    # the key that finds sections shared across pages: the anchor and the entry without its
    # location, digits masked
    assert [key for _url, key, _text in index.docs] == [
        None,
        'summary"title":"Summary","text":"0.0 s"}',
        'config"title":"Config","text":"<p>Same as the <code>baseline</code> 0.</p>"}',
    ]


def _storm(folder: Path) -> Path:
    """One frame recompiled 40 times (``bench/make_trace.py``, from the recompiles fixture)."""
    log = folder / "storm.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py"), "--storm", "40"]
    subprocess.run([*make, "-o", str(log)], check=True, capture_output=True)
    return log


@needs_base_rev
@pytest.mark.slow
@pytest.mark.parametrize("name", ["storm-40", "torch-2.15/dynamic_shapes.log"])
def test_a_storms_site_and_zip_are_the_base_revisions(name: str, tmp_path: Path) -> None:
    """What a user gets of a storm is what the revision before these changes built, byte for
    byte (``TLSITE_BASE_REV``): the search index with its shared sections, every page, every
    zip entry."""
    trace = _storm(tmp_path) if name == "storm-40" else FIXTURE_TRACES / name
    assert_built_as_by_base(trace, tmp_path)

"""Per-compile-id costs of a recompile storm's build (issue #19).

A storm's compile pages each park their code and HTML blocks in the payload store as JSON
(:func:`~tlsite.core.render.page.dump_blocks`) until the page is written. The rows must be
what the blocks' fields are, in order, without copying each value on the way (the
``dataclasses.astuple`` it used deep-copied every field of every block of every page).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, PROJECT_ROOT
from revisions import assert_built_as_by_base, needs_base_rev

from tlsite.core.render.highlight import CodeBlock
from tlsite.core.render.page import CodePart, HtmlBlock, PagePart, dump_blocks, load_blocks

_SEARCH_CONFIG = {"lang": ["en"], "separator": r"[\s\-]+", "pipeline": [], "fields": {}}


def _blocks() -> dict[str, object]:
    return {
        "artifact-1": CodeBlock("/store/pack", 10, 20, "d41d8cd9", "python", 400),
        "metrics-0": HtmlBlock("/store/pack", 30, 40),
        "summary": PagePart("<table><tr><td>é &amp; ü</td></tr></table>"),
        "recompile-reason": CodePart("0/0: mode == 'relu'", "text", "tlsite-wrap"),
    }


def test_blocks_round_trip_as_their_fields_in_order() -> None:
    blocks = _blocks()
    text = dump_blocks(blocks)  # type: ignore[arg-type]
    assert json.loads(text) == [
        ["artifact-1", "code", "/store/pack", 10, 20, "d41d8cd9", "python", 400],
        ["metrics-0", "html", "/store/pack", 30, 40],
        ["summary", "part", "<table><tr><td>é &amp; ü</td></tr></table>"],
        ["recompile-reason", "code-part", "0/0: mode == 'relu'", "text", "tlsite-wrap"],
    ]
    assert "é" in text  # not escaped: the store keeps UTF-8
    assert load_blocks(text) == blocks


def test_blocks_are_dumped_without_copying_their_values(monkeypatch: pytest.MonkeyPatch) -> None:
    copies = 0
    deepcopy = copy.deepcopy

    def counted(value: object, memo: object = None) -> object:
        nonlocal copies
        copies += 1
        return deepcopy(value, memo)  # type: ignore[arg-type]

    monkeypatch.setattr(copy, "deepcopy", counted)
    dump_blocks(_blocks())  # type: ignore[arg-type]
    assert copies == 0


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

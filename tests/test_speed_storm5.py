"""Per-compile-id costs of a recompile storm's build (issue #19).

A storm's compile pages each park their code and HTML blocks in the payload store as JSON
(:func:`~tlsite.core.render.page.dump_blocks`) until the page is written. The rows must be
what the blocks' fields are, in order, without copying each value on the way (the
``dataclasses.astuple`` it used deep-copied every field of every block of every page).
"""

from __future__ import annotations

import copy
import json

import pytest

from tlsite.core.render.highlight import CodeBlock
from tlsite.core.render.page import CodePart, HtmlBlock, PagePart, dump_blocks, load_blocks


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

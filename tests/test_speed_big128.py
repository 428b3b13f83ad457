"""A big trace's build: the per-artifact scans of its code give what they gave before, and the
copies of the input that cannot fit in the zip are left out without being compressed.

The graph-size and search-term scans run on every code block of every compile page (tens of
megabytes on a 128 MB trace). Their line patterns now start with a newline (a literal the
regex engine finds at memchr speed) instead of ``^``, and node names lose their ``_<n>``
suffix in one call; the reference implementations below are the earlier ones, compared on
every artifact of every real trace of the corpus and the fixtures.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from corpus import CORPUS, FIXTURE_TRACES
from site_copies import deflated_now

import tlsite.core.bundle as bundle
from tlsite.cli import build
from tlsite.core import load
from tlsite.core.analysis import graph_size
from tlsite.core.render import code_terms

# -- the reference implementations (the base's patterns) -------------------------------------
_FORWARD = re.compile(r"^[ \t]*def forward\(\s*self,?(.*?)\)(?: -> [^\n]*)?:[ \t]*$", re.M | re.S)
_NODE = re.compile(
    r'^[ \t]+([A-Za-z_]\w*)(?:: "[^"\n]*")? (?:[-+*/%@&|^]|//|\*\*|<<|>>)?= ([A-Za-z_]\w*)?(.?)',
    re.M,
)
_RETURN = re.compile(r"^[ \t]+return\b", re.M)
_FLATTEN = re.compile(r"^[ \t]+(\w+(?:, *\w+)*),? = fx_pytree\.tree_flatten_spec\(", re.M)


def _reference_node_count(text: str) -> int | None:
    signatures = list(_FORWARD.finditer(text))
    if not signatures:
        return None
    placeholders: set[str] = set()
    count = 0
    for match in signatures:
        args = graph_size._COMMENT.sub("", graph_size._STRING.sub('""', match.group(1)))
        names = [m.group(1) for part in args.split(",") if (m := graph_size._NAME.match(part))]
        placeholders.update(names)
        count += len(names)
    flattened = []
    if "tree_flatten_spec(" in text:
        flattened = [m.group(1).replace(" ", "").split(",") for m in _FLATTEN.finditer(text)]
    if flattened:
        placeholders = {name for names in flattened for name in names}
        count = len(placeholders)
    for match in _NODE.finditer(text):
        value, after = match.group(2), match.group(3)
        if value in placeholders and after in ("", "\n", ";"):
            continue
        count += 1
    return count + len(_RETURN.findall(text))


def _reference_usable(terms: set[str]) -> list[str]:
    return sorted(
        {
            t
            for t in terms
            if t and len(t) <= code_terms.MAX_TERM_LENGTH and not any(c.isspace() for c in t)
        },
        key=lambda t: (len(t), t),
    )


def _reference_code_terms(name: str, text: str) -> list[str]:
    """The base's ``code_terms``."""
    ct = code_terms
    terms: set[str] = set()
    nodes: set[str] = set()
    if "guard" in name:
        terms.update(ct._GUARD_KIND.findall(text))
        terms.update(ct._GUARD_CALL.findall(text))
        if "check_tensor(" in text:
            terms.add("check_tensor")
        for pattern in ct._GUARDED:
            for chain in pattern.findall(text):
                terms.add(chain)
                terms.add(chain[: chain.index("']") + 2])
    else:
        terms.update(ct._NAMESPACED_OP.findall(text))
        if "inductor_output_code" in name or "async_compile" in text:
            terms.update(ct.kernel_names(text))
            terms.update(ct._EXTERN.findall(text))
            terms.update(ct._ATEN_OP.findall(text))
            terms.update(ct._PRIMS_OP.findall(text))
        elif "def forward" in text:
            terms.update(ct._TORCH_CALL.findall(text))
            nodes.update(re.sub(r"_\d+$", "", node) for node in ct._NODE.findall(text))
    kept = _reference_usable(terms)[: ct.MAX_TERMS]
    kept += _reference_usable(nodes - terms)[: ct.MAX_TERMS - len(kept)]
    return sorted(kept)


def _logged_texts() -> Iterator[tuple[str, str, str]]:
    """(trace, artifact name, payload text) of every artifact of every real trace."""
    logs = sorted(
        path
        for root in (CORPUS, FIXTURE_TRACES)
        for path in root.rglob("*.log")
        if path.stat().st_size < 20_000_000
    )
    if not logs:
        pytest.skip("no real traces")
    for log in logs:
        try:
            trace = load(str(log))
        except Exception:  # a fixture of a damaged input: nothing to compare
            continue
        for unit in trace.units.values():
            for artifact in unit.artifacts:
                if artifact.payload is not None:
                    yield log.name, artifact.name, trace.read_payload(artifact.payload)


@pytest.mark.slow
def test_graph_sizes_and_search_terms_are_those_of_the_line_start_patterns() -> None:
    graphs = 0
    for log, name, text in _logged_texts():
        # the text as logged, with CRLF line ends, cut mid-line, and with a line before it
        for variant in (text, text.replace("\n", "\r\n"), text[5:], "  x = y\n" + text):
            expected = _reference_node_count(variant)
            assert graph_size.fx_node_count(variant) == expected, (log, name)
            graphs += expected is not None
        assert code_terms.code_terms(name, text) == _reference_code_terms(name, text), (log, name)
    assert graphs > 1000  # the comparison saw graphs, not only other artifacts


def test_usable_terms_treat_every_unicode_space_as_str_isspace_does() -> None:
    spaces = "".join(c for c in map(chr, range(0x3100)) if c.isspace())
    terms = {f"a{c}b" for c in spaces} | {"aten.mm", "x" * 200, "", "L['x']"}
    assert code_terms._usable(terms) == _reference_usable(terms) == ["L['x']", "aten.mm"]


@pytest.mark.slow
def test_input_copies_that_cannot_fit_are_left_out_without_being_compressed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a limit the log cannot fit, ``raw.log`` is judged from its size and a sample,
    never deflated whole to find out, and the zip holds every other file (what the base's
    zip held: tests/test_speed_bundle.py)."""
    log = FIXTURE_TRACES / "torch-2.6" / "graph_breaks.log"
    # one deflate level (the limit below is measured at it)
    monkeypatch.setattr(bundle, "FAST_LEVEL", bundle.SMALL_LEVEL)
    whole = build(str(log), tmp_path / "whole").bundle
    assert whole is not None
    with zipfile.ZipFile(whole) as archive:
        sizes = {info.filename.split("/", 1)[1]: info.compress_size for info in archive.infolist()}
    limit = whole.stat().st_size - sizes["raw.log"] // 2  # the rest fits, raw.log does not
    monkeypatch.setattr(bundle, "GITHUB_ATTACHMENT_LIMIT", limit)
    with deflated_now() as deflated:
        small = build(str(log), tmp_path / "small").bundle
    assert small is not None and small.stat().st_size <= limit
    with zipfile.ZipFile(small) as archive:
        names = [info.filename.split("/", 1)[1] for info in archive.infolist()]
    assert "raw.log" not in deflated
    assert sorted(names) == sorted(set(sizes) - {"raw.log"})
    left_out = bundle.left_out_of_zip(tmp_path / "small")
    assert left_out == {"raw.log": bundle._LEFT_OUT_WHY["raw.log"]}

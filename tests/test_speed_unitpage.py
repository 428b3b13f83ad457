"""Compile pages cost less per compile id and stay the same bytes (issue #19).

A recompile storm renders one compile page per compile id, and its compile ids repeat the
same metrics fields and log JSON artifacts whose pretty-printed text (tlparse's) is wanted three
times: while the trace is read (to highlight it), for the tlparse file and for the page. What
depends only on those is now worked out once. Each page must be what the revision before
these changes rendered (``BASE``, a snapshot made with ``git archive``) on real traces of
several torch versions, a storm and hostile names; and the work done once must be done once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, PROJECT_ROOT, TORCH_213, TRAINING_TRACE_GLOB
from revisions import BASE_REV, snapshot
from test_hostile_trace import hostile_trace

from tlsite.cli import build
from tlsite.core import load
from tlsite.core.model import BODY_JSON
from tlsite.core.render import code_terms, compat, pages
from tlsite.core.render.pages import render_tree

#: The revision whose pages are the reference: the one these changes started from, unless
#: ``TLSITE_BASE_REV`` names another (move it on when compile pages change on purpose).
BASE = BASE_REV or "ad5750e"  # session thirteen: tlsite.css (long artifact names)
STORM_IDS = 30

#: Renders every page of each trace given and writes, per trace, each page's path, title,
#: whole Markdown (code and HTML blocks put back in) and search terms, as JSON.
DUMP = """
import json, sys
from tlsite.core import load
from tlsite.core.render.pages import render_tree
result = {}
for trace in sys.argv[2:]:
    loaded = load(trace)  # kept: the pages' blocks are in its store
    tree = render_tree(loaded)
    result[trace] = [
        [p.path, p.title, p.standalone_markdown(), [repr(c) for c in p.code]]
        for p in tree.pages
    ]
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump(result, out)
"""


def _storm(folder: Path, ids: int = STORM_IDS) -> Path:
    """One frame recompiled ``ids`` times (``bench/make_trace.py``, from the recompiles
    fixture)."""
    log = folder / "storm.log"
    make = [sys.executable, str(PROJECT_ROOT / "bench" / "make_trace.py"), "--storm", str(ids)]
    subprocess.run([*make, "-o", str(log)], check=True, capture_output=True, timeout=120)
    return log


def _traces(folder: Path) -> list[Path]:
    hostile = folder / "hostile.log"
    hostile.write_text(hostile_trace(), encoding="utf-8")
    return [
        _storm(folder),
        FIXTURE_TRACES / "zipstorm" / "zipstorm.log",  # a real torch 2.15 storm, cut
        *sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))[:1],
        *(
            log
            for version in ("2.4", "2.6", "2.10", "2.15")
            for log in sorted((FIXTURE_TRACES / f"torch-{version}").glob("*.log"))
        ),
        FIXTURE_TRACES / "compile_error" / "compile_error.log",
        FIXTURE_TRACES / "cache_hits" / "cache_hits.log",
        FIXTURE_TRACES / "min_cut" / "min_cut.log",
        FIXTURE_TRACES / "killed" / "killed.log",
        hostile,
    ]


def _dump(root: Path, traces: list[Path], out: Path) -> dict[str, list]:
    """Every page of each trace as the tlsite at ``root`` (a PYTHONPATH) renders it."""
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-c", DUMP, str(out), *map(str, traces)]
    subprocess.run(command, check=True, env=env, timeout=600)
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_every_page_is_what_the_base_revision_rendered(tmp_path: Path) -> None:
    traces = _traces(tmp_path)
    base = _dump(snapshot(BASE, tmp_path / "base"), traces, tmp_path / "base.json")
    ours = _dump(PROJECT_ROOT.parent, traces, tmp_path / "ours.json")
    for trace in map(str, traces):
        compile_pages = [p for p in ours[trace] if p[0].startswith("-_")]
        assert compile_pages, trace
        assert [p[0] for p in ours[trace]] == [p[0] for p in base[trace]], trace
        for page, reference in zip(ours[trace], base[trace], strict=True):
            assert page == reference, f"{trace}: {page[0]}"


def test_a_storm_finds_the_search_terms_of_its_metrics_fields_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, ...]] = []

    def counted(keys):  # type: ignore[no-untyped-def]
        keys = tuple(keys)
        calls.append(keys)
        return code_terms.metric_terms(keys)

    monkeypatch.setattr(pages, "metric_terms", counted)
    trace = load(str(_storm(tmp_path)))
    tree = render_tree(trace)
    tables = [s for p in tree.pages for s in p.code if s.title == "Compilation metrics"]
    assert len(tables) >= STORM_IDS  # every compile id shows its metrics ...
    assert len(calls) == len(set(calls)) < len(tables)  # ... and each layout is read once
    for section in tables:  # each table's terms are its own fields
        assert "compile_id" in section.terms and "co_name" in section.terms


def test_a_site_build_pretty_prints_each_json_payload_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tlparse file and the page of a JSON artifact share one pretty-printed text, which
    is tlparse's (``compat.pretty_json`` of the payload)."""
    log = _storm(tmp_path, 10)
    made: list[str] = []
    pretty = compat.pretty_json

    def counted(text: str) -> str:
        made.append(text)
        return pretty(text)

    monkeypatch.setattr(compat, "pretty_json", counted)
    monkeypatch.setattr(pages, "pretty_json", counted)
    site = tmp_path / "site"
    build(str(log), site, make_zip=False)
    monkeypatch.undo()

    trace = load(str(log))
    json_artifacts = [
        a
        for unit in trace.units.values()
        for a in unit.artifacts
        if a.body == BODY_JSON and a.payload is not None and a.path
    ]
    distinct = {a.payload.md5 for a in json_artifacts}  # type: ignore[union-attr]
    assert len(distinct) >= 10  # a recompile_reasons record per compile id, at least
    assert len(made) == len(distinct)  # not once for the file and again for the page
    for artifact in json_artifacts:
        expected = pretty(trace.read_payload(artifact.payload))  # type: ignore[arg-type]
        assert (site / artifact.path).read_text(encoding="utf-8") == expected, artifact.path
        unit_page = (site / artifact.path).parent / "index.html"
        assert f'id="artifact-{artifact.number}"' in unit_page.read_text(encoding="utf-8")

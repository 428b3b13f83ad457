"""Memory bounded with the artifact count (issue #20, point 9).

Every artifact stayed an object until the site was written (a few hundred bytes each, and
``compile_directory.json`` built one compile's entries as a list of dicts): 300,000 artifacts
in one compile peaked at 672 MB. Past the caps of :mod:`tlsite.core.limits` artifacts wait in
a spill file and are read back one at a time by what lists every one; the outputs must not
change, on crafted traces and on real ones with the caps lowered so that they spill.
"""

from __future__ import annotations

import filecmp
import gc
import hashlib
import html
import json
import os
import re
from pathlib import Path

import pytest

from tlsite.core import limits, model
from tlsite.core import load as load_path
from tlsite.core.builder import build_trace
from tlsite.core.limits import SECTIONS
from tlsite.core.model import Artifact, Trace
from tlsite.core.render.compat import CompatWriter
from tlsite.core.render.pages import ReportRenderer

HEAD = "V0101 00:00:00.000000 1 f.py:1] "
IDS = '"frame_id": 0, "frame_compile_id": 0, "attempt": 0'
FIXTURES = Path(__file__).parent / "fixtures" / "traces"
CORPUS_TRAINING = (
    Path(__file__).resolve().parents[2]
    / "shared/corpus/torch-2.13/training/dedicated_log_torch_trace_37a_a80u.log"
)


def artifact_lines(count: int) -> list[str]:
    """``count`` artifact records in one compile id, as ``hostile_bench.py artifacts`` makes."""
    lines = []
    for i in range(count):
        payload = f"payload {i}"
        md5 = hashlib.md5(payload.encode()).hexdigest()
        envelope = f'{{"artifact": {{"name": "art_{i}", "encoding": "string"}}, {IDS}, '
        lines.append(f'{HEAD}{envelope}"has_payload": "{md5}"}}\n\t{payload}\n')
    return lines


def artifacts_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Artifact))


def small_caps(monkeypatch: pytest.MonkeyPatch, *, per_trace: int, per_compile: int) -> None:
    monkeypatch.setattr(model, "ARTIFACTS_PER_TRACE", per_trace)
    monkeypatch.setattr(model, "ARTIFACTS_PER_COMPILE", per_compile)
    monkeypatch.setattr(model, "RECENT_ARTIFACTS", 2)


@pytest.mark.slow
def test_artifacts_past_the_cap_are_not_kept_as_objects_and_every_output_lists_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A compile of 3,000 artifacts with a cap of 1,000 in all: about 1,000 objects stay, and
    compile_directory.json, the raw files and the compile page still have every one."""
    small_caps(monkeypatch, per_trace=1_000, per_compile=1_000)
    count = 3_000
    before = artifacts_alive()
    trace = build_trace(["".join(artifact_lines(count)).encode()], "artifacts.log")
    try:
        assert artifacts_alive() - before <= 1_000 + 2 * 2
        (unit,) = trace.units.values()
        assert len(unit.artifacts) == count
        assert [a.name for a in unit.artifacts] == [f"art_{i}" for i in range(count)]
        assert unit.artifacts[2_500].name == "art_2500"
        assert [a.number for a in unit.artifacts[-3:]] == [count - 3, count - 2, count - 1]

        CompatWriter(trace, tmp_path, raw_log=None).write_all()
        directory = json.loads((tmp_path / "compile_directory.json").read_text())
        (entry,) = directory.values()
        entries = entry["artifacts"]
        assert [e["number"] for e in entries] == list(range(count))
        last = tmp_path / entries[-1]["url"]
        assert last.read_text() == f"payload {count - 1}"

        page = ReportRenderer(trace).unit_page(unit).standalone_markdown()
        assert f"This compile logged {count} artifacts" in page
        assert 'id="artifact-2999"' in page  # a row for the last one, read back from the spill
    finally:
        trace.close()


def test_compile_directory_is_tlparse_layout_one_artifact_at_a_time(tmp_path: Path):
    """The file is written entry by entry: its text is still ``json.dumps(indent=2,
    sort_keys=True)`` of the whole directory (tlparse's layout), empty compiles included."""
    trace = load_path(FIXTURES / "graph_breaks" / "graph_breaks.log")
    try:
        CompatWriter(trace, tmp_path, raw_log=None).write_all()
    finally:
        trace.close()
    text = (tmp_path / "compile_directory.json").read_text()
    directory = json.loads(text)
    assert len(directory) > 3
    assert text == json.dumps(directory, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


REAL_TRACES = [
    FIXTURES / "graph_breaks" / "graph_breaks.log",
    FIXTURES / "torch-2.15" / "aoti.log",
    FIXTURES / "torch-2.15" / "recompiles.log",
    FIXTURES / "torch-2.4" / "training.log",
    CORPUS_TRAINING,
]


def compat_files(path: Path, out: Path) -> Trace:
    trace = load_path(path)
    CompatWriter(trace, out, raw_log=None).write_all()
    return trace


@pytest.mark.slow
@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.stem)
def test_real_traces_write_the_same_files_when_their_artifacts_spill(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """With caps of a few artifacts, nearly every artifact of a real trace goes through the
    spill (labelled with its graph while inductor compiles, read back for each file): the
    tlparse-compatible files and compile_directory.json are byte-identical, and so is every
    compile page's Markdown."""
    if not path.exists():
        pytest.skip(f"{path} is not here")
    kept = compat_files(path, tmp_path / "kept")
    small_caps(monkeypatch, per_trace=3, per_compile=2)
    spilled = compat_files(path, tmp_path / "spilled")
    try:
        total = sum(len(u.artifacts) for u in spilled.units.values())
        assert sum(len(u.artifacts._offsets) for u in spilled.units.values()) > total // 2
        compare = filecmp.dircmp(tmp_path / "kept", tmp_path / "spilled")
        assert not compare.left_only and not compare.right_only
        for folder, _dirs, files in os.walk(tmp_path / "kept"):
            twin = tmp_path / "spilled" / Path(folder).relative_to(tmp_path / "kept")
            _same, different, errors = filecmp.cmpfiles(folder, twin, files, shallow=False)
            assert not different and not errors, (folder, different)
        pages = ReportRenderer(kept), ReportRenderer(spilled)
        for a, b in zip(kept.units.values(), spilled.units.values(), strict=True):
            assert [x.graph_role for x in a.artifacts] == [x.graph_role for x in b.artifacts]
            markdown = [
                r.unit_page(u).standalone_markdown() for r, u in zip(pages, (a, b), strict=True)
            ]
            assert markdown[0] == markdown[1], a.display
    finally:
        kept.close()
        spilled.close()


def test_made_up_event_types_are_counted_by_name_up_to_a_cap(monkeypatch: pytest.MonkeyPatch):
    """Each distinct unknown event type (and unknown top-level key) added a name to Parse
    health's counts and to its compile's: past the cap the rest are counted together, and
    Parse health says how many records they were."""
    monkeypatch.setattr(limits, "NAMES", 50)
    count = 400
    lines = [f'{HEAD}{{"made_up_{i}": {{}}, "extra_{i}": 1, {IDS}}}\n' for i in range(count)]
    trace = build_trace(["".join(lines).encode()], "types.log")
    try:
        stats = trace.stats
        assert len(stats.unknown_events) == 51 and len(stats.unknown_keys) == 51
        assert sum(stats.unknown_events.values()) == count
        assert stats.unknown_events[limits.OTHER_TYPES] == count - 50
        assert stats.unknown_keys[limits.OTHER_KEYS] == count - 50
        (unit,) = trace.units.values()
        assert len(unit.kept) <= 51 and sum(unit.kept.values()) == count
        markdown = ReportRenderer(trace).health_page().standalone_markdown()
        page = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"\\(.)", r"\1", markdown)))
        assert "made_up_0 × 1, " in page
        assert f"{limits.OTHER_TYPES} × {count - 50}" in page
        assert f"{limits.OTHER_KEYS} × {count - 50}" in page
    finally:
        trace.close()


def test_the_compile_ids_page_lists_a_bounded_number_of_artifacts_per_compile():
    """The compile-ids page (tlparse's index) listed every artifact of every compile: for a
    compile of 100,000s of artifacts, a row and a dict each. It lists the first ones and says
    how many more there are and where."""
    count = SECTIONS + 1_234
    trace = build_trace(["".join(artifact_lines(count)).encode()], "artifacts.log")
    try:
        page = ReportRenderer(trace).compile_ids_page()
        table = "".join(block.html() for block in page.blocks.values())
        assert table.count("<li>") == SECTIONS
        assert "1,234 more artifacts: <a href=" in table
        assert f"#artifact-{SECTIONS - 1}" in table and f'#artifact-{SECTIONS}"' not in table
    finally:
        trace.close()

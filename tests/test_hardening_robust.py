"""Never a traceback: fields of the wrong type, absurd numbers and names build a report.

Issue #20, point 13: a deep ``dynamo_start`` stack, a metrics field of the wrong type, a
non-finite runtime estimate on one rank, a rank number too long for a file name and a file
name that is not UTF-8 each aborted the whole build. Each now builds, and what was wrong is
said where a reader looks (Parse health, the multi-rank page, the name shown escaped).
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

import pytest
from corpus import CORPUS, FIXTURE_TRACES, trace_lines

from tlsite.cli import build
from tlsite.core.analysis.stack_trie import compile_trie
from tlsite.core.frames import Frame
from tlsite.core.model import CompileUnit

CID = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
RECOMPILES = FIXTURE_TRACES / "recompiles" / "recompiles.log"
RUNTIME_RANKS = CORPUS / "tlparse" / "inputs" / "multi_rank_runtime"


def text_of(html: str) -> str:
    """What a reader sees: the page's text without tags, entities decoded."""
    import html as html_mod

    return html_mod.unescape(re.sub(r"<[^>]+>", " ", html))


def deep_stack_log(path: Path, depth: int) -> Path:
    stack = [{"line": i, "name": f"level_{i}", "filename": 0} for i in range(depth)]
    text = trace_lines({"str": ["/src/recurse.py", 0]})
    text += trace_lines({"dynamo_start": {"stack": stack}, **CID})
    text += trace_lines({"compilation_metrics": {"graph_op_count": 1, "co_name": "f"}, **CID})
    path.write_text(text, encoding="utf-8")
    return path


def test_deep_stack_builds_with_its_compile_id_shown(tmp_path: Path) -> None:
    """A 300-frame stack (deeper than a recursive template can go) builds; the overview's
    stack trie stops nesting at MAX_DEPTH and still links the compile id, with a note."""
    from tlsite.core.render.trie_html import MAX_DEPTH

    log = deep_stack_log(tmp_path / "deep.log", 300)
    outcome = build(str(log), tmp_path / "site", make_zip=False)
    page = (outcome.site / "index.html").read_text(encoding="utf-8")
    trie = page[page.index('class="stack-trie"') :]
    trie = trie[: trie.index("</div>")]
    assert trie.count('<ul class="trie-level">') == MAX_DEPTH
    assert 'href="-_0_0_0/index.html">[0/0]</a>' in trie
    shown = text_of(trie)
    assert f"the stack goes on {300 - MAX_DEPTH} frames deeper" in shown
    assert f"level_{MAX_DEPTH - 1}" in shown and f"level_{MAX_DEPTH}<" not in trie


def test_trie_items_have_no_depth_limit_of_their_own() -> None:
    """Walking a 20,000-frame trie needs no recursion (Python's limit is 1,000 frames)."""
    from tlsite.core.render.trie_html import trie_items

    frames = [Frame(f"/f{i}.py", i, f"fn{i}") for i in range(20_000)]
    unit = CompileUnit(id=None, order=0, first_line=1)
    unit.stacks.append(frames)
    items = list(trie_items(compile_trie([unit]).root, max_depth=30_000))
    assert sum(1 for i in items if i.node is not None) == 20_000
    assert sum(1 for i in items if i.node is None) == 19_999  # every nested list is closed
    assert [i for i in items if i.node is not None][-1].units == [unit]


BAD_METRICS = {
    "restart_reasons": 1,
    "fail_type": 5,
    "fail_reason": ["not", "text"],
    "guard_count": "many",
    "co_firstlineno": "7",
    "entire_frame_compile_time_s": "slow",
    "dynamo_cumulative_compile_time_us": float("inf"),
    "graph_op_count": [1],
}


@pytest.mark.parametrize("config", [False, True], ids=["no-config", "config-snapshot"])
def test_a_metrics_field_of_nan_is_no_value_whatever_else_the_record_holds(
    tmp_path: Path, config: bool
) -> None:
    """NaN and infinity in a field the types do not check are null, as in tlsite's JSON
    files, whether or not the record carries a config snapshot (torch 2.13 and later do;
    the record was kept as logged without one, and showed ``NaN``)."""
    from tlsite.core import load

    metrics: dict[str, object] = {"co_name": "step", "ratio": float("nan"), "w": [float("inf")]}
    if config:
        metrics["dynamo_config"] = json.dumps({"verbose": False})
    text = trace_lines({"dynamo_start": {"stack": []}, **CID})
    text += trace_lines({"compilation_metrics": metrics, **CID})
    log = tmp_path / "nan.log"
    log.write_text(text, encoding="utf-8")
    trace = load(log)
    try:
        (unit,) = trace.units.values()
        assert unit.metrics[0].meta == {"co_name": "step", "ratio": None, "w": [None]}
    finally:
        trace.close()
    outcome = build(str(log), tmp_path / "site", make_zip=False)
    page = text_of((outcome.site / "-_0_0_0" / "index.html").read_text(encoding="utf-8"))
    assert "step" in page and "NaN" not in page and "Infinity" not in page


def test_metrics_fields_of_the_wrong_type_are_noted_and_ignored(tmp_path: Path) -> None:
    """Each wrong-typed field is listed on Parse health with its value; the build goes on
    and pages use none of them (no failure row from a numeric fail_type, no restart)."""
    text = trace_lines({"dynamo_start": {"stack": []}, **CID})
    text += trace_lines({"compilation_metrics": {**BAD_METRICS, "co_name": "step"}, **CID})
    text += trace_lines({"bwd_compilation_metrics": {"restart_reasons": {"a": 1}}, **CID})
    text += trace_lines({"compilation_metrics_runtime": {"gc_time_us": "NaN?"}, **CID})
    log = tmp_path / "metrics.log"
    log.write_text(text, encoding="utf-8")
    outcome = build(str(log), tmp_path / "site", make_zip=False)
    health_html = (outcome.site / "health.html").read_text(encoding="utf-8")
    health = text_of(health_html)
    assert '<h2 id="where"' in health_html and "## Where" not in health  # a heading, not text
    for key, value in BAD_METRICS.items():
        assert f"compilation_metrics.{key}: {value!r}" in health, key
    assert "bwd_compilation_metrics.restart_reasons: {'a': 1}" in health
    assert "compilation_metrics_runtime.gc_time_us: 'NaN?'" in health
    failures = text_of((outcome.site / "failures.html").read_text(encoding="utf-8"))
    assert "RestartAnalysis" not in failures
    page = text_of((outcome.site / "-_0_0_0" / "index.html").read_text(encoding="utf-8"))
    assert "step" in page  # the fields of the right type are still used


@pytest.mark.slow
def test_real_metrics_have_no_wrong_typed_field() -> None:
    """The type rules flag nothing in real traces (a field torch writes is never dropped)."""
    from tlsite.core import load

    logs = sorted(FIXTURE_TRACES.glob("*/*.log")) + sorted((CORPUS / "torch-2.13").glob("*/*.log"))
    for log in logs:
        assert load(log).stats.findings["bad_field"] == 0, log


def runtime_rank_log(rank: int, runtime: str) -> str:
    payload = (
        '{"ops": [{"name": "mm", "type": "compute", "estimated_runtime_ns": '
        + runtime
        + '}, {"name": "add", "type": "compute", "estimated_runtime_ns": 5.0}]}'
    )
    envelope = {
        "artifact": {"name": "inductor_runtime_and_tensor_meta", "encoding": "json"},
        "rank": rank,
        **CID,
    }
    return trace_lines({"dynamo_start": {"stack": []}, "rank": rank, **CID}) + trace_lines(
        envelope, payload
    )


def strict_json(path: Path) -> object:
    """Parse as JSON, refusing NaN and Infinity (which JSON does not have)."""

    def refuse(token: str) -> None:
        raise AssertionError(f"{path.name} holds {token}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


@pytest.mark.slow
def test_non_finite_runtime_on_one_rank_builds_the_job(tmp_path: Path) -> None:
    """``1e400`` (infinity) and ``NaN`` runtime estimates are not used and the op is named
    as a problem; every JSON file tlsite writes is valid JSON."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank, runtime in ((0, "1000.0"), (1, "1e400"), (2, "NaN")):
        name = f"dedicated_log_torch_trace_rank_{rank}_x.log"
        (folder / name).write_text(runtime_rank_log(rank, runtime), encoding="utf-8")
    outcome = build(str(folder), tmp_path / "site", make_zip=False)
    landing = text_of((outcome.site / "index.html").read_text(encoding="utf-8"))
    assert landing.count("1 op(s) without a name and a plausible runtime") == 2
    estimates = strict_json(outcome.site / "runtime_estimations.json")
    assert isinstance(estimates, list)
    by_rank = {e["rank"]: [op["name"] for op in e["ops"]] for e in estimates}
    assert by_rank == {0: ["mm", "add"], 1: ["add"], 2: ["add"]}
    # tlsite's own JSON files (artifacts are the trace's payloads, kept as logged)
    for path in [*outcome.site.glob("*.json"), *outcome.site.glob("rank_*/*.json")]:
        strict_json(path)


@pytest.mark.slow
def test_rank_number_too_long_for_a_file_name_is_not_a_rank(tmp_path: Path) -> None:
    """A member ``…rank_<300 digits>…`` is listed as not a rank log; the others build."""
    archive = tmp_path / "ranks.zip"
    data = RECOMPILES.read_bytes()
    huge = "9" * 300
    with zipfile.ZipFile(archive, "w") as zf:
        for rank in ("0", "1", huge):
            zf.writestr(f"dedicated_log_torch_trace_rank_{rank}_a.log", data)
    outcome = build(str(archive), tmp_path / "site", make_zip=False)
    assert sorted(p.name for p in outcome.site.glob("rank_*")) == ["rank_0", "rank_1"]
    landing = text_of((outcome.site / "index.html").read_text(encoding="utf-8"))
    assert "Rank 1" in landing


def test_rank_of_caps_digits() -> None:
    from tlsite.core.source import _rank_of

    assert _rank_of("dedicated_log_torch_trace_rank_1234567_x.log") == 1234567
    assert _rank_of("dedicated_log_torch_trace_rank_12345678_x.log") is None


@pytest.mark.skipif(os.name != "posix", reason="file names as bytes")
def test_file_name_that_is_not_utf8_builds_and_is_shown_escaped(tmp_path: Path) -> None:
    """``trace\\xff.log`` builds; pages say ``trace\\xff.log`` (text), and the bundle holds it
    under an output folder whose name is not UTF-8 either."""
    raw = os.fsencode(tmp_path) + b"/trace\xff\xfe.log"
    with open(raw, "wb") as dest:
        dest.write(RECOMPILES.read_bytes())
    out = Path(os.fsdecode(os.fsencode(tmp_path) + b"/site\xfd"))
    outcome = build(os.fsdecode(raw), out, make_zip=True)
    page = text_of((outcome.site / "health.html").read_text(encoding="utf-8"))
    assert "trace\\xff\\xfe.log" in page
    assert outcome.bundle is not None
    with zipfile.ZipFile(outcome.bundle) as zf:
        names = zf.namelist()
    assert "site\\xfd/index.html" in names
    manifest = strict_json(outcome.site / "manifest.json")
    assert isinstance(manifest, dict) and manifest["trace"] == "trace\\xff\\xfe.log"


def test_lone_surrogates_and_nan_from_json_build(tmp_path: Path) -> None:
    """JSON may escape a lone surrogate (``\\ud800``, not encodable as UTF-8) and Python reads
    ``NaN``: names show U+FFFD, and tlsite's own JSON files stay strict JSON."""
    lone = "bad\ud800name"
    text = trace_lines({"dynamo_start": {"stack": []}, **CID})
    text += trace_lines({"artifact": {"name": lone, "encoding": "string"}, **CID}, "body")
    text += trace_lines({"compilation_metrics": {"co_name": lone, "graph_op_count": 1}, **CID})
    event = '{"name": "x", "ph": "i", "ts": NaN, "pid": 0, "tid": 0, "args": {"v": Infinity}}'
    text += trace_lines({"chromium_event": {}, **CID}, event)
    log = tmp_path / "lone.log"
    log.write_text(text, encoding="utf-8")  # json.dumps escaped the surrogate: ASCII text
    outcome = build(str(log), tmp_path / "site", make_zip=False)
    page = text_of((outcome.site / "-_0_0_0" / "index.html").read_text(encoding="utf-8"))
    assert "bad\ufffdname" in page
    events = strict_json(outcome.site / "chromium_events.json")
    assert isinstance(events, list) and events[0]["ts"] is None
    assert events[0]["args"] == {"v": None}
    strict_json(outcome.site / "compile_directory.json")


def test_chromium_event_that_lost_its_payload_keeps_the_json_valid(tmp_path: Path) -> None:
    """A flipped byte in ``has_payload`` leaves a chromium_event with no payload (its lines
    become orphans): chromium_events.json stays valid JSON, the event is noted as bad."""
    event = '{"name": "a", "ph": "B", "ts": 1795470200040371.5, "pid": 0, "tid": 0}'
    good = trace_lines({"chromium_event": {}, **CID}, event)
    broken = good.replace('"has_payload"', '"has_paiload"')
    log = tmp_path / "lost.log"
    log.write_text(good + broken + good.replace('"B"', '"E"'), encoding="utf-8")
    outcome = build(str(log), tmp_path / "site", make_zip=False)
    events = strict_json(outcome.site / "chromium_events.json")
    assert isinstance(events, list) and [e["ph"] for e in events] == ["B", "E"]
    health = text_of((outcome.site / "health.html").read_text(encoding="utf-8"))
    assert "chromium_event: bad JSON" in health

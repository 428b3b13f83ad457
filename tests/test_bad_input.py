"""Damaged traces: reading never raises, every bad line is counted with its line number and
reason, and everything else is still read.

Each variant is a real corpus trace (``comp_metrics.log``: 65 lines, 12 records, payloads on
lines 11–18 and 26–30) with one defect injected; the defects mimic what happens to real logs
(killed processes, dropped lines, interleaved writers, editors, transfers).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from corpus import (
    HEADER_PREFIX,
    TORCH_213,
    TRAINING_TRACE_GLOB,
    files_under,
    run_tlparse,
    tlparse_input,
    trace_lines,
)

from tlsite.core import Trace, load
from tlsite.core.render.compat import CompatWriter
from tlsite.core.stats import FINDING_REASONS, SKIP_REASONS

BASE = tlparse_input("comp_metrics.log")
BASE_LINES: list[bytes] = BASE.read_bytes().splitlines(keepends=True)
BASE_RECORDS = 12
GRAPH_HEADER = 10  # dynamo_output_graph [0/0_1], payload on lines 11-18
GUARDS_HEADER = 25  # dynamo_guards [0/0_1], payload on lines 26-30
METRICS_LINE = 31  # compilation_metrics [0/0_1], no payload
LAST_LINE = 65  # compilation_metrics [2/0]


def line(number: int) -> bytes:
    return BASE_LINES[number - 1]


def with_envelope(number: int, change: Callable[[dict[str, Any]], None]) -> bytes:
    """Line ``number`` with its JSON envelope edited by ``change``."""
    prefix, _, body = line(number).partition(b"] ")
    envelope = json.loads(body)
    change(envelope)
    return prefix + b"] " + json.dumps(envelope).encode() + b"\n"


def replaced(number: int, *new: bytes) -> bytes:
    return b"".join(BASE_LINES[: number - 1] + list(new) + BASE_LINES[number:])


def inserted_after(number: int, *new: bytes) -> bytes:
    return b"".join(BASE_LINES[:number] + list(new) + BASE_LINES[number:])


def physical_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@dataclass(frozen=True)
class Variant:
    """A damaged copy of the base trace and what reading it must report."""

    name: str
    data: bytes
    defects: tuple[tuple[str, int], ...]  # (reason, line) that must be reported
    records: int  # records still read
    tlparse_agrees: bool = True  # tlparse's Stats line can be compared (it does not abort)


def _metrics_without_fail_reason(envelope: dict[str, Any]) -> None:
    envelope["compilation_metrics"]["fail_type"] = "BackendCompilerFailed"
    envelope["compilation_metrics"].pop("fail_reason", None)


def _metrics_with_bad_cache_size(envelope: dict[str, Any]) -> None:
    envelope["compilation_metrics"]["cache_size"] = "big"


def _rank_of(rank: int | None) -> Callable[[dict[str, Any]], None]:
    def change(envelope: dict[str, Any]) -> None:
        envelope["rank"] = rank

    return change


def ranked(other: int) -> bytes:
    """Every record says rank 0 except line ``other``, which says rank 1."""
    lines = []
    for number, raw in enumerate(BASE_LINES, 1):
        if raw.startswith(b"V") and b'] {"str"' not in raw:
            raw = with_envelope(number, _rank_of(1 if number == other else 0))
        lines.append(raw)
    return b"".join(lines)


def _bad_md5(envelope: dict[str, Any]) -> None:
    envelope["has_payload"] = "not-an-md5"


UNKNOWN_EVENT = trace_lines(
    {"totally_new_event": {"x": 1}, "frame_id": 2, "frame_compile_id": 0, "attempt": 0},
    "new payload",
).encode()

VARIANTS = [
    Variant(
        "truncated_mid_json_at_end",
        b"".join(BASE_LINES[:-1]) + line(LAST_LINE)[:200],
        (("bad_json", LAST_LINE),),
        BASE_RECORDS - 1,
    ),
    Variant(
        "truncated_mid_json_before_a_payload",
        replaced(GRAPH_HEADER, line(GRAPH_HEADER)[:150] + b"\n"),
        (("bad_json", GRAPH_HEADER), ("orphan_payload", GRAPH_HEADER + 1)),
        BASE_RECORDS - 1,
    ),
    Variant(
        "truncated_mid_payload",
        b"".join(BASE_LINES[:14]) + line(15)[:12],
        (("md5_mismatch", GRAPH_HEADER),),
        2,  # dynamo_start on line 9 and the cut dynamo_output_graph
    ),
    Variant(
        "payload_line_dropped",
        replaced(13),
        (("md5_mismatch", GRAPH_HEADER),),
        BASE_RECORDS,
    ),
    Variant(
        "garbage_line_inserted",
        inserted_after(METRICS_LINE, b"Traceback (most recent call last): oops\n"),
        (("bad_header", METRICS_LINE + 1),),
        BASE_RECORDS,
    ),
    Variant(
        "non_utf8_line_inserted",
        inserted_after(METRICS_LINE, HEADER_PREFIX.encode() + b'{"str": ["\xff\xfe", 99]}\n'),
        (("not_utf8", METRICS_LINE + 1),),
        BASE_RECORDS,
    ),
    Variant(
        "non_utf8_payload_line",
        replaced(13, b"\t        l_x_ = \xff\xfe\n"),
        (("not_utf8", 13), ("md5_mismatch", GRAPH_HEADER)),
        BASE_RECORDS,
    ),
    Variant(
        "json_array_line_inserted",
        inserted_after(METRICS_LINE, HEADER_PREFIX.encode() + b"[1, 2, 3]\n"),
        (("not_object", METRICS_LINE + 1),),
        BASE_RECORDS,
    ),
    Variant(
        "nul_line_inserted",
        inserted_after(METRICS_LINE, b"\x00\x00\x00\x00\n"),
        (("bad_header", METRICS_LINE + 1),),
        BASE_RECORDS,
    ),
    Variant(
        "nul_bytes_inside_the_json",
        replaced(METRICS_LINE, line(METRICS_LINE)[:120] + b"\x00\x00" + line(METRICS_LINE)[120:]),
        (("bad_json", METRICS_LINE),),
        BASE_RECORDS - 1,
    ),
    Variant(
        "nul_bytes_inside_a_payload",
        replaced(13, b"\t\x00\x00\n"),
        (("md5_mismatch", GRAPH_HEADER),),
        BASE_RECORDS,
    ),
    Variant(
        "payload_line_before_any_record",
        b"\tstray payload line\n" + b"".join(BASE_LINES),
        (("orphan_payload", 1),),
        BASE_RECORDS,
    ),
    Variant(
        "has_payload_not_an_md5",
        replaced(GRAPH_HEADER, with_envelope(GRAPH_HEADER, _bad_md5)),
        (("md5_mismatch", GRAPH_HEADER),),
        BASE_RECORDS,
    ),
    Variant(
        "malformed_str_record",
        replaced(2, HEADER_PREFIX.encode() + b'{"str": ["only a name"]}\n'),
        (("bad_str", 2),),
        BASE_RECORDS,
    ),
    Variant(
        "fail_type_without_fail_reason",
        replaced(METRICS_LINE, with_envelope(METRICS_LINE, _metrics_without_fail_reason)),
        (),
        BASE_RECORDS,
        tlparse_agrees=False,  # tlparse aborts: "Error: Fail reason not found"
    ),
    Variant(
        "wrong_typed_metrics_field",
        replaced(METRICS_LINE, with_envelope(METRICS_LINE, _metrics_with_bad_cache_size)),
        (("bad_field", METRICS_LINE),),
        BASE_RECORDS,
        tlparse_agrees=False,  # tlparse rejects the whole envelope (fail_json)
    ),
    Variant(
        "unknown_event_type",
        inserted_after(METRICS_LINE, UNKNOWN_EVENT),
        (("unknown_event", METRICS_LINE + 1),),
        BASE_RECORDS + 1,
    ),
    Variant(
        "record_of_another_rank",
        ranked(GRAPH_HEADER),
        (("other_rank", GRAPH_HEADER),),
        BASE_RECORDS - 1,
    ),
]
VARIANT_IDS = [v.name for v in VARIANTS]
each_variant = pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)


def write(tmp_path: Path, variant: Variant) -> Path:
    path = tmp_path / f"{variant.name}.log"
    path.write_bytes(variant.data)
    return path


def compat_out(trace: Trace, log: Path, out: Path) -> set[str]:
    CompatWriter(trace, out, raw_log=lambda: iter([log.read_bytes()])).write_all()
    return files_under(out)


# -- every variant ------------------------------------------------------------------------------
def test_the_variants_really_change_the_base_trace() -> None:
    for variant in VARIANTS:
        assert variant.data != b"".join(BASE_LINES), variant.name
    assert load(BASE).stats.is_clean


@each_variant
def test_every_line_is_accounted_for(tmp_path: Path, variant: Variant) -> None:
    stats = load(write(tmp_path, variant)).stats
    assert stats.total_lines == physical_lines(variant.data)
    assert stats.accounted_lines == stats.total_lines, stats.outcomes


@each_variant
def test_each_defect_is_reported_with_its_reason_and_line(tmp_path: Path, variant: Variant) -> None:
    stats = load(write(tmp_path, variant)).stats
    samples = {(s.reason, s.line) for s in stats.samples}
    for reason, number in variant.defects:
        assert reason in SKIP_REASONS or reason in FINDING_REASONS, reason
        assert number in stats.lines_by_reason.get(reason, []), (reason, stats.lines_by_reason)
        assert (reason, number) in samples
    expected = {reason for reason, _ in variant.defects}
    reported = {r for r in stats.lines_by_reason if r in SKIP_REASONS or r == "md5_mismatch"}
    assert reported <= expected, f"unexpected problems reported: {reported - expected}"
    if any(reason in SKIP_REASONS or reason == "md5_mismatch" for reason in expected):
        assert not stats.is_clean
    if any(reason in SKIP_REASONS for reason in expected):
        assert re.search(r"\b(1 line|[\d,]+ lines) skipped", stats.summary())


@each_variant
def test_the_rest_of_the_trace_is_read(tmp_path: Path, variant: Variant) -> None:
    trace = load(write(tmp_path, variant))
    assert trace.stats.outcomes["record"] == variant.records


@each_variant
def test_outputs_and_views_are_built_without_errors(tmp_path: Path, variant: Variant) -> None:
    log = write(tmp_path, variant)
    trace = load(log)
    out = tmp_path / "out"
    files = compat_out(trace, log, out)
    assert {"raw.jsonl", "compile_directory.json", "chromium_events.json", "raw.log"} <= files
    for raw in (out / "raw.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(raw)
    # the questions users ask still get answers
    assert isinstance(trace.graph_breaks, list)
    assert isinstance(trace.recompiles, list)
    assert isinstance(trace.failures, list)
    assert isinstance(trace.compile_times, list)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.tlparse_agrees], ids=lambda v: v.name)
def test_counts_agree_with_tlparse(tmp_path: Path, variant: Variant) -> None:
    log = write(tmp_path, variant)
    reference = run_tlparse(log)
    assert reference.stats is not None, reference.stderr[-2000:]
    theirs = reference.stats
    stats = load(log).stats
    outcomes = stats.outcomes
    assert outcomes["record"] == theirs.get("ok", 0)
    assert stats.findings["md5_mismatch"] == theirs.get("fail_payload_md5", 0)
    assert outcomes["bad_header"] + outcomes["orphan_payload"] == theirs.get("fail_glog", 0)
    # tlparse counts every line whose JSON is broken or not an object twice, and a valid
    # envelope that does not fit its schema (here: a malformed ``str``) once
    broken = 2 * (outcomes["bad_json"] + outcomes["not_object"]) + outcomes["bad_str"]
    assert broken == theirs.get("fail_json", 0)


# -- specific defects ---------------------------------------------------------------------------
def test_crlf_line_endings_parse_exactly_like_lf(tmp_path: Path) -> None:
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(b"".join(BASE_LINES).replace(b"\n", b"\r\n"))
    lf_trace, crlf_trace = load(BASE), load(crlf)
    assert crlf_trace.stats.is_clean, crlf_trace.stats.summary()
    assert crlf_trace.stats.outcomes == lf_trace.stats.outcomes
    assert crlf_trace.strings.as_list() == lf_trace.strings.as_list()
    lf_out, crlf_out = tmp_path / "lf", tmp_path / "crlf"
    lf_files = compat_out(lf_trace, BASE, lf_out)
    assert compat_out(crlf_trace, crlf, crlf_out) == lf_files
    for name in sorted(lf_files - {"raw.log"}):
        assert (crlf_out / name).read_bytes() == (lf_out / name).read_bytes(), name


def test_blank_lines_inside_a_payload_are_dropped(tmp_path: Path) -> None:
    log = tmp_path / "stutter.log"
    log.write_bytes(inserted_after(12, b"\n", b"\n"))
    trace = load(log)
    assert trace.stats.is_clean, trace.stats.summary()
    assert trace.stats.outcomes["blank"] == 2
    graph = trace.unit("[0/0_1]").artifacts[0]
    assert trace.read_payload(graph.payload) == trace_payload(load(BASE), "[0/0_1]")


def trace_payload(trace: Trace, display: str) -> str:
    artifact = trace.unit(display).artifacts[0]
    assert artifact.payload is not None
    return trace.read_payload(artifact.payload)


def test_truncated_payload_is_kept_as_far_as_it_goes(tmp_path: Path) -> None:
    variant = VARIANTS[VARIANT_IDS.index("truncated_mid_payload")]
    trace = load(write(tmp_path, variant))
    text = trace_payload(trace, "[0/0_1]")
    assert text.startswith("class GraphModule(torch.nn.Module):")
    assert text.endswith(line(15)[1:12].decode())


def test_metrics_with_fail_type_but_no_fail_reason_is_a_failure_not_a_crash(
    tmp_path: Path,
) -> None:
    variant = VARIANTS[VARIANT_IDS.index("fail_type_without_fail_reason")]
    log = write(tmp_path, variant)
    trace = load(log)
    assert trace.stats.is_clean
    unit = trace.unit("[0/0_1]")
    assert unit.metric("fail_type") == "BackendCompilerFailed"
    assert unit.metric("fail_reason") is None
    failed = [(f.unit.display, f.kind) for f in trace.failures if not f.is_restart]
    assert failed == [("[0/0_1]", "BackendCompilerFailed")]
    files = compat_out(trace, log, tmp_path / "out")
    assert any(f.startswith("-_0_0_1/compilation_metrics_") for f in files)


def test_tlparse_aborts_on_fail_type_without_fail_reason(tmp_path: Path) -> None:
    """The reference behaviour tlsite deliberately does not copy (spec §1.7, §9)."""
    variant = VARIANTS[VARIANT_IDS.index("fail_type_without_fail_reason")]
    reference = run_tlparse(write(tmp_path, variant))
    assert reference.returncode != 0
    assert "Fail reason not found" in reference.stderr


def test_wrong_typed_metrics_field_keeps_the_unit_and_its_other_fields(tmp_path: Path) -> None:
    variant = VARIANTS[VARIANT_IDS.index("wrong_typed_metrics_field")]
    log = write(tmp_path, variant)
    trace = load(log)
    assert trace.stats.skipped_lines == 0
    unit = trace.unit("[0/0_1]")
    assert unit.metric("cache_size") is None  # ignored, and noted on Parse health
    assert "compilation_metrics.cache_size: 'big'" in [s.detail for s in trace.stats.samples]
    assert unit.metric("co_name") == "fn"
    assert unit.metric("graph_op_count") == load(BASE).unit("[0/0_1]").metric("graph_op_count")
    assert [a.path for a in unit.artifacts] == [
        a.path for a in load(BASE).unit("[0/0_1]").artifacts
    ]
    compile_times = trace.compile_times
    assert compile_times
    files = compat_out(trace, log, tmp_path / "out")
    assert any(f.startswith("-_0_0_1/compilation_metrics_") for f in files)


def test_wrong_typed_field_a_handler_reads_is_noted_and_ignored(tmp_path: Path) -> None:
    log = tmp_path / "badfield.log"
    log.write_text(
        trace_lines(
            {
                "inductor_output_code": {"filename": 7},
                "frame_id": 0,
                "frame_compile_id": 0,
                "attempt": 0,
            },
            "def call(args): pass",
        )
        + trace_lines(
            {
                "artifact": {"name": 5, "encoding": "string"},
                "frame_id": 0,
                "frame_compile_id": 0,
                "attempt": 0,
            },
            "x",
        ),
        encoding="utf-8",
    )
    trace = load(log)
    assert trace.stats.records == 2
    assert trace.stats.lines_by_reason["bad_field"] == [1, 3]
    assert [a.path for a in trace.artifacts()] == ["-_0_0_0/inductor_output_code_0.html"]
    assert [e.type for e in trace.unit("[0/0]").events] == ["artifact"]


EVIL_NAMES = ["../../evil", "/tmp/evil_abs", "..", "a/../../evil_nested", "evil\x00nul"]


def evil_trace() -> str:
    cid = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    text = ""
    for name in EVIL_NAMES:
        text += trace_lines({"artifact": {"name": name, "encoding": "string"}, **cid}, name)
        text += trace_lines({"artifact": {"name": name, "encoding": "json"}, **cid}, "{}")
        text += trace_lines({"graph_dump": {"name": name}, **cid}, "graph")
        text += trace_lines({"optimize_ddp_split_child": {"name": name}, **cid}, "child")
        text += trace_lines({"dump_file": {"name": name}, **cid}, "source")
        text += trace_lines({"inductor_output_code": {"filename": name + ".py"}, **cid}, "code")
    return text


def test_artifact_names_cannot_write_outside_the_output_folder(tmp_path: Path) -> None:
    inside = tmp_path / "work"
    inside.mkdir()
    log = inside / "evil.log"
    log.write_text(evil_trace(), encoding="utf-8")
    out = inside / "deep" / "out"
    before = set(tmp_path.rglob("*"))
    trace = load(log)
    assert trace.stats.is_clean, trace.stats.summary()
    files = compat_out(trace, log, out)
    resolved_out = out.resolve()
    for dirpath, dirnames, filenames in os.walk(out):
        for name in dirnames + filenames:
            path = (Path(dirpath) / name).resolve()
            assert path.is_relative_to(resolved_out), path
    created = set(tmp_path.rglob("*")) - before
    outside = [p for p in created if not p.resolve().is_relative_to(resolved_out)]
    assert outside == [out.parent], outside
    assert not Path("/tmp/evil_abs_0.txt").exists()
    # each record still produced its numbered output, listed in compile_directory.json
    listed = json.loads((out / "compile_directory.json").read_text())["[0/0]"]["artifacts"]
    assert len(listed) == 6 * len(EVIL_NAMES)
    for entry in listed:
        assert entry["url"] in files


def test_unknown_event_type_is_kept_counted_and_its_payload_written(tmp_path: Path) -> None:
    variant = VARIANTS[VARIANT_IDS.index("unknown_event_type")]
    log = write(tmp_path, variant)
    trace = load(log)
    assert trace.stats.unknown_events == {"totally_new_event": 1}
    events = trace.unit("[2/0]").events_of("totally_new_event")
    assert len(events) == 1
    assert events[0].meta == {"x": 1}
    assert events[0].line == METRICS_LINE + 1
    assert events[0].payload is not None
    assert trace.read_payload(events[0].payload) == "new payload"
    files = compat_out(trace, log, tmp_path / "out")
    md5 = json.loads(UNKNOWN_EVENT.split(b"] ", 1)[1].split(b"\n", 1)[0])["has_payload"]
    assert f"payloads/{md5}.txt" in files


def test_records_of_another_rank_are_skipped_with_their_payload(tmp_path: Path) -> None:
    variant = VARIANTS[VARIANT_IDS.index("record_of_another_rank")]
    trace = load(write(tmp_path, variant))
    assert trace.rank == 0
    assert trace.stats.outcomes["other_rank"] == 9  # header + 8 payload lines
    assert trace.stats.outcomes["orphan_payload"] == 0
    assert not any(a.kind == "dynamo_output_graph" for a in trace.unit("[0/0_1]").artifacts)


def test_skipped_payload_lines_of_another_rank_are_noted_at_their_own_line(
    tmp_path: Path,
) -> None:
    variant = VARIANTS[VARIANT_IDS.index("record_of_another_rank")]
    stats = load(write(tmp_path, variant)).stats
    assert stats.lines_by_reason["other_rank"] == [GRAPH_HEADER, GRAPH_HEADER + 1]


def test_header_with_payload_but_no_payload_lines(tmp_path: Path) -> None:
    log = tmp_path / "nopayload.log"
    log.write_text(
        trace_lines({"artifact": {"name": "a", "encoding": "string"}, "has_payload": "0" * 32})
        + trace_lines({"artifact": {"name": "b", "encoding": "string"}}, "b"),
        encoding="utf-8",
    )
    trace = load(log)
    assert trace.stats.lines_by_reason["md5_mismatch"] == [1]
    assert [a.path for a in trace.artifacts()] == ["-_-_-_-/a_0.txt", "-_-_-_-/b_1.txt"]


CID = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
#: Envelopes whose metadata has the wrong shape, with the payload they carry.
WRONG_SHAPES: list[tuple[dict[str, Any], str | None]] = [
    ({"dynamo_start": {"stack": "nope"}}, None),
    ({"dynamo_start": "nope"}, None),
    ({"dynamo_start": {"stack": [{"filename": [1], "line": "x", "name": 5}, 3]}}, None),
    ({"link": {"name": ["x"], "url": 5}}, None),
    ({"dump_file": {"name": ["x"]}}, "source"),
    ({"graph_dump": {"name": {"a": 1}}}, "graph"),
    ({"chromium_event": {}}, "not json"),
    ({"chromium_event": {}}, "[1, 2]"),
    ({"dynamo_guards": {}}, "{not a list"),
    ({"dynamo_guards": {}}, '[1, "x", {"code": 5}]'),
    ({"artifact": {"name": "k", "encoding": "json"}}, "{bad json"),
    ({"artifact": {"name": "x", "encoding": "base64"}}, "aGk="),
    ({"artifact": None}, "x"),
    ({"artifact": [1, 2]}, "x"),
    ({"symbolic_shape_specialization": {"stack": 5, "user_stack": {"a": 1}}}, None),
    ({"guard_added": {"prefix": ["eval"], "stack": [1]}}, None),
    ({"propagate_real_tensors_provenance": "x"}, None),
    ({"compilation_metrics": [1, 2]}, None),
    ({"compilation_metrics": {"restart_reasons": "abc", "graph_op_count": "many"}}, None),
    ({"compilation_metrics": {"dynamo_cumulative_compile_time_us": "slow"}}, None),
    ({"inductor_output_code": {"filename": "/"}}, "code"),
    ({"optimize_ddp_split_child": {"name": None}}, "child"),
    ({"exported_program": {}}, "program"),
    ({"frame_id": True}, None),
]


@pytest.mark.parametrize("export_mode", [False, True], ids=["normal", "export"])
@pytest.mark.parametrize(
    ("envelope", "payload"), WRONG_SHAPES, ids=[json.dumps(e)[:40] for e, _ in WRONG_SHAPES]
)
def test_wrong_shaped_metadata_is_kept_without_errors(
    tmp_path: Path, envelope: dict[str, Any], payload: str | None, export_mode: bool
) -> None:
    log = tmp_path / "shape.log"
    log.write_text(trace_lines({**CID, **envelope}, payload), encoding="utf-8")
    trace = load(log, export_mode=export_mode)
    assert trace.stats.outcomes["record"] == 1
    assert trace.stats.accounted_lines == trace.stats.total_lines
    out = tmp_path / "out"
    compat_out(trace, log, out)
    for path in out.rglob("*"):
        assert path.resolve().is_relative_to(out.resolve())
    for view in (trace.graph_breaks, trace.recompiles, trace.failures, trace.compile_times):
        assert isinstance(view, list)


def training_trace() -> Path:
    found = sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))
    if not found:
        pytest.fail(f"no training trace in {TORCH_213}")
    return found[0]


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_real_trace_cut_at_any_byte_is_read_up_to_the_cut(tmp_path: Path, fraction: float) -> None:
    full = training_trace().read_bytes()
    cut = full[: int(len(full) * fraction)]
    log = tmp_path / "cut.log"
    log.write_bytes(cut)
    stats = load(log).stats
    assert stats.total_lines == physical_lines(cut)
    assert stats.accounted_lines == stats.total_lines
    whole = load(training_trace()).stats.records
    assert 0 < stats.records <= whole
    # at most the last line (a header cut mid-JSON) or the last payload (md5) is damaged
    assert stats.skipped_lines <= 1
    assert stats.findings["md5_mismatch"] <= 1

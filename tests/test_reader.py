"""The record reader on real traces: every line accounted for, tlparse's counts, compile ids,
the string table and filename shortening (spec §1)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from corpus import (
    HEADER_PREFIX,
    all_corpus_traces,
    physical_lines,
    run_tlparse,
    tlparse_input,
    torch_213_traces,
    trace_id,
    trace_lines,
    write_compat,
)

from tlsite.core import CompileId, load
from tlsite.core.frames import (
    UNKNOWN_FILE,
    Frame,
    InternTable,
    drop_convert_frame_suffix,
    read_stack,
    shorten_filename,
)
from tlsite.core.handlers import CONFIG_FIELDS
from tlsite.core.model import Event, Trace

TRACES = all_corpus_traces()
each_trace = pytest.mark.parametrize("log", TRACES, ids=[trace_id(p) for p in TRACES])


# -- line accounting ----------------------------------------------------------------------------
@each_trace
def test_every_line_of_the_file_is_accounted_for(log: Path) -> None:
    stats = load(log).stats
    assert stats.total_lines == physical_lines(log)
    assert stats.accounted_lines == stats.total_lines, stats.outcomes


def other_rank_headers(log: Path, lines: list[int]) -> int:
    """How many of the noted other-rank lines are record headers (not payload lines)."""
    physical = log.read_bytes().split(b"\n")
    return sum(1 for n in set(lines) if not physical[n - 1].startswith(b"\t"))


def rankless_after_a_rank(log: Path) -> int:
    """Records naming no rank after one that named a rank. tlparse counts them as other_rank;
    tlsite keeps them (torch logs ``torch_version`` so in each rank's own log)."""
    ranked, count = False, 0
    for line in log.read_bytes().split(b"\n"):
        _, _, text = line.partition(b"] ")
        if line.startswith(b"\t") or not text.startswith(b"{"):
            continue
        try:
            envelope = json.loads(text)
        except ValueError:
            continue
        if not isinstance(envelope, dict) or "str" in envelope:
            continue
        if envelope.get("rank") is not None:
            ranked = True
        elif ranked:
            count += 1
    return count


@each_trace
def test_record_counts_match_tlparse_stats(log: Path) -> None:
    reference = run_tlparse(log)
    assert reference.stats is not None, reference.stderr[-2000:]
    theirs = reference.stats
    stats = load(log).stats
    # tlparse counts a line whose JSON does not parse (or is not an object) twice in fail_json,
    # and a valid envelope that does not fit its schema once; tlsite keeps the latter records.
    broken_json = stats.outcomes["bad_json"] + stats.outcomes["not_object"]
    schema_rejected = theirs.get("fail_json", 0) - 2 * broken_json
    assert schema_rejected >= 0
    rankless = rankless_after_a_rank(log)
    assert stats.outcomes["record"] == theirs.get("ok", 0) + schema_rejected + rankless
    assert stats.findings["md5_mismatch"] == theirs.get("fail_payload_md5", 0)
    noted = stats.lines_by_reason.get("other_rank", [])
    assert other_rank_headers(log, noted) == theirs.get("other_rank", 0) - rankless


def test_export_draft_records_tlparse_rejects_are_kept() -> None:
    """torch 2.13 logs list-valued ``frame_locals.locals``; tlparse drops those envelopes."""
    log = Path(__file__).parent / "fixtures" / "traces" / "export_draft" / "export_draft.log"
    if not log.is_file():
        pytest.skip(f"fixture missing: {log}")
    trace = load(log)
    kept = [e.type for u in trace.units.values() for e in u.events]
    assert "guard_added" in kept
    assert "propagate_real_tensors_provenance" in kept


def test_rank_filter_keeps_records_that_name_no_rank() -> None:
    log = next(p for p in TRACES if p.name.startswith("dedicated_log_torch_trace_rank_0_qs6"))
    trace = load(log)
    assert trace.rank == 0
    assert trace.stats.detected_rank == 0
    # Line 13 is torch_version, logged without a rank after rank 0 was seen: it is this rank's.
    assert trace.stats.outcomes["other_rank"] == 0
    assert trace.torch_version


# -- compile ids --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "display", "dirname"),
    [
        ((None, 0, 0, 0), "[0/0]", "-_0_0_0"),
        ((None, 0, 0, 1), "[0/0_1]", "-_0_0_1"),
        ((None, 1, 0, None), "[1/0]", "-_1_0_-"),
        ((0, None, None, None), "[!0/-/-]", "0_-_-_-"),
        ((0, 3, 1, 2), "[!0/3/1_2]", "0_3_1_2"),
        ((None, None, None, None), "[-/-]", "-_-_-_-"),
    ],
)
def test_compile_id_display_and_folder_name(
    fields: tuple[int | None, ...], display: str, dirname: str
) -> None:
    compile_id = CompileId(*fields)
    assert compile_id.display == display
    assert compile_id.dirname == dirname


def test_runtime_compile_id_without_attempt_is_listed_under_attempt_zero() -> None:
    raw = CompileId(None, 1, 0, None)
    assert raw.directory_key() == CompileId(None, 1, 0, 0)
    assert raw.directory_key().display == "[1/0]"
    assert raw.dirname == "-_1_0_-"  # the files keep the raw folder
    assert CompileId(None, 0, 0, 2).frame_key() == CompileId(None, 0, 0, 0)


@pytest.mark.parametrize("bad", [{"frame_id": "x"}, {"attempt": -1}, {"frame_id": 1.5}])
def test_malformed_compile_id_fields_give_no_compile_id(bad: dict[str, object]) -> None:
    assert CompileId.from_envelope({"artifact": {}, **bad}) is None


def test_compile_ids_of_real_records() -> None:
    trace = load(tlparse_input("comp_metrics.log"))
    assert [u.display for u in trace.units.values()] == [
        "[0/0]",
        "[0/0_1]",
        "[1/0]",
        "[1/0_1]",
        "[2/0]",
    ]
    assert trace.unit("[0/0_1]").dirname == "-_0_0_1"
    simple = load(tlparse_input("simple.log"))
    assert simple.unit("[0/0]").artifacts[0].path == "-_0_0_0/dynamo_output_graph_0.txt"
    assert simple.unit("[-/-]").artifacts == []  # id-less chromium events still make an entry


def test_compile_ids_of_logged_records_without_attempt_or_frame(tmp_path: Path) -> None:
    log = tmp_path / "ids.log"
    log.write_text(
        trace_lines({"compiled_autograd_graph": {}, "compiled_autograd_id": 0}, "graph")
        + trace_lines(
            {
                "artifact": {"name": "late", "encoding": "string"},
                "frame_id": 1,
                "frame_compile_id": 0,
            },
            "x",
        )
        + trace_lines({"artifact": {"name": "bad", "encoding": "string"}, "frame_id": "x"}, "y"),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    trace = write_compat(log, out)
    assert [u.display for u in trace.units.values()] == ["[!0/-/-]", "[1/0]", "(unknown)"]
    paths = [a.path for a in trace.artifacts()]
    assert paths == [
        "0_-_-_-/compiled_autograd_graph_0.txt",
        "-_1_0_-/late_1.txt",
        "unknown_5/bad_2.txt",
    ]
    for path in paths:
        assert (out / path).is_file()
    assert sorted(json.loads((out / "compile_directory.json").read_text())) == [
        "[!0/-/-]",
        "[1/0]",
        "unknown",
    ]
    assert trace.stats.findings["bad_compile_id"] == 1
    assert trace.stats.lines_by_reason["bad_compile_id"] == [5]


# -- string table -------------------------------------------------------------------------------
def test_string_table_has_null_for_ids_never_defined(tmp_path: Path) -> None:
    log = tmp_path / "strings.log"
    log.write_text(
        trace_lines({"str": ["/a/model.py", 0]})
        + trace_lines({"str": ["/a/train.py", 2]})
        + trace_lines(
            {
                "dynamo_start": {"stack": [{"line": 3, "name": "f", "filename": 2}]},
                "frame_id": 0,
                "frame_compile_id": 0,
                "attempt": 0,
            }
        )
        + trace_lines(
            {
                "dynamo_start": {"stack": [{"line": 4, "name": "g", "filename": 1}]},
                "frame_id": 1,
                "frame_compile_id": 0,
                "attempt": 0,
            }
        ),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    trace = write_compat(log, out)
    assert trace.strings.as_list() == ["/a/model.py", None, "/a/train.py"]
    first = (out / "raw.jsonl").read_text(encoding="utf-8").splitlines()[0]
    assert first == '{"string_table":["/a/model.py",null,"/a/train.py"]}'
    assert trace.stats.outcomes["interned"] == 2
    assert trace.unit("[0/0]").stack == [Frame("/a/train.py", 3, "f")]
    assert trace.unit("[1/0]").stack == [Frame(UNKNOWN_FILE, 4, "g")]


def test_string_table_of_a_log_without_str_records_is_one_null(tmp_path: Path) -> None:
    log = tmp_path / "nostr.log"
    log.write_text(trace_lines({"artifact": {"name": "a", "encoding": "string"}}, "x"), "utf-8")
    out = tmp_path / "out"
    write_compat(log, out)
    lines = (out / "raw.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines[0] == '{"string_table":[null]}'
    assert len(lines) == 2


def test_str_records_make_no_raw_jsonl_line_and_are_not_records(tmp_path: Path) -> None:
    out = tmp_path / "out"
    trace = write_compat(tlparse_input("comp_metrics.log"), out)
    table = json.loads((out / "raw.jsonl").read_text().splitlines()[0])["string_table"]
    assert len(table) == trace.stats.outcomes["interned"] == 14
    assert None not in table
    body = (out / "raw.jsonl").read_text().splitlines()[1:]
    assert not any('"str":' in line for line in body)


def test_intern_table_rejects_malformed_entries() -> None:
    table = InternTable()
    assert table.define(["/x.py", 0])
    assert not table.define(["/y.py", -1])
    assert not table.define(["/y.py"])
    assert not table.define([3, 1])
    assert table.lookup(0) == "/x.py"
    assert table.lookup(7) == UNKNOWN_FILE
    assert table.lookup("literal.py") == "literal.py"
    assert table.lookup(None) == UNKNOWN_FILE


# -- filename shortening ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("filename", "shown"),
    [
        ("/home/u/x-seed-nspid123_abc/user/model.py", "user/model.py"),
        ("/data/buck-out/gen/aot#link-tree/__run_lpar_main__.py", "__run_lpar_main__.py"),
        ("/data/x/aot#link-tree/torch/_dynamo/convert_frame.py", "torch/_dynamo/convert_frame.py"),
        ("/a-seed-nspid1/b-seed-nspid2/c.py", "b-seed-nspid2/c.py"),
        ("/data/me/pytorch/torch/_dynamo/utils.py", "/data/me/pytorch/torch/_dynamo/utils.py"),
        ("model.py", "model.py"),
    ],
)
def test_filename_shortening(filename: str, shown: str) -> None:
    assert shorten_filename(filename) == shown


def test_fbcode_frames_of_real_traces_are_shortened() -> None:
    xar = load(tlparse_input("artifacts.log")).unit("[0/0]").stack
    assert "-seed-nspid" in xar[0].filename
    assert xar[0].short_filename == "__run_xar_main__.py"
    assert xar[0].describe() == "__run_xar_main__.py:140 in <module>"
    par = load(tlparse_input("inductor_provenance_aot_cuda_log.txt")).unknown_stacks
    par = next(iter(par))
    assert "#link-tree/" in par[0].filename
    assert par[0].short_filename == "__run_lpar_main__.py"


def convert_frame_tail(prefix: str, names: list[str]) -> list[Frame]:
    return [Frame(f"{prefix}torch/_dynamo/convert_frame.py", 1, name) for name in names]


def test_convert_frame_suffix_is_dropped_only_after_shortening() -> None:
    user = [Frame("/w/model.py", 3, "forward")]
    tail = ["catch_errors", "_convert_frame", "_convert_frame_assert"]
    fbcode = user + convert_frame_tail("/x/aot#link-tree/", tail)
    assert drop_convert_frame_suffix(fbcode) == user
    calls = user + convert_frame_tail("/x/aot#link-tree/", ["__call__"] * 3)
    assert drop_convert_frame_suffix(calls) == user
    oss = user + convert_frame_tail("/data/pytorch/", tail)
    assert drop_convert_frame_suffix(oss) == oss


def test_stack_frames_tolerate_junk_entries() -> None:
    table = InternTable()
    table.define(["/w/model.py", 0])
    raw = [
        {"line": 3, "name": "f", "filename": 0, "loc": "y = f(x)"},
        "junk",
        7,
        {"line": "x", "filename": 9},
    ]
    frames = read_stack(raw, table)
    assert frames == [Frame("/w/model.py", 3, "f", "y = f(x)"), Frame(UNKNOWN_FILE, 0, "?")]
    assert read_stack("not a list", table) == []


def test_header_prefix_before_the_glog_part_is_accepted(tmp_path: Path) -> None:
    log = tmp_path / "prefixed.log"
    log.write_text(
        trace_lines(
            {"artifact": {"name": "a", "encoding": "string"}},
            "x",
            prefix="[rank0]:" + HEADER_PREFIX,
        ),
        encoding="utf-8",
    )
    trace = load(log)
    assert trace.stats.is_clean
    assert [a.path for a in trace.artifacts()] == ["-_-_-_-/a_0.txt"]


@pytest.mark.parametrize("log", torch_213_traces()[:2], ids=trace_id)
def test_every_describe_record_is_kept_and_read_back(log: Path) -> None:
    """Tensor/storage/source descriptions are spilled to disk, the units keep a packed
    index: each record comes back with its type, line and metadata, in log order."""
    logged = []
    for number, line in enumerate(log.read_text(encoding="utf-8").splitlines(), start=1):
        if "] {" not in line or '"describe_' not in line:
            continue
        envelope = json.loads(line.split("] ", 1)[1])
        kind = next(key for key in envelope if key.startswith("describe_"))
        logged.append((kind, number, envelope[kind]))
    assert logged, "no describe_* record in this trace"
    trace = load(log)
    try:
        read_back = [
            (event.type, event.line, event.metadata)
            for unit in trace.units.values()
            for event in trace.describe_records(unit)
        ]
        counts = sum((unit.event_counts for unit in trace.units.values()), Counter())
    finally:
        trace.close()
    assert sorted(read_back, key=lambda r: r[1]) == logged
    assert counts == Counter(kind for kind, _, _ in logged)


@pytest.mark.parametrize("log", torch_213_traces()[:2], ids=trace_id)
def test_metrics_kept_in_the_store_read_back_as_logged(log: Path) -> None:
    """compilation_metrics records wait in the payload store; each reads back equal to the
    logged object, and a unit's metric() is the last logged value of a field."""
    logged = []
    for number, line in enumerate(log.read_text(encoding="utf-8").splitlines(), start=1):
        if "] {" in line and '"compilation_metrics": {' in line:
            logged.append((number, json.loads(line.split("] ", 1)[1])["compilation_metrics"]))
    assert logged, "no compilation_metrics record in this trace"
    trace = load(log)
    try:
        kept = sorted(
            (event.line, _with_configs(trace, event), dict(event.metadata), unit)
            for unit in trace.units.values()
            for event in unit.compilation_metrics
        )
        assert [(line, meta) for line, meta, _, _ in kept] == logged
        # the config snapshots are kept apart (each distinct one stored once): the rest of
        # the record is its metadata
        kept = [
            (line, {k: v for k, v in meta.items() if k not in CONFIG_FIELDS}, as_mapping, unit)
            for line, meta, as_mapping, unit in kept
        ]
        assert all(meta == as_mapping for _, meta, as_mapping, _ in kept)
        line, meta, _, unit = kept[-1]
        assert unit.metric("frame_key") == meta.get("frame_key")
    finally:
        trace.close()


def _with_configs(trace: Trace, event: Event) -> dict:
    """A metrics record as logged: its fields and its config snapshots, read back."""
    meta = dict(event.meta)
    meta.update({name: trace.read_payload(ref) for name, ref in (event.configs or {}).items()})
    return meta

"""tlparse's acceptance tests 1–9 (spec §5), ported to tlsite's API, plus links and autotune.

tlparse's library tests check the map of output paths it would write; here the same paths are
checked in the folder ``CompatWriter`` fills. ``index.html`` and ``failures_and_restarts.html``
are tlparse's own HTML pages: tlsite's report replaces them and ``CompatWriter`` does not write
them, so those two prefixes are left out. Where tlparse's test runs with ``strict`` ("no parse
failures"), ``trace.stats.is_clean`` is asserted instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from corpus import (
    files_under,
    run_tlparse,
    tlparse_input,
    torch_213_traces,
    trace_id,
    trace_lines,
    write_compat,
)

from tlsite.core import CompileId, Trace

#: What every normal-mode (non-export) run writes besides the artifact files.
WHOLE_TRACE_FILES = ("compile_directory.json", "raw.jsonl", "raw.log", "chromium_events.json")


@dataclass
class Compat:
    trace: Trace
    out: Path
    files: set[str]

    def raw_jsonl(self) -> list[str]:
        return (self.out / "raw.jsonl").read_text(encoding="utf-8").splitlines()

    def json(self, name: str) -> Any:
        return json.loads((self.out / name).read_text(encoding="utf-8"))


def compat(tmp_path: Path, name: str, *, export_mode: bool | None = None) -> Compat:
    out = tmp_path / "out"
    trace = write_compat(tlparse_input(name), out, export_mode=export_mode)
    return Compat(trace, out, files_under(out))


def assert_prefixes(files: set[str], prefixes: Iterable[str]) -> None:
    missing = [p for p in prefixes if not any(f.startswith(p) for f in files)]
    assert not missing, f"no output starts with {missing}; wrote {sorted(files)}"


def assert_string_table_first(lines: list[str]) -> None:
    assert lines[0].startswith('{"string_table":'), lines[0][:80]
    assert isinstance(json.loads(lines[0])["string_table"], list)


SIMPLE_PREFIXES = (
    "-_0_0_0/aot_forward_graph",
    "-_0_0_0/dynamo_output_graph",
    "compile_directory.json",
    "-_0_0_0/inductor_post_grad_graph",
    "-_0_0_0/inductor_output_code",
)


# -- 1, 2 -------------------------------------------------------------------------------------
def test_simple_log_has_the_graphs_and_a_15_line_raw_jsonl(tmp_path: Path) -> None:
    result = compat(tmp_path, "simple.log")
    assert result.trace.stats.is_clean, result.trace.stats.summary()
    assert_prefixes(result.files, SIMPLE_PREFIXES)
    assert set(WHOLE_TRACE_FILES) <= result.files
    lines = result.raw_jsonl()
    assert len(lines) == 15
    assert_string_table_first(lines)


def test_corrupted_simple_log_still_gives_every_output_and_reports_the_md5_mismatch(
    tmp_path: Path,
) -> None:
    result = compat(tmp_path, "simple_corrupted_json.log")
    assert_prefixes(result.files, SIMPLE_PREFIXES)
    lines = result.raw_jsonl()
    assert len(lines) == 15
    assert_string_table_first(lines)
    stats = result.trace.stats
    assert stats.findings["md5_mismatch"] == 1
    assert not stats.is_clean  # what makes tlparse --strict fail on this input


# -- 3 ----------------------------------------------------------------------------------------
def test_compilation_metrics_log_outputs_raw_jsonl_and_exact_payload_files(
    tmp_path: Path,
) -> None:
    result = compat(tmp_path, "comp_metrics.log")
    assert result.trace.stats.is_clean, result.trace.stats.summary()
    assert_prefixes(
        result.files,
        (
            "-_0_0_1/dynamo_output_graph",
            "-_0_0_1/compilation_metrics",
            "-_1_0_1/dynamo_output_graph",
            "-_1_0_1/compilation_metrics",
            "-_2_0_0/dynamo_output_graph",
            "-_2_0_0/compilation_metrics",
            "compile_directory.json",
        ),
    )
    lines = result.raw_jsonl()
    assert len(lines) == 13
    assert_string_table_first(lines)

    payloads = {f for f in result.files if f.startswith("payloads/")}
    assert payloads == {
        "payloads/11726d08889974e57b12edee2812504e.txt",
        "payloads/29e35548d59d0e446f0c8a3f3010cc72.txt",
        "payloads/e18e1bcb67140c0a67427a6119556f7a.txt",
    }

    records = [json.loads(line) for line in lines]  # every line is valid JSON
    typed = [r for r in records if {"timestamp", "thread", "pathname"} <= r.keys()]
    assert typed, "no raw.jsonl line carries timestamp/thread/pathname"
    for record in typed:
        assert isinstance(record["timestamp"], str)
        assert isinstance(record["thread"], int)
        assert isinstance(record["pathname"], str)
        assert isinstance(record["lineno"], int)
    payload_files = [r["payload_filename"] for r in records if "payload_filename" in r]
    assert len(payload_files) >= 3
    missing = [f for f in payload_files if f not in result.files]
    assert not missing, f"payload_filename names files that were not written: {missing}"


# -- 4, 5, 6 ----------------------------------------------------------------------------------
def test_compilation_failure_log_lists_the_graph_and_the_failed_metrics(tmp_path: Path) -> None:
    result = compat(tmp_path, "comp_failure.log")
    assert result.trace.stats.is_clean, result.trace.stats.summary()
    assert_prefixes(
        result.files,
        ("-_0_0_0/dynamo_output_graph", "-_0_0_0/compilation_metrics", "compile_directory.json"),
    )
    unit = result.trace.unit("[0/0]")
    assert unit.metric("fail_type") == "BackendCompilerFailed"
    assert "broken backend" in unit.metric("fail_reason")


def test_artifact_log_writes_the_cache_hash_artifact(tmp_path: Path) -> None:
    result = compat(tmp_path, "artifacts.log")
    assert result.trace.stats.is_clean, result.trace.stats.summary()
    assert_prefixes(result.files, ("-_0_0_0/fx_graph_cache_hash",))


def test_chromium_event_log_collects_every_event_into_chromium_events_json(
    tmp_path: Path,
) -> None:
    result = compat(tmp_path, "chromium_events.log")
    assert result.trace.stats.is_clean, result.trace.stats.summary()
    assert_prefixes(result.files, ("chromium_events.json",))
    events = result.json("chromium_events.json")
    assert isinstance(events, list)
    assert events
    assert len(events) == result.trace.chromium_events
    assert all(isinstance(e, dict) and "ph" in e for e in events)


# -- 7 ----------------------------------------------------------------------------------------
def test_cache_hit_miss_artifacts_keep_tlparses_exact_numbers_and_marks(tmp_path: Path) -> None:
    result = compat(tmp_path, "cache_hit_miss.log")
    assert result.trace.stats.is_clean, result.trace.stats.summary()
    expected = {
        "-_1_0_0/fx_graph_cache_miss_33.json": "❌",
        "-_1_0_0/fx_graph_cache_miss_9.json": "❌",
        "-_1_0_0/fx_graph_cache_hit_20.json": "✅",
    }
    assert set(expected) <= result.files
    assert "compile_directory.json" in result.files
    listed = {
        a["url"]: a["suffix"]
        for unit in result.json("compile_directory.json").values()
        for a in unit["artifacts"]
    }
    for path, mark in expected.items():
        assert listed[path] == mark, path


# -- 8, 9 (export) ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["export.log", "export_guard_added.log"])
def test_draft_export_log_is_detected_and_writes_the_export_report_files(
    tmp_path: Path, name: str
) -> None:
    result = compat(tmp_path, name)  # export mode is not forced
    assert result.trace.export_mode, "draft-export trace not recognised"
    assert_prefixes(
        result.files, ("-_-_-_-/exported_program", "-_-_-_-/symbolic_guard_information")
    )
    # tlparse reads both logs with one payload MD5 mismatch and (in export mode) ignores it.
    assert result.trace.stats.findings["md5_mismatch"] == 1
    assert result.trace.stats.skipped_lines == 0


def test_export_log_gives_exactly_tlparses_numbered_export_files(tmp_path: Path) -> None:
    result = compat(tmp_path, "export.log")
    numbered = {f for f in result.files if f.startswith("-_-_-_-/")}
    assert numbered == {
        "-_-_-_-/exported_program_1.txt",
        "-_-_-_-/symbolic_guard_information_0.html",
    }


def test_ordinary_log_is_not_taken_for_a_draft_export(tmp_path: Path) -> None:
    assert not compat(tmp_path, "simple.log").trace.export_mode


# -- links.log --------------------------------------------------------------------------------
def test_link_record_takes_a_number_and_is_listed_with_its_url(tmp_path: Path) -> None:
    result = compat(tmp_path, "links.log")
    assert result.trace.stats.is_clean, result.trace.stats.summary()
    assert "-_0_0_0/dynamo_output_graph_0.txt" in result.files
    assert "-_0_0_0/aot_forward_graph_2.txt" in result.files
    assert not any("_1." in f for f in result.files if f.startswith("-_0_0_0/"))
    link = result.json("compile_directory.json")["[0/0]"]["artifacts"][1]
    assert link == {
        "name": "manifold_url",
        "number": 1,
        "readable_url": None,
        "suffix": "",
        "url": "https://www.google.com",
    }


# -- autotune_with_compile_id.log -------------------------------------------------------------
def test_runtime_records_without_attempt_join_their_compile_not_a_second_entry(
    tmp_path: Path,
) -> None:
    result = compat(tmp_path, "autotune_with_compile_id.log")
    assert result.trace.stats.is_clean, result.trace.stats.summary()
    displays = [unit.display for unit in result.trace.units.values()]
    assert displays.count("[0/0]") == 1, displays
    assert sorted(result.json("compile_directory.json")) == ["[-/-]", "[0/0]"]

    runtime = [
        m for m in result.trace.unit("[0/0]").metrics if m.type == "compilation_metrics_runtime"
    ]
    assert len(runtime) == 1
    assert runtime[0].compile_id == CompileId(None, 0, 0, None)  # kept as logged
    # The runtime record has no payload, so (like tlparse) no "-_0_0_-" folder is made.
    assert not any(f.startswith("-_0_0_-/") for f in result.files)
    assert any(f.startswith("-_0_0_0/compilation_metrics_") for f in result.files)


ATTEMPTLESS_LOG = trace_lines(
    {
        "artifact": {"name": "autotune_log", "encoding": "string"},
        "frame_id": 1,
        "frame_compile_id": 0,
        "attempt": 0,
    },
    "compiled",
) + trace_lines(
    {
        "artifact": {"name": "runtime_autotune", "encoding": "string"},
        "frame_id": 1,
        "frame_compile_id": 0,
    },
    "autotuned at runtime",
)


def test_files_of_records_without_attempt_live_in_the_dash_folder_under_one_entry(
    tmp_path: Path,
) -> None:
    log = tmp_path / "attemptless.log"
    log.write_text(ATTEMPTLESS_LOG, encoding="utf-8")
    out = tmp_path / "out"
    trace = write_compat(log, out)
    assert [unit.display for unit in trace.units.values()] == ["[1/0]"]
    files = files_under(out)
    assert "-_1_0_0/autotune_log_0.txt" in files
    assert "-_1_0_-/runtime_autotune_1.txt" in files
    urls = [
        a["url"]
        for a in json.loads((out / "compile_directory.json").read_text())["[1/0]"]["artifacts"]
    ]
    assert urls == ["-_1_0_0/autotune_log_0.txt", "-_1_0_-/runtime_autotune_1.txt"]


def test_tlparse_also_puts_attemptless_files_in_the_dash_folder(tmp_path: Path) -> None:
    log = tmp_path / "attemptless.log"
    log.write_text(ATTEMPTLESS_LOG, encoding="utf-8")
    reference = run_tlparse(log)
    assert reference.returncode == 0, reference.stderr
    assert {"-_1_0_0/autotune_log_0.txt", "-_1_0_-/runtime_autotune_1.txt"} <= reference.files
    assert sorted(reference.json("compile_directory.json")) == ["[1/0]"]


@pytest.mark.parametrize("log", torch_213_traces()[:3], ids=trace_id)
def test_compile_directory_lists_every_output_in_tlparses_layout(log: Path, tmp_path: Path) -> None:
    """Written one compile id at a time, it must still read as one pretty-printed object:
    every compile id's key, each numbered output with its path, sorted keys, 2-space indent."""
    trace = write_compat(log, tmp_path)
    text = (tmp_path / "compile_directory.json").read_text(encoding="utf-8")
    directory = json.loads(text)
    assert text == json.dumps(directory, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert set(directory) == {unit.key for unit in trace.units.values()}
    listed = [entry for unit in directory.values() for entry in unit["artifacts"]]
    outputs = [a for unit in trace.units.values() for a in unit.artifacts]
    assert len(listed) == len(outputs) > len(directory) > 1
    assert {e["url"] for e in listed if not e["url"].startswith("http")} == {
        a.path for a in outputs if not a.is_link
    }
    assert all((tmp_path / e["url"]).is_file() for e in listed if not e["url"].startswith("http"))


def test_compile_directory_of_a_trace_without_compile_ids_is_an_empty_object(
    tmp_path: Path,
) -> None:
    log = tmp_path / "no_records.log"
    log.write_text("not a trace line\n")
    write_compat(log, tmp_path / "out")
    assert (tmp_path / "out" / "compile_directory.json").read_text(encoding="utf-8") == "{}\n"

"""Differential tests: tlsite's tlparse-compatible outputs against tlparse 0.4.3 itself.

For every real trace (tlparse's inputs, the torch 2.13 corpus and our fixtures) both tools
write their outputs and these must agree: the same compile ids, every file tlparse writes at
the same path, byte-identical ``.txt``/``.json`` artifacts and payloads, and equal
``compile_directory.json``, ``chromium_events.json``, ``raw.log`` and ``raw.jsonl``.

Documented differences (deliberate, spec §9):

* ``index.html`` and ``failures_and_restarts.html`` are tlparse's HTML report; tlsite's site
  replaces them and ``CompatWriter`` does not write them.
* ``raw.jsonl``: tlsite drops the leading space tlparse leaves in ``pathname`` and takes the
  year from the trace instead of "now"; everything else on every line is equal.
* Draft-export traces are detected by tlsite (tlparse needs ``-e``). They are compared twice:
  tlsite forced to normal mode against plain ``tlparse``, and tlsite's default (export) mode
  against ``tlparse -e``, which writes only ``index.html``, the compile folders and
  ``payloads/``, so only those files are compared.
* Floats in ``raw.jsonl`` are compared to 1e-15 relative: tlparse's JSON reader is not
  correctly rounded (``links.log`` logs ``"start_time": 1715885247.9018195`` and tlparse writes
  ``1715885247.9018197``); tlsite keeps the logged value.
* tlparse rejects whole envelopes whose metadata does not fit its schema (counted as
  ``fail_json``; torch 2.13's list-valued ``frame_locals.locals`` is one case), tlsite keeps
  them. Where that changes export-mode outputs, tlparse's later numbers are lower; then files
  are matched by folder and name without the ``_N`` number.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
from corpus import (
    TlparseRun,
    differential_traces,
    files_under,
    run_tlparse,
    trace_id,
    write_compat,
)

from tlsite.core import Trace

TRACES = differential_traces()
TLPARSE_REPORT_PAGES = {"index.html", "failures_and_restarts.html"}
#: Whole-trace files compared as parsed values rather than bytes.
PARSED_FILES = {"compile_directory.json", "chromium_events.json", "raw.jsonl"}
EXPORT_RECORD_TYPES = {"exported_program", "missing_fake_kernel", "mismatched_fake_kernel"}
_NUMBER = re.compile(r"_\d+(?=\.[^./]+$)")


class Ours:
    """tlsite's outputs for one trace and mode, written once per test process."""

    _cache: ClassVar[dict[tuple[Path, bool | None], tuple[Trace, Path]]] = {}

    @classmethod
    def get(
        cls, log: Path, factory: pytest.TempPathFactory, *, export_mode: bool | None = None
    ) -> tuple[Trace, Path]:
        key = (log, export_mode)
        if key not in cls._cache:
            out = factory.mktemp(f"ours-{log.stem}")
            cls._cache[key] = (write_compat(log, out, export_mode=export_mode), out)
        return cls._cache[key]


def normal_mode(log: Path, factory: pytest.TempPathFactory) -> tuple[Trace, Path, TlparseRun]:
    """tlsite in normal mode (forced, so draft-export traces compare too) and plain tlparse."""
    reference = run_tlparse(log)
    assert reference.returncode == 0, reference.stderr[-2000:]
    trace, out = Ours.get(log, factory, export_mode=False)
    return trace, out, reference


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def has_export_records(log: Path) -> bool:
    """Whether the log holds a record only draft export writes (read independently of core)."""
    with open(log, "rb") as stream:
        for raw in stream:
            _, sep, body = raw.partition(b"] {")
            if sep and body[:1] == b'"':
                first_key = body[1:].split(b'"', 1)[0].decode("utf-8", "replace")
                if first_key in EXPORT_RECORD_TYPES:
                    return True
    return False


EXPORT_TRACES = [log for log in TRACES if has_export_records(log)]
each_trace = pytest.mark.parametrize("log", TRACES, ids=[trace_id(p) for p in TRACES])
each_export_trace = pytest.mark.parametrize(
    "log", EXPORT_TRACES, ids=[trace_id(p) for p in EXPORT_TRACES]
)


# -- normal mode --------------------------------------------------------------------------------
@each_trace
def test_same_compile_ids_as_tlparse(log: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    trace, out, reference = normal_mode(log, tmp_path_factory)
    theirs = set(reference.json("compile_directory.json"))
    assert set(read_json(out / "compile_directory.json")) == theirs
    assert {unit.key for unit in trace.units.values()} == theirs


@each_trace
def test_every_file_tlparse_writes_exists_at_the_same_path(
    log: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, out, reference = normal_mode(log, tmp_path_factory)
    missing = sorted(reference.files - TLPARSE_REPORT_PAGES - files_under(out))
    assert not missing, f"{len(missing)} tlparse outputs missing, e.g. {missing[:10]}"


@each_trace
def test_txt_and_json_outputs_are_byte_identical(
    log: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, out, reference = normal_mode(log, tmp_path_factory)
    common = reference.files & files_under(out)
    compared = sorted(f for f in common if f.endswith((".txt", ".json")) and f not in PARSED_FILES)
    differing = [f for f in compared if (reference.out / f).read_bytes() != (out / f).read_bytes()]
    assert not differing, f"{len(differing)} of {len(compared)} files differ, e.g. {differing[:10]}"


@each_trace
def test_compile_directory_json_equals_tlparses(
    log: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, out, reference = normal_mode(log, tmp_path_factory)
    assert read_json(out / "compile_directory.json") == reference.json("compile_directory.json")


@each_trace
def test_chromium_events_json_equals_tlparses(
    log: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, out, reference = normal_mode(log, tmp_path_factory)
    assert read_json(out / "chromium_events.json") == reference.json("chromium_events.json")


@each_trace
def test_raw_log_is_an_exact_copy(log: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    _, out, reference = normal_mode(log, tmp_path_factory)
    assert (out / "raw.log").read_bytes() == log.read_bytes()
    assert (reference.out / "raw.log").read_bytes() == log.read_bytes()


def comparable_raw_line(line: str) -> dict[str, Any]:
    """A raw.jsonl line without the two documented differences (pathname space, year)."""
    value = json.loads(line)
    if isinstance(value, dict) and "timestamp" in value:
        value["timestamp"] = value["timestamp"][4:]  # "-MM-DDTHH:MM:SS.uuuuuuZ"
        value["pathname"] = value["pathname"].strip()
    return value


def same_value(a: Any, b: Any) -> bool:
    """JSON values equal, floats to 1e-15 relative (tlparse misrounds some floats)."""
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and math.isclose(a, b, rel_tol=1e-15)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@each_trace
def test_raw_jsonl_has_the_same_lines_as_tlparse(
    log: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, out, reference = normal_mode(log, tmp_path_factory)
    ours = (out / "raw.jsonl").read_text(encoding="utf-8").splitlines()
    theirs = (reference.out / "raw.jsonl").read_text(encoding="utf-8").splitlines()
    assert ours[0] == theirs[0], "string tables differ"
    assert len(ours) == len(theirs)
    for number, (mine, other) in enumerate(zip(ours, theirs, strict=True), 1):
        mine_value, other_value = comparable_raw_line(mine), comparable_raw_line(other)
        assert same_value(mine_value, other_value), (
            f"raw.jsonl line {number}: ours {mine[:300]} … tlparse {other[:300]}"
        )


@each_trace
def test_raw_jsonl_timestamps_and_pathnames_are_tidied(
    log: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, out, _ = normal_mode(log, tmp_path_factory)
    with open(out / "raw.jsonl", encoding="utf-8") as lines:
        next(lines)
        for number, line in enumerate(lines, 2):
            value = json.loads(line)
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", value["timestamp"])
            assert value["pathname"] == value["pathname"].strip(), f"line {number}"


# -- export mode --------------------------------------------------------------------------------
@each_trace
def test_export_mode_is_detected_exactly_for_draft_export_traces(
    log: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    trace, _ = Ours.get(log, tmp_path_factory)
    assert trace.export_mode == has_export_records(log)


def without_number(path: str) -> str:
    return _NUMBER.sub("", path)


@each_export_trace
def test_export_report_files_match_tlparse_export_mode(
    log: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    trace, out = Ours.get(log, tmp_path_factory)
    assert trace.export_mode
    reference = run_tlparse(log, export=True)
    assert reference.returncode == 0, reference.stderr[-2000:]
    theirs = reference.files - {"index.html"}
    assert theirs, "tlparse -e wrote no export files"
    ours = files_under(out)
    normal = run_tlparse(log)
    if (normal.stats or {}).get("fail_json"):
        # tlparse dropped records tlsite keeps: match files without their numbers.
        renamed = {without_number(f): f for f in ours}
        assert {without_number(f) for f in theirs} <= set(renamed)
        pairs = [(f, renamed[without_number(f)]) for f in theirs]
    else:
        assert theirs <= ours, sorted(theirs - ours)
        pairs = [(f, f) for f in theirs]
    for their_file, our_file in pairs:
        if their_file.endswith((".txt", ".json")):
            assert (out / our_file).read_bytes() == (reference.out / their_file).read_bytes(), (
                our_file
            )

"""A ``TORCH_DTRACE`` run's folder: one process, two logs (the main log and draft export's).

Real traces in ``tests/fixtures/traces/dtrace_two_logs/`` (torch 2.15; ``torch-2.10/`` below it:
torch 2.10), made by ``tests/fixtures/scripts/dtrace_two_logs.py``: ``torch.compile`` first
(the main log opens and interns the script's file name), then ``torch.export.draft_export``,
whose own trace handler writes a second log whose stacks use that file name's id. Expected
lines come from the script and the raw logs, never from tlsite's output.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from corpus import FIXTURE_TRACES
from test_site import article_text, tables

from tlsite.cli import build
from tlsite.core import InputError, load
from tlsite.core.analysis.export_report import export_failures
from tlsite.core.frames import UNKNOWN_FILE
from tlsite.core.source import resolve_input

FOLDER = FIXTURE_TRACES / "dtrace_two_logs"
FOLDER_210 = FOLDER / "torch-2.10"
SCRIPT = FIXTURE_TRACES.parent / "scripts" / "dtrace_two_logs.py"


def main_and_draft(folder: Path) -> tuple[Path, Path]:
    """(main log, draft-export log), told apart by their records, not by tlsite."""
    logs = sorted(folder.glob("*.log"))
    draft = [p for p in logs if '{"exported_program"' in p.read_text(encoding="utf-8")]
    assert len(logs) == 2 and len(draft) == 1
    return next(p for p in logs if p not in draft), draft[0]


def line_count(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def script_line(text: str) -> str:
    numbers = [
        n
        for n, line in enumerate(SCRIPT.read_text(encoding="utf-8").splitlines(), 1)
        if text in line
    ]
    assert len(numbers) == 1
    return f"dtrace_two_logs.py:{numbers[0]}"


@pytest.mark.parametrize("folder", [FOLDER, FOLDER_210], ids=["2.15", "2.10"])
def test_one_process_folder_is_read_as_one_log_main_first(folder: Path) -> None:
    main, draft = main_and_draft(folder)
    with resolve_input(folder) as resolved:
        assert len(resolved.logs) == 1 and not resolved.is_multi_rank
        parts = resolved.logs[0].parts
    assert [(p.name, p.first_line, p.last_line) for p in parts] == [
        (main.name, 1, line_count(main)),
        (draft.name, line_count(main) + 1, line_count(main) + line_count(draft)),
    ]


@pytest.mark.parametrize("folder", [FOLDER, FOLDER_210], ids=["2.15", "2.10"])
def test_draft_export_stacks_name_the_file_interned_in_the_main_log(folder: Path) -> None:
    trace = load(folder)
    main, draft = main_and_draft(folder)
    assert trace.stats.total_lines == line_count(main) + line_count(draft)
    assert trace.stats.skipped_lines == 0
    guard = next(f for f in export_failures(trace) if f.is_guard)
    frames = [frame.describe() for frame in guard.user_stack]
    assert any(script_line("if k > 2:") in frame for frame in frames), frames
    assert not [f for f in frames if UNKNOWN_FILE in f or "another log" in f], frames
    assert not trace.strings.elsewhere


def test_draft_log_alone_says_its_file_names_were_interned_elsewhere() -> None:
    _, draft = main_and_draft(FOLDER)
    trace = load(draft)
    guard = next(f for f in export_failures(trace) if f.is_guard)
    frames = [frame.describe() for frame in guard.user_stack]
    line = script_line("if k > 2:").split(":")[1]
    # the script's file name is id 1 in the main log: `{"str": ["…/dtrace_two_logs.py", 1]}`
    assert f"(file #1, interned in another log):{line} in forward" in frames, frames
    assert trace.strings.elsewhere == {1}


def logs_of_two_processes(tmp_path: Path) -> Path:
    """The 2.15 main log and the 2.10 draft-export log: two pids."""
    folder = tmp_path / "two"
    folder.mkdir()
    shutil.copy(main_and_draft(FOLDER)[0], folder)
    shutil.copy(main_and_draft(FOLDER_210)[1], folder)
    return folder


def test_logs_of_different_processes_are_still_refused(tmp_path: Path) -> None:
    folder = logs_of_two_processes(tmp_path)
    with pytest.raises(InputError, match=r": 2 logs found; pass --latest .* or name one: "):
        resolve_input(folder)


def test_same_pid_but_a_fresh_intern_table_is_another_process(tmp_path: Path) -> None:
    # a log copied beside itself: same pid, but both start interning at id 0 (pid reuse, as two
    # container runs both given pid 7 would look)
    main, _ = main_and_draft(FOLDER)
    folder = tmp_path / "copies"
    folder.mkdir()
    shutil.copy(main, folder / "a.log")
    shutil.copy(main, folder / "b.log")
    with pytest.raises(InputError, match=r": 2 logs found; pass --latest"):
        resolve_input(folder)


def test_zip_and_gzip_of_the_folder_join_too(tmp_path: Path) -> None:
    main, draft = main_and_draft(FOLDER)
    archive = tmp_path / "dtrace.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(main, main.name)
        zf.write(draft, draft.name)
    gz = tmp_path / "gz"
    gz.mkdir()
    for log in (main, draft):
        (gz / f"{log.name}.gz").write_bytes(gzip.compress(log.read_bytes()))
    for path in (archive, gz):
        trace = load(path)
        assert trace.stats.total_lines == line_count(main) + line_count(draft)
        guard = next(f for f in export_failures(trace) if f.is_guard)
        assert any(script_line("if k > 2:") in f.describe() for f in guard.user_stack)


@pytest.mark.slow
def test_built_folder_report_is_strict_clean_and_says_which_lines_came_from_where(
    tmp_path: Path,
) -> None:
    main, draft = main_and_draft(FOLDER)
    outcome = build(str(FOLDER), tmp_path / "site", make_zip=True)
    assert outcome.clean, outcome.why_not_clean  # what --strict checks
    site = outcome.site
    assert (site / "raw.log").read_bytes() == main.read_bytes() + draft.read_bytes()
    health = (site / "health.html").read_text(encoding="utf-8")
    rows = [[c.text for c in row] for t in tables(health) for row in t]
    n, m = line_count(main), line_count(draft)
    assert [main.name, str(n), f"1–{n}"] in rows
    assert [draft.name, str(m), f"{n + 1}–{n + m}"] in rows
    with zipfile.ZipFile(outcome.bundle) as zf:
        manifest = json.loads(zf.read(f"{site.name}/manifest.json"))
        raw = zf.read(f"{site.name}/raw.log")
    assert raw == main.read_bytes() + draft.read_bytes()
    assert manifest["raw_log_lines"] == [
        {"log": main.name, "first": 1, "last": n},
        {"log": draft.name, "first": n + 1, "last": n + m},
    ]
    overview = (site / "index.html").read_text(encoding="utf-8")
    facts = {row[0].text: row[1] for t in tables(overview) for row in t if len(row) == 2}
    assert facts["Log"].text.startswith(f"{n + m} lines from 2 logs of one process, ")
    assert "health.html" in facts["Log"].hrefs
    export = article_text((site / "export_report.html").read_text(encoding="utf-8"))
    assert re.search(re.escape(script_line("if k > 2:")) + r" in forward", export)
    assert UNKNOWN_FILE not in export and "another log" not in export


@pytest.mark.slow
def test_draft_log_alone_parse_health_names_the_missing_ids(tmp_path: Path) -> None:
    _, draft = main_and_draft(FOLDER)
    outcome = build(str(draft), tmp_path / "site")
    health = article_text((outcome.site / "health.html").read_text(encoding="utf-8"))
    assert "Stacks name 1 file by an id this log never defines (#1)" in health
    assert UNKNOWN_FILE not in article_text(
        (outcome.site / "export_report.html").read_text(encoding="utf-8")
    )


@pytest.mark.slow
@pytest.mark.browser
def test_merged_report_in_chromium_shows_both_logs_and_real_stacks(
    tmp_path: Path, open_site: Any
) -> None:
    main, draft = main_and_draft(FOLDER)
    site = build(str(FOLDER), tmp_path / "site").site
    page, report = open_site(site / "health.html")
    shown = page.inner_text("article")
    n, m = line_count(main), line_count(draft)
    assert f"{main.name}\t{n}\t1–{n}" in shown and f"{draft.name}\t{m}\t{n + 1}–{n + m}" in shown
    page, report2 = open_site(site / "export_report.html")
    where = page.locator("article table").first.inner_text()
    assert (
        f"/home/user/tlsite/tests/fixtures/scripts/{script_line('if k > 2:')} in forward" in where
    )
    for seen in (report, report2):
        assert not (seen.outside_requests or seen.console_errors or seen.dialogs)


def test_draft_export_found_after_a_main_log_longer_than_the_prescan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the draft export's records come after the whole main log, which may be gigabytes: the
    # start of every joined log is looked at, not only the start of the whole
    main, _ = main_and_draft(FOLDER)
    monkeypatch.setattr("tlsite.core.PRESCAN_BYTES", main.stat().st_size // 2)
    assert load(FOLDER).export_mode


def test_a_cut_gzip_main_log_is_said_at_its_own_last_line(tmp_path: Path) -> None:
    main, draft = main_and_draft(FOLDER)
    folder = tmp_path / "cut"
    folder.mkdir()
    packed = gzip.compress(main.read_bytes())
    (folder / f"{main.name}.gz").write_bytes(packed[: len(packed) * 2 // 3])  # a cut download
    shutil.copy(draft, folder)
    trace = load(folder)
    main_part, draft_part = trace.stats.parts
    assert draft_part.first_line == main_part.last_line + 1
    assert draft_part.lines == line_count(draft)
    assert trace.stats.lines_by_reason["input_cut"] == [main_part.last_line]
    (cut,) = [s.detail for s in trace.stats.samples if s.reason == "input_cut"]
    assert cut.startswith(f"{main.name}.gz: the gzip data ends early after ")
    assert not trace.stats.is_clean  # --strict fails on it

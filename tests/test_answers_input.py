"""Issue #16, input side: a healthy torchrun trace reads as healthy, a file that is not a trace
is refused in one line, ``--overwrite`` never deletes anything of the user's, and the terminal
says what was found in words a user reads (MB, graph breaks, the ``build`` command)."""

from __future__ import annotations

import io
import random
import re
import zipfile
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES, TORCH_213, all_corpus_traces, trace_id
from test_cli import run_tlsite

from tlsite import cli
from tlsite.core import load

MULTI_RANK = TORCH_213 / "multi_rank"
SIMPLE = next(iter(sorted((TORCH_213 / "simple").glob("*.log"))), TORCH_213 / "simple")
COMPILE_ERROR = FIXTURE_TRACES / "compile_error" / "compile_error.log"


def main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main([*args, "--no-browser"] if args[0] in ("build", "run") else args)
    out = capsys.readouterr()
    return code, out.out, out.err


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (folders by their files)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def glance(html: str, row: str) -> str:
    """The text of an "At a glance" row of an overview page."""
    match = re.search(rf'<th scope="row">{row}</th>\s*<td>(.*?)</td>', html, re.S)
    assert match is not None, row
    return re.sub(r"<[^>]+>", "", match[1])


# -- 5. a torchrun trace ---------------------------------------------------------------------------
@pytest.mark.slow
def test_torchrun_rank_logs_build_clean_with_their_torch_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "site"
    code, stdout, err = main(
        ["build", str(MULTI_RANK), "-o", str(out), "--no-zip", "--strict"], capsys
    )
    assert code == cli.EXIT_OK, err + stdout
    rank_lines = [line for line in stdout.splitlines() if " records from " in line]
    assert len(rank_lines) == 2, stdout
    assert not any("skipped" in line for line in rank_lines), rank_lines
    for rank, line in enumerate(rank_lines):
        page = (out / f"rank_{rank}" / "index.html").read_text(encoding="utf-8")
        assert glance(page, "PyTorch") == "2.13.0+cpu"
        assert "nothing skipped" in glance(page, "Log")
        # each rank's line says what its report found, with its overview's counts
        breaks = re.fullmatch(r"(\d+) distinct, hit (\d+) times", glance(page, "Graph breaks"))
        assert breaks is not None
        assert line.endswith(
            f"; found {breaks[1]} graph breaks (hit {breaks[2]} times), "
            f"{glance(page, 'Compilation failures')} compilation failures, "
            f"{glance(page, 'Recompiles')} recompiles"
        ), line


@pytest.mark.parametrize("log", sorted(MULTI_RANK.glob("*.log")), ids=lambda p: p.name[:30])
def test_a_rank_log_read_alone_keeps_the_records_that_name_no_rank(log: Path) -> None:
    trace = load(log)
    try:
        assert trace.stats.is_clean, trace.stats.summary()
        assert trace.torch_version == "2.13.0+cpu"
        assert trace.rank is not None
    finally:
        trace.close()


# -- 6. not a trace --------------------------------------------------------------------------------
NOT_TRACES = {
    "text": (
        "notes.txt",
        b"Meeting notes: ask about the torch.compile slowdown in the data loader next week\n"
        b"second line\n",
        '"Meeting notes: ask about the torch.compile slowdown in the d…"',  # 60 characters,
    ),
    "random_bytes": (
        "weights.bin",
        bytes(random.Random(16).randrange(256) for _ in range(64 * 1024)),
        None,  # its first line, escaped: checked for shape below
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_TRACES))
def test_a_file_that_is_not_a_trace_is_one_line_and_exit_1(tmp_path: Path, name: str) -> None:
    file_name, data, quoted = NOT_TRACES[name]
    given = tmp_path / file_name
    given.write_bytes(data)
    out = tmp_path / "report"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = run_tlsite("build", str(given), "-o", str(out), "--no-browser", cwd=cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"tlsite: error: {given}: not a TORCH_TRACE log")
    assert done.stdout == ""  # no "No compilation failures … attach it to a GitHub issue"
    first = re.search(r'it starts with (".*")$', lines[0])
    assert first is not None, lines[0]
    if quoted is not None:
        assert first[1] == quoted
    else:
        assert len(first[1]) < 4 * 60 and first[1].endswith('…"')
        assert first[1].isprintable()
    assert not out.exists() and not out.with_name("report.zip").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", file_name]


def test_a_file_of_blank_lines_is_not_a_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = tmp_path / "blank.log"
    given.write_bytes(b"\n\n\r\n")
    code, _, err = main(["build", str(given), "-o", str(tmp_path / "r")], capsys)
    assert code == cli.EXIT_FAILED
    assert (
        err.strip() == f"tlsite: error: {given}: not a TORCH_TRACE log: it holds only blank lines"
    )


def test_markdown_of_a_file_that_is_not_a_trace_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = tmp_path / "notes.txt"
    given.write_text("just text\n", encoding="utf-8")
    code, _, err = main(["markdown", str(given), "-o", str(tmp_path / "md")], capsys)
    assert code == cli.EXIT_FAILED
    assert f"{given}: not a TORCH_TRACE log" in err and '"just text"' in err
    assert not (tmp_path / "md").exists()


def test_a_damaged_trace_with_records_left_still_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = tmp_path / "damaged.log"
    given.write_bytes(b"some garbage line\n\x00\xff\xfe\n" + SIMPLE.read_bytes())
    code, stdout, err = main(["build", str(given), "-o", str(tmp_path / "r"), "--no-zip"], capsys)
    assert code == cli.EXIT_OK, err
    assert "2 lines skipped" in stdout


@pytest.mark.slow
@pytest.mark.parametrize("log", all_corpus_traces(), ids=trace_id)
def test_every_real_trace_is_a_trace(log: Path) -> None:
    trace = load(log)
    try:
        assert trace.stats.not_a_trace() is None
    finally:
        trace.close()


# -- 7. --overwrite -------------------------------------------------------------------------------
def build_args(trace: Path, out: Path, *more: str) -> list[str]:
    return ["build", str(trace), "-o", str(out), "--overwrite", *more]


def test_overwrite_refuses_an_unrelated_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "my_project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "model.py").write_text("import torch\n", encoding="utf-8")
    (project / "README.md").write_text("mine\n", encoding="utf-8")
    before = snapshot(tmp_path)
    code, stdout, err = main(build_args(SIMPLE, project), capsys)
    assert code == cli.EXIT_USAGE
    assert err.count("\n") == 1 and str(project) in err and "not a folder tlsite wrote" in err
    assert stdout == ""
    assert snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_project"]  # no zip, no staging


@pytest.mark.parametrize("where", ["the_trace", "its_folder", "a_parent"])
def test_overwrite_never_replaces_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    folder = tmp_path / "runs" / "today"
    folder.mkdir(parents=True)
    trace = folder / "trace.log"
    trace.write_bytes(SIMPLE.read_bytes())
    out = {"the_trace": trace, "its_folder": folder, "a_parent": tmp_path / "runs"}[where]
    before = snapshot(tmp_path)
    code, _, err = main(build_args(trace, out, "--bundle", "none"), capsys)
    assert code == cli.EXIT_USAGE, err
    assert err.count("\n") == 1 and "the input trace" in err, err
    assert snapshot(tmp_path) == before


def test_overwrite_never_replaces_a_folder_that_holds_the_input_even_when_tlsite_wrote_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    assert main(["build", str(SIMPLE), "-o", str(site), "--no-zip"], capsys)[0] == 0
    raw = site / "raw.log"  # the input log, copied into the report
    assert raw.is_file()
    before = snapshot(tmp_path)
    code, _, err = main(build_args(raw, site, "--no-zip"), capsys)
    assert code == cli.EXIT_USAGE and "holds the input trace" in err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("bundle", ["none", "zip", pytest.param("7z", marks=pytest.mark.slow)])
def test_overwrite_replaces_a_report_tlsite_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bundle: str
) -> None:
    site = tmp_path / "site"
    args = ["build", str(SIMPLE), "-o", str(site), "--bundle", bundle]
    assert main(args, capsys)[0] == 0
    (site / "index.html").write_text("from an older build\n", encoding="utf-8")
    code, _, err = main([*args, "--overwrite"], capsys)
    assert code == cli.EXIT_OK, err
    assert (site / "index.html").read_text(encoding="utf-8") != "from an older build\n"
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == (["site"] if bundle == "none" else ["site", f"site.{bundle}"])


def test_a_report_tlsite_wrote_is_kept_without_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    assert main(["build", str(SIMPLE), "-o", str(site), "--no-zip"], capsys)[0] == 0
    before = snapshot(tmp_path)
    code, _, err = main(["build", str(SIMPLE), "-o", str(site), "--no-zip"], capsys)
    assert code == cli.EXIT_USAGE
    assert err.strip() == (
        f"tlsite: error: {site} already exists; pass --overwrite to replace it or use -o DIR"
    )
    assert snapshot(tmp_path) == before


def test_overwrite_replaces_an_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "empty"
    site.mkdir()
    code, _, err = main(build_args(SIMPLE, site, "--no-zip"), capsys)
    assert code == cli.EXIT_OK, err
    assert (site / "index.html").is_file()


def test_an_archive_of_the_users_beside_the_site_is_never_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "run1.zip"  # e.g. the user's zipped trace folder
    with zipfile.ZipFile(mine, "w") as archive:
        archive.writestr("run1/trace.log", SIMPLE.read_bytes())
    before = snapshot(tmp_path)
    code, _, err = main(["build", str(SIMPLE), "-o", str(tmp_path / "run1")], capsys)
    assert code == cli.EXIT_USAGE and "not a bundle tlsite wrote" in err
    code, _, err = main(build_args(SIMPLE, tmp_path / "run1"), capsys)
    assert code == cli.EXIT_USAGE and "not a bundle tlsite wrote" in err
    code, _, err = main(build_args(mine, tmp_path / "run1"), capsys)  # the input itself
    assert code == cli.EXIT_USAGE and "is the input trace" in err
    assert snapshot(tmp_path) == before


def test_markdown_overwrite_follows_the_same_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md = tmp_path / "md"
    assert main(["markdown", str(SIMPLE), "-o", str(md)], capsys)[0] == 0
    code, _, err = main(["markdown", str(SIMPLE), "-o", str(md), "--overwrite"], capsys)
    assert code == cli.EXIT_OK, err  # its own project, known by its mkdocs.yml
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# My docs\n", encoding="utf-8")
    code, _, err = main(["markdown", str(SIMPLE), "-o", str(docs), "--overwrite"], capsys)
    assert code == cli.EXIT_USAGE and "not a folder tlsite wrote" in err
    assert (docs / "index.md").read_text(encoding="utf-8") == "# My docs\n"


def test_run_refuses_before_running_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "keep.txt").write_text("mine\n", encoding="utf-8")
    ran = tmp_path / "ran"
    command = ["python3", "-c", f"open({str(ran)!r}, 'w').close()"]
    code, _, err = main(["run", "-o", str(out), "--overwrite", "--", *command], capsys)
    assert code == cli.EXIT_USAGE and "not a folder tlsite wrote" in err
    assert not ran.exists()
    assert (out / "keep.txt").read_text(encoding="utf-8") == "mine\n"
    site = tmp_path / "site"  # a report of tlsite's, but the new trace would go inside it
    assert main(["build", str(SIMPLE), "-o", str(site), "--no-zip"], capsys)[0] == 0
    before = snapshot(tmp_path)
    args = ["run", "-o", str(site), "--overwrite", "--trace-dir", str(site / "trace")]
    code, _, err = main([*args, "--", *command], capsys)
    assert code == cli.EXIT_USAGE and "holds the input trace" in err, err
    assert not ran.exists()
    assert snapshot(tmp_path) == before


# -- 19. the terminal ----------------------------------------------------------------------------
def test_the_end_summary_names_what_was_found_with_the_overviews_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    code, stdout, err = main(["build", str(COMPILE_ERROR), "-o", str(out), "--no-zip"], capsys)
    assert code == cli.EXIT_OK, err
    found = [line for line in stdout.splitlines() if line.startswith("Found: ")]
    assert found == ["Found: 1 graph break (hit 2 times), 3 compilation failures, 0 recompiles"]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert glance(page, "Graph breaks") == "1 distinct, hit 2 times"
    assert glance(page, "Compilation failures") == "3"
    assert glance(page, "Recompiles") == "0"


def test_the_end_summary_of_a_trace_without_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, _ = main(["build", str(SIMPLE), "-o", str(tmp_path / "r"), "--no-zip"], capsys)
    assert code == cli.EXIT_OK
    assert "Found: no graph breaks, compilation failures or recompiles" in stdout.splitlines()


def test_tlparse_habit_suggests_the_build_command(tmp_path: Path) -> None:
    trace = tmp_path / "trace.log"
    trace.write_bytes(SIMPLE.read_bytes())
    done = run_tlsite(str(trace), cwd=tmp_path)
    assert done.returncode == cli.EXIT_USAGE
    assert f"tlsite build {trace}" in done.stderr
    assert "invalid choice" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.log"]


def test_progress_counts_bytes_in_megabytes() -> None:
    from tlsite.progress import BYTES, Progress, amount

    assert amount(12_345_678, 45_600_000, BYTES) == "12.3/45.6 MB"
    assert amount(3, 40) == "3/40"
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100, color_system=None)
    with Progress(enabled=True, console=console, delay=0) as bar:
        bar.stage("Reading trace.log", 250_000_000, unit=BYTES)
        bar.advance(125_000_000)
        bar._progress.refresh()
        shown = screen.getvalue()
    assert "125.0/250.0 MB" in shown
    assert "125000000" not in shown

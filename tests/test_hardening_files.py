"""Issue #20, points 3, 11, 12 and 14: what tlsite reads is what the user gave it, no more.

Links out of an input or site folder are not followed, every layer of decompression counts
against the unpacked-size cap, a log still being written is read and copied as one set of
bytes, and a cut or damaged compressed log builds from what decompressed.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
import zlib
from pathlib import Path

import py7zr
import pytest
from corpus import FIXTURE_TRACES, TLPARSE_INPUTS, TORCH_213, TRAINING_TRACE_GLOB

from tlsite import cli
from tlsite.cli import build
from tlsite.core import InputError, load_source, resolve_input
from tlsite.core import source as source_module

SIMPLE = TLPARSE_INPUTS / "simple.log"
SECRET = b"SECRET-NOT-A-TRACE-LINE root:x:0:0:root:/root:/bin/bash\n"


def _secret_trace(path: Path) -> Path:
    """A real trace with a line that must never reach a report (like /etc/passwd would)."""
    path.write_bytes(SIMPLE.read_bytes() + SECRET)
    return path


def _total_lines(summary: str) -> int:
    return int(re.search(r"records from ([\d,]+) lines", summary)[1].replace(",", ""))


def _drain(path: Path, **limits: int) -> None:
    """Read every log of ``path`` to the end, as a build would."""
    with resolve_input(path, **limits) as resolved:
        for log in resolved.logs:
            for _ in log.chunks():
                pass


def _zip_text(archive: Path) -> bytes:
    with zipfile.ZipFile(archive) as zf:
        return b"".join(zf.read(name) for name in zf.namelist())


# -- point 3: links out of a folder -----------------------------------------------------------


def test_a_folder_link_to_a_file_outside_is_skipped_with_a_line_naming_it(
    tmp_path: Path,
) -> None:
    outside = _secret_trace(tmp_path / "elsewhere.log")
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(SIMPLE, folder / "dedicated_log_torch_trace_a.log")
    link = folder / "dedicated_log_torch_trace_x.log"
    link.symlink_to(outside)

    outcome = build(str(folder), tmp_path / "site", bundle="zip")

    assert (tmp_path / "site" / "raw.log").read_bytes() == SIMPLE.read_bytes()
    assert SECRET.strip() not in _zip_text(outcome.bundle)
    first = outcome.summary.splitlines()[0]
    assert first == f"{link}: a link to outside the folder; skipped"


@pytest.mark.slow
def test_a_rank_log_linking_outside_the_folder_is_not_a_rank_of_the_site(tmp_path: Path) -> None:
    ranks = TLPARSE_INPUTS / "multi_rank_logs"
    folder = tmp_path / "logs"
    folder.mkdir()
    for rank in (0, 2):
        name = f"dedicated_log_torch_trace_rank_{rank}.log"
        shutil.copy(ranks / name, folder / name)
    link = folder / "dedicated_log_torch_trace_rank_1.log"
    link.symlink_to(_secret_trace(tmp_path / "outside.log"))

    outcome = build(str(folder), tmp_path / "site", bundle="zip")

    assert outcome.summary.splitlines()[0] == f"{link}: a link to outside the folder; skipped"
    assert (tmp_path / "site" / "rank_0").is_dir() and (tmp_path / "site" / "rank_2").is_dir()
    assert not (tmp_path / "site" / "rank_1").exists()
    assert SECRET.strip() not in _zip_text(outcome.bundle)


def test_a_folder_holding_only_a_link_outside_reads_nothing_and_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "dedicated_log_torch_trace_x.log").symlink_to(_secret_trace(tmp_path / "x.log"))

    with pytest.raises(InputError, match=r"no trace logs found.*trace_x\.log: a link to outside"):
        resolve_input(folder)


def test_a_link_between_files_of_the_folder_is_followed(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    (folder / "old").mkdir(parents=True)
    shutil.copy(SIMPLE, folder / "old" / "trace.log")
    (folder / "latest.log").symlink_to(folder / "old" / "trace.log")

    with resolve_input(folder) as resolved:
        assert [log.display_name for log in resolved.logs] == ["latest.log"]
        assert resolved.skipped == []
        with resolved.logs[0].open() as f:
            assert f.read() == SIMPLE.read_bytes()


def test_a_link_given_as_the_input_itself_is_read(tmp_path: Path) -> None:
    """The user named it: following it is what they asked for."""
    link = tmp_path / "mine.log"
    link.symlink_to(SIMPLE)
    with resolve_input(link) as resolved, resolved.logs[0].open() as f:
        assert f.read() == SIMPLE.read_bytes()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_publish_leaves_out_links_to_outside_the_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tlsite.cli import main

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    remote = tmp_path / "pages.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    site = tmp_path / "site"
    build(str(SIMPLE), site, bundle="none")
    secret_dir = tmp_path / "private"
    secret_dir.mkdir()
    _secret_trace(secret_dir / "passwd")
    (site / "leak.txt").symlink_to(secret_dir / "passwd")
    (site / "assets" / "leakdir").symlink_to(secret_dir)
    (site / "same.txt").symlink_to(site / "raw.log")  # inside the site: published as is

    assert main(["publish", str(site), "--to", str(remote)]) == 0

    out = capsys.readouterr().out
    assert f"{site / 'leak.txt'}: a link to outside the site folder; not published" in out
    assert f"{site / 'assets' / 'leakdir'}: a link to outside the site folder" in out
    git = ["git", "--git-dir", str(remote)]
    files = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", "gh-pages"], capture_output=True, text=True
    ).stdout.split()
    assert "leak.txt" not in files and not any("leakdir" in f for f in files)
    assert "index.html" in files and "same.txt" in files
    grep = subprocess.run([*git, "grep", "-c", "SECRET-NOT", "gh-pages"], capture_output=True)
    assert grep.stdout == b""
    assert (site / "leak.txt").is_symlink()  # the user's folder is left as it was


# -- point 11: every layer of decompression counts ---------------------------------------------


def _log_gz(size: int) -> bytes:
    """``size`` bytes of (repetitive) trace text, gzipped."""
    text = SIMPLE.read_bytes()
    body = (text * (size // len(text) + 1))[:size]
    return gzip.compress(body, compresslevel=9)


def test_a_gz_inside_a_zip_counts_against_the_unpacked_cap(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("trace.log.gz", _log_gz(3 << 20))

    with pytest.raises(InputError, match=r"^bundle\.zip:trace\.log\.gz: unpacks to more than"):
        _drain(archive, max_unpacked_bytes=1 << 20)
    # under the cap, the same archive reads in full
    with resolve_input(archive, max_unpacked_bytes=4 << 20) as ok, ok.logs[0].open() as f:
        assert len(f.read()) == 3 << 20
        assert ok.logs[0].size_hint == 3 << 20  # what the progress bar counts to


def test_a_gz_inside_a_7z_counts_against_the_unpacked_cap(tmp_path: Path) -> None:
    gz = tmp_path / "trace.log.gz"
    gz.write_bytes(_log_gz(3 << 20))
    archive = tmp_path / "bundle.7z"
    with py7zr.SevenZipFile(archive, "w") as sz:
        sz.write(gz, "trace.log.gz")

    with pytest.raises(InputError, match=r"^bundle\.7z:trace\.log\.gz: unpacks to more than"):
        _drain(archive, max_unpacked_bytes=1 << 20)


def test_a_nested_bomb_is_stopped_by_the_compression_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny zip holding a .gz of repetition unpacks to ~10^6 times its size: the cap is
    relative to the archive (``RATIO_FLOOR`` is lowered so the test stays small)."""
    monkeypatch.setattr(source_module, "RATIO_FLOOR", 1 << 20)
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"0" * (1 << 20)
    data = b"".join(gz.compress(chunk) for _ in range(64)) + gz.flush()
    archive = tmp_path / "small.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("trace.log.gz", data)
    assert archive.stat().st_size * source_module.MAX_RATIO < 64 << 20

    with pytest.raises(InputError, match=r"^small\.zip:trace\.log\.gz: unpacks to more than"):
        resolve_input(archive)  # refused before any parsing: in the time gunzip takes


# -- point 12: a log that grows while it is read ---------------------------------------------


@pytest.mark.slow
def test_a_log_growing_during_the_build_gives_raw_log_the_bytes_parsed(tmp_path: Path) -> None:
    log = tmp_path / "growing.log"
    log.write_bytes(SIMPLE.read_bytes() + b"\n")
    line = SIMPLE.read_bytes().splitlines(keepends=True)[0]
    done = threading.Event()

    def keep_writing() -> None:
        with open(log, "ab") as f:
            while not done.wait(0.002):
                f.write(line)
                f.flush()

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        outcome = build(str(log), tmp_path / "site", bundle="none")
    finally:
        done.set()
        writer.join()

    raw = (tmp_path / "site" / "raw.log").read_bytes()
    assert log.read_bytes().startswith(raw) and len(raw) < log.stat().st_size
    assert raw.count(b"\n") + (not raw.endswith(b"\n")) == _total_lines(outcome.summary)


def test_a_gz_log_growing_after_it_was_chosen_is_read_as_it_was(tmp_path: Path) -> None:
    gz = tmp_path / "trace.log.gz"
    gz.write_bytes(gzip.compress(SIMPLE.read_bytes()))
    with resolve_input(gz) as resolved:
        with open(gz, "ab") as f:  # another gzip member appended by a still-running writer
            f.write(gzip.compress(b"V1 appended later\n"))
        with resolved.logs[0].open() as f:
            assert f.read() == SIMPLE.read_bytes()
        assert resolved.logs[0].breaks == []


# -- point 14: a cut or damaged compressed log -------------------------------------------------


def _cut(data: bytes, at: float) -> bytes:
    return data[: int(len(data) * at)]


def test_a_gz_cut_in_half_builds_from_what_decompressed(tmp_path: Path) -> None:
    original = SIMPLE.read_bytes()
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(_cut(gzip.compress(original), 0.5))

    outcome = build(str(cut), tmp_path / "site", bundle="none")

    raw = (tmp_path / "site" / "raw.log").read_bytes()
    assert len(raw) > 10_000 and original.startswith(raw)
    lines = _total_lines(outcome.summary)
    assert f"the gzip data ends early after {len(raw):,} bytes of log" in outcome.summary
    assert f"(line {lines:,})" in outcome.summary
    assert not outcome.clean  # --strict says the input was not whole
    health = (tmp_path / "site" / "health.html").read_text()
    assert "the gzip data ends early" in health
    assert re.search(r"<h2[^>]*>Where", health)  # a heading, not a row of the findings table


def test_a_gz_cut_inside_a_zip_builds_from_what_decompressed(tmp_path: Path) -> None:
    original = SIMPLE.read_bytes()
    archive = tmp_path / "logs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("trace.log.gz", _cut(gzip.compress(original), 0.6))

    with resolve_input(archive) as resolved:
        log = resolved.logs[0]
        trace = load_source(log)
        with log.open() as f:
            data = f.read()
    assert data and original.startswith(data) and len(data) < len(original)
    assert trace.stats.findings["input_cut"] == 1
    assert trace.stats.total_lines == data.count(b"\n") + 1  # the last, cut line too
    trace.close()


def _damaged_zip(original: bytes, archive: Path, at: float) -> Path:
    """``original`` zipped as ``trace.log``, with 64 bytes of its deflate data zeroed ``at``
    (a fraction of the way through): deflate has no check per block, so what follows the
    damage may decode to garbage until the member's CRC, or a block that cannot be decoded."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("trace.log", original)
    data = bytearray(archive.read_bytes())
    start = 30 + len("trace.log")  # local header + name: the deflate stream follows
    spot = start + int((len(data) - start) * at)
    data[spot : spot + 64] = bytes(64)
    archive.write_bytes(bytes(data))
    return archive


@pytest.mark.slow
def test_a_damaged_zip_member_builds_and_says_it_is_damaged(tmp_path: Path) -> None:
    # big enough that deflate emits the first half before the damage (simple.log is one block)
    original = next(TORCH_213.glob(TRAINING_TRACE_GLOB)).read_bytes()
    archive = _damaged_zip(original, tmp_path / "logs.zip", 0.5)

    outcome = build(str(archive), tmp_path / "site", bundle="none")

    raw = (tmp_path / "site" / "raw.log").read_bytes()
    assert len(raw) > len(original) // 4 and original.startswith(raw[: len(original) // 4])
    first_wrong = next(i for i, (a, b) in enumerate(zip(raw, original, strict=False)) if a != b)
    assert raw.count(b"\n") + (not raw.endswith(b"\n")) == _total_lines(outcome.summary)
    summary = outcome.summary.splitlines()[0]
    assert summary.startswith("logs.zip:trace.log: ")
    damage = re.search(
        r"the archive member is damaged: its data does not match its CRC; lines after the "
        r"damage may be garbage \(it shows from line ([\d,]+) on\)",
        summary,
    )
    assert damage, summary
    shown_from = int(damage[1].replace(",", ""))
    assert shown_from <= raw[:first_wrong].count(b"\n") + 1  # at or before the first bad byte
    assert not outcome.clean  # --strict fails
    health = (tmp_path / "site" / "health.html").read_text()
    assert "its data does not match its CRC" in health
    assert "lines from the damage on may be garbage" in health
    where = health[health.index(">Where") :]  # its examples, in line order: the damage's first
    assert where.index("the archive member is damaged") < where.index("no glog header")


def test_a_zip_member_damaged_at_its_start_says_the_data_breaks_off_before_any_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = SIMPLE.read_bytes()
    # at resolve time (the first bytes), and while reading (before the first 4 KiB decoded:
    # from 5% on, the lines decoded before the damage are kept, see test_hardening_memory)
    for at in (0.0, 0.02):
        archive = _damaged_zip(original, tmp_path / f"at{at}.zip", at)
        out = tmp_path / f"site{at}"
        code = cli.main(["build", str(archive), "-o", str(out), "--no-browser", "--no-zip"])
        err = capsys.readouterr().err
        assert code == cli.EXIT_FAILED
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith(
            f"tlsite: error: {archive.name}:trace.log: the data breaks off before any record ("
        ), err
        assert "blank" not in err


def test_a_damaged_gz_says_it_is_damaged_and_the_parse_reads_what_raw_log_holds(
    tmp_path: Path,
) -> None:
    original = next(TORCH_213.glob(TRAINING_TRACE_GLOB)).read_bytes()
    packed = bytearray(gzip.compress(original))
    middle = len(packed) // 2
    packed[middle : middle + 64] = bytes(64)
    damaged = tmp_path / "trace.log.gz"
    damaged.write_bytes(bytes(packed))

    with resolve_input(damaged) as resolved:
        log = resolved.logs[0]
        trace = load_source(log)  # reads in 4 MiB steps
        raw = b"".join(log.chunks())  # 1 MiB steps, as raw.log is written
        trace.close()
    assert log.breaks == [
        "the gzip data is damaged: it does not match its CRC; lines after the damage may be garbage"
    ]
    assert trace.stats.total_lines == raw.count(b"\n") + (not raw.endswith(b"\n"))
    assert trace.stats.findings["input_damaged"] == 1 and not trace.stats.is_clean


def test_a_gz_whose_only_damage_is_its_checksum_keeps_every_line(tmp_path: Path) -> None:
    """A stored CRC-32 changed, every byte of the log intact: the last step decoded before
    the check failed (kilobytes of lines) was dropped, unreported."""
    original = (FIXTURE_TRACES / "torch-2.15" / "graph_breaks.log").read_bytes()
    packed = bytearray(gzip.compress(original, mtime=0))
    packed[-8] ^= 0xFF  # the trailer's CRC-32
    damaged = tmp_path / "trace.log.gz"
    damaged.write_bytes(bytes(packed))
    with resolve_input(damaged) as resolved:
        log = resolved.logs[0]
        assert b"".join(log.chunks()) == original
        trace = load_source(log)
        trace.close()
    assert trace.stats.total_lines == original.count(b"\n")
    assert trace.stats.findings["input_damaged"] == 1 and not trace.stats.is_clean


def test_a_gz_that_is_not_gzip_at_all_is_still_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(b"\x1f\x8b" + os.urandom(64))
    with pytest.raises(InputError, match=r"bad\.log\.gz: corrupt gzip data"):
        resolve_input(bad)


@pytest.mark.slow
def test_a_site_embedding_a_gz_trace_gets_the_log_bytes_in_raw_log(tmp_path: Path) -> None:
    """The plugin in a user's MkDocs site: raw.log is the log that was read, not the .gz."""
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "index.md").write_text("# Notes\n")
    (project / "trace.log.gz").write_bytes(gzip.compress(SIMPLE.read_bytes()))
    (project / "mkdocs.yml").write_text(
        "site_name: notes\ntheme:\n  name: material\n"
        "plugins:\n  - search\n  - tlsite:\n      trace: trace.log.gz\n      prefix: report\n"
    )
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert (project / "site" / "report" / "raw.log").read_bytes() == SIMPLE.read_bytes()


def test_strict_says_a_cut_input_is_why_it_exits_3(tmp_path: Path) -> None:
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(_cut(gzip.compress(SIMPLE.read_bytes()), 0.5))
    command = ["build", str(cut), "-o", str(tmp_path / "site"), "--bundle", "none", "--strict"]
    done = subprocess.run(
        [sys.executable, "-m", "tlsite", *command, "--no-browser"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "the input breaks off before its end; exit 3" in done.stderr


def test_a_cut_gz_says_so_even_after_hundreds_of_skipped_lines(tmp_path: Path) -> None:
    """Where the data broke off is told however many other lines the Parse health page
    already quotes (its examples are capped)."""
    noisy = b"not a trace line\n" * 500 + SIMPLE.read_bytes()
    cut = tmp_path / "noisy.log.gz"
    cut.write_bytes(_cut(gzip.compress(noisy), 0.5))

    outcome = build(str(cut), tmp_path / "site", bundle="none")

    assert "500 bad header" in outcome.summary
    assert "the gzip data ends early after" in outcome.summary
    assert not outcome.clean

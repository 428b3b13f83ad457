"""What a user gives tlsite (file, .gz, .zip, .7z, directory, stdin) becomes the right log bytes.

Real traces come from the shared corpus and are never copied into the project: tests that need a
directory or an archive build it in ``tmp_path``.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import shutil
import socket
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

import py7zr
import pytest

from tlsite.core import source
from tlsite.core.source import InputError, ResolvedInput, resolve_input

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
INPUTS = CORPUS / "tlparse" / "inputs"
SIMPLE = INPUTS / "simple.log"
MESSY = INPUTS / "multi_rank_messy_input"
RANK_LOGS = INPUTS / "multi_rank_logs"
TORCH_MULTI_RANK = CORPUS / "torch-2.13" / "multi_rank"

pytestmark = pytest.mark.skipif(not SIMPLE.is_file(), reason="shared trace corpus not available")


def read_all(resolved: ResolvedInput) -> list[bytes]:
    out = []
    for log in resolved.logs:
        with log.open() as f:
            out.append(f.read())
    return out


def error_of(path: object, **kwargs: object) -> str:
    """The one-line message a user would see for a bad input."""
    with pytest.raises(InputError) as info:
        resolve_input(path, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    return message


def gzip_to(src: Path, dst: Path) -> Path:
    with open(src, "rb") as f, gzip.open(dst, "wb") as g:
        shutil.copyfileobj(f, g)
    return dst


def zip_of(dst: Path, members: dict[str, Path]) -> Path:
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, src in members.items():
            zf.write(src, name)
    return dst


def sevenzip_of(dst: Path, members: dict[str, Path]) -> Path:
    with py7zr.SevenZipFile(dst, "w") as sz:
        for name, src in members.items():
            sz.write(src, name)
    return dst


# --- single files ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [SIMPLE, INPUTS / "inductor_provenance_aot_log.txt", CORPUS / "torch-2.13" / "simple"],
    ids=["log", "txt", "torch-dir-with-one-log"],
)
def test_one_log_gives_its_bytes_every_time_it_is_opened(path: Path) -> None:
    resolved = resolve_input(path)

    assert len(resolved.logs) == 1
    assert not resolved.is_multi_rank
    log = resolved.logs[0]
    expected_file = path if path.is_file() else next(path.iterdir())
    expected = expected_file.read_bytes()
    assert log.display_name == expected_file.name
    assert log.size_hint == len(expected)
    # the reader may make two passes: each open() is a fresh stream from the start
    assert read_all(resolved) == [expected]
    assert read_all(resolved) == [expected]


def test_gz_is_streamed_and_found_by_magic_not_name(tmp_path: Path, monkeypatch) -> None:
    gz = gzip_to(SIMPLE, tmp_path / "trace.log.gz")
    renamed = tmp_path / "trace.bin"
    shutil.copy(gz, renamed)

    def no_temp_dirs(*args: object, **kwargs: object) -> str:
        raise AssertionError("a .gz must be streamed, not unpacked to disk")

    monkeypatch.setattr(tempfile, "mkdtemp", no_temp_dirs)
    for path in (gz, renamed):
        resolved = resolve_input(path)
        assert resolved.logs[0].display_name == path.name
        assert resolved.logs[0].size_hint == gz.stat().st_size  # compressed size as a hint
        assert read_all(resolved) == [SIMPLE.read_bytes()]
        assert read_all(resolved) == [SIMPLE.read_bytes()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.bin", "trace.log.gz"]


def test_truncated_gz_reads_what_decompressed_and_says_where_it_broke(tmp_path: Path) -> None:
    gz = gzip_to(SIMPLE, tmp_path / "trace.log.gz")
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gz.read_bytes()[: gz.stat().st_size // 2])

    resolved = resolve_input(cut)
    with resolved.logs[0].open() as f:
        data = f.read()
    assert data and SIMPLE.read_bytes().startswith(data)
    assert resolved.logs[0].breaks == [
        f"the gzip data ends early after {len(data):,} bytes of log; "
        "the report shows what came before"
    ]


def test_tar_gz_is_refused_with_a_hint(tmp_path: Path) -> None:
    import tarfile

    tgz = tmp_path / "logs.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(SIMPLE, "simple.log")

    message = error_of(tgz)
    assert message.startswith(f"{tgz}: a tar archive inside gzip, not a trace log")


def test_empty_file_is_refused() -> None:
    assert error_of(MESSY / "another.log") == f"{MESSY / 'another.log'}: empty file"


# --- archives ---------------------------------------------------------------------------------


def test_zip_with_one_log_streams_the_member(tmp_path: Path) -> None:
    archive = zip_of(tmp_path / "run.zip", {"simple.log": SIMPLE})

    resolved = resolve_input(archive)

    assert [log.display_name for log in resolved.logs] == ["run.zip:simple.log"]
    assert resolved.logs[0].size_hint == SIMPLE.stat().st_size
    assert read_all(resolved) == [SIMPLE.read_bytes()]
    assert read_all(resolved) == [SIMPLE.read_bytes()]


def test_renamed_zip_holding_a_gz_log(tmp_path: Path) -> None:
    gz = gzip_to(SIMPLE, tmp_path / "simple.log.gz")
    archive = zip_of(tmp_path / "upload.dat", {"simple.log.gz": gz})

    resolved = resolve_input(archive)

    assert resolved.logs[0].display_name == "upload.dat:simple.log.gz"
    assert read_all(resolved) == [SIMPLE.read_bytes()]


def test_7z_with_one_log_and_its_temp_dir_is_removed_on_close(tmp_path: Path) -> None:
    archive = sevenzip_of(tmp_path / "run.7z", {"simple.log": SIMPLE})

    with resolve_input(archive) as resolved:
        assert [log.display_name for log in resolved.logs] == ["run.7z:simple.log"]
        assert resolved.logs[0].size_hint == SIMPLE.stat().st_size
        assert read_all(resolved) == [SIMPLE.read_bytes()]
        assert read_all(resolved) == [SIMPLE.read_bytes()]
        temp_dirs = [s.path for s in resolved._scratch]
        assert temp_dirs and all(d.is_dir() for d in temp_dirs)

    assert not any(d.exists() for d in temp_dirs)
    with pytest.raises(InputError, match=r"^run\.7z:simple\.log: no such file"):
        resolved.logs[0].open()


def test_zip_of_rank_logs_in_a_folder_is_multi_rank(tmp_path: Path) -> None:
    ranks = sorted(RANK_LOGS.iterdir())
    archive = zip_of(tmp_path / "ranks.zip", {f"run/{p.name}": p for p in reversed(ranks)})

    resolved = resolve_input(archive)

    assert resolved.is_multi_rank
    assert [log.rank for log in resolved.logs] == [0, 1, 2, 3]
    assert resolved.logs[0].display_name == "ranks.zip:run/dedicated_log_torch_trace_rank_0.log"
    assert read_all(resolved) == [p.read_bytes() for p in ranks]


@pytest.mark.slow
def test_7z_of_rank_logs_is_multi_rank(tmp_path: Path) -> None:
    ranks = sorted(TORCH_MULTI_RANK.iterdir())
    archive = sevenzip_of(tmp_path / "ranks.7z", {p.name: p for p in ranks})

    with resolve_input(archive) as resolved:
        assert resolved.is_multi_rank
        assert [log.rank for log in resolved.logs] == [0, 1]
        assert read_all(resolved) == [p.read_bytes() for p in ranks]


def test_zip_with_several_logs_lists_them_and_latest_uses_member_mtime(tmp_path: Path) -> None:
    archive = tmp_path / "several.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, src, date in [
            ("a.log", SIMPLE, (2024, 1, 1, 0, 0, 0)),
            ("b.log", INPUTS / "links.log", (2025, 6, 1, 0, 0, 0)),
            ("c.log", INPUTS / "artifacts.log", (2023, 1, 1, 0, 0, 0)),
        ]:
            zf.writestr(zipfile.ZipInfo(name, date), src.read_bytes())

    message = error_of(archive)
    assert message.startswith(f"{archive}: 3 logs found; pass --latest to use the newest")
    assert message.endswith("a.log, b.log, c.log")

    resolved = resolve_input(archive, latest=True)
    assert [log.display_name for log in resolved.logs] == ["several.zip:b.log"]
    assert read_all(resolved) == [(INPUTS / "links.log").read_bytes()]


@pytest.mark.parametrize(
    ("member", "why"),
    [("../evil.log", "would escape"), ("/etc/evil.log", "would escape"), ("x.log", "is a symlink")],
)
def test_zip_with_unsafe_member_is_refused(tmp_path: Path, member: str, why: str) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(SIMPLE, "simple.log")
        info = zipfile.ZipInfo(member)
        if why == "is a symlink":
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, b"../../etc/passwd")

    assert error_of(archive) == f"{archive}: member {member!r} {why}; refused"


def test_7z_with_symlink_member_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(SIMPLE, folder / "simple.log")
    (folder / "link.log").symlink_to("/etc/passwd")
    archive = tmp_path / "evil.7z"
    with py7zr.SevenZipFile(archive, "w") as sz:
        sz.writeall(folder, "run")

    assert error_of(archive) == f"{archive}: member 'run/link.log' is a symlink; refused"


@pytest.mark.parametrize("build", [sevenzip_of, zip_of], ids=["7z", "zip"])
def test_archive_over_the_size_cap_is_refused_before_unpacking(tmp_path: Path, build) -> None:
    archive = build(tmp_path / "bomb", {"simple.log": SIMPLE})

    message = error_of(archive, max_unpacked_bytes=100_000)

    assert (
        message
        == f"{archive}: the logs would unpack to 243.6 KiB, over the 97.7 KiB limit; refused"
    )
    assert resolve_input(archive, max_unpacked_bytes=SIMPLE.stat().st_size).logs


def test_archive_with_too_many_entries_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(SIMPLE, "simple.log")
        for i in range(20):
            zf.writestr(f"junk/{i}.bin", b"")

    assert (
        error_of(archive, max_entries=10) == f"{archive}: 21 entries, over the limit of 10; refused"
    )


@pytest.mark.parametrize("kind", ["zip", "7z"])
def test_corrupt_archive_gives_one_line(tmp_path: Path, kind: str) -> None:
    good = (zip_of if kind == "zip" else sevenzip_of)(tmp_path / "good", {"simple.log": SIMPLE})
    bad = tmp_path / f"bad.{kind}"
    bad.write_bytes(good.read_bytes()[:300])

    assert error_of(bad).startswith(f"{bad}: corrupt or unsupported {kind} archive")


# --- directories ------------------------------------------------------------------------------


def test_directory_with_one_log_reports_what_it_ignored(tmp_path: Path) -> None:
    shutil.copy(SIMPLE, tmp_path / "simple.log")
    (tmp_path / "notes.md").write_text("my notes")
    (tmp_path / "empty.txt").touch()
    (tmp_path / "older_run").mkdir()

    resolved = resolve_input(tmp_path)

    assert [log.display_name for log in resolved.logs] == ["simple.log"]
    assert read_all(resolved) == [SIMPLE.read_bytes()]
    assert resolved.ignored == [
        "empty.txt: not a log",
        "notes.md: not a log",
        "older_run/: directory (not searched)",
    ]


def test_directory_with_a_gz_log(tmp_path: Path) -> None:
    gzip_to(SIMPLE, tmp_path / "trace.log.gz")

    assert read_all(resolve_input(tmp_path)) == [SIMPLE.read_bytes()]


def test_directory_with_several_logs_lists_the_candidates(tmp_path: Path) -> None:
    for name in ("a.log", "b.log", "c.log.gz", "notes.txt"):
        shutil.copy(SIMPLE, tmp_path / name)

    assert error_of(tmp_path) == (
        f"{tmp_path}: 3 logs found; pass --latest to use the newest, "
        "or name one: a.log, b.log, c.log.gz"
    )


def test_latest_picks_the_most_recently_modified_log(tmp_path: Path) -> None:
    newest = INPUTS / "links.log"
    for name, src, mtime in [
        ("a.log", SIMPLE, 1_700_000_000),
        ("b.log", newest, 1_800_000_000),
        ("c.log", INPUTS / "artifacts.log", 1_600_000_000),
    ]:
        shutil.copy(src, tmp_path / name)
        os.utime(tmp_path / name, (mtime, mtime))

    resolved = resolve_input(tmp_path, latest=True)

    assert [log.display_name for log in resolved.logs] == ["b.log"]
    assert read_all(resolved) == [newest.read_bytes()]
    assert any("b.log" in note for note in resolved.notes)


def test_rank_log_directory_gives_all_ranks_and_ignores_the_rest() -> None:
    resolved = resolve_input(MESSY)

    assert resolved.is_multi_rank
    assert [(log.display_name, log.rank) for log in resolved.logs] == [
        ("dedicated_log_torch_trace_rank_0.log", 0),
        ("dedicated_log_torch_trace_rank_1.log", 1),
    ]
    assert read_all(resolved) == [
        (MESSY / "dedicated_log_torch_trace_rank_0.log").read_bytes(),
        (MESSY / "dedicated_log_torch_trace_rank_1.log").read_bytes(),
    ]
    assert resolved.ignored == ["another.log: empty", "some_other_file.txt: not a log"]
    assert any("only rank 0 is built" in note for note in resolved.notes)


def test_rank_logs_from_torch_are_sorted_numerically(tmp_path: Path) -> None:
    rank0, rank1 = sorted(TORCH_MULTI_RANK.iterdir())
    shutil.copy(rank0, tmp_path / "dedicated_log_torch_trace_rank_10_abc.log")
    gzip_to(rank1, tmp_path / "dedicated_log_torch_trace_rank_2_xyz.log.gz")

    resolved = resolve_input(tmp_path)

    assert [log.rank for log in resolved.logs] == [2, 10]
    assert read_all(resolved) == [rank1.read_bytes(), rank0.read_bytes()]


def test_two_logs_for_one_rank_is_ambiguous(tmp_path: Path) -> None:
    for name in ("rank_0_old", "rank_0_new", "rank_1_new"):
        shutil.copy(SIMPLE, tmp_path / f"dedicated_log_torch_trace_{name}.log")

    message = error_of(tmp_path)

    assert message.startswith(f"{tmp_path}: 2 logs for rank 0 (")
    assert "dedicated_log_torch_trace_rank_0_old.log" in message


def test_empty_directory() -> None:
    with tempfile.TemporaryDirectory() as empty:
        assert error_of(empty) == f"{empty}: no trace logs found (looked at 0 files)"


def test_directory_without_logs_says_what_it_looked_at(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("x")
    (tmp_path / "empty.log").touch()

    assert error_of(tmp_path) == (
        f"{tmp_path}: no trace logs found "
        "(looked at 2 files: empty.log: empty; notes.md: not a log)"
    )


# --- stdin and bad paths ----------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
def test_stdin(monkeypatch, compress: bool) -> None:
    data = SIMPLE.read_bytes()
    piped = gzip.compress(data) if compress else data
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(piped)))

    with resolve_input("-") as resolved:
        assert [log.display_name for log in resolved.logs] == ["<stdin>"]
        assert read_all(resolved) == [data]
        assert read_all(resolved) == [data]


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    assert error_of(missing) == f"{missing}: no such file or directory"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file(tmp_path: Path) -> None:
    locked = tmp_path / "locked.log"
    shutil.copy(SIMPLE, locked)
    locked.chmod(0)
    try:
        assert error_of(locked) == f"{locked}: permission denied"
    finally:
        locked.chmod(0o600)


def test_unreadable_file_simulated(tmp_path: Path, monkeypatch) -> None:
    """Same check as above but also when running as root, where chmod 000 does not stop reads."""
    log = tmp_path / "locked.log"
    shutil.copy(SIMPLE, log)

    def denied(path: object, *args: object, **kwargs: object) -> object:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(source, "open", denied, raising=False)

    assert error_of(log) == f"{log}: permission denied"
    assert error_of(tmp_path) == f"{tmp_path / 'locked.log'}: permission denied"


def test_socket_is_neither_file_nor_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # socket paths must be short
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("trace.sock")
        assert error_of("trace.sock") == "trace.sock: not a file or directory"

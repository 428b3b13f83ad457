"""Where a build writes, and what it leaves behind: no path escapes, atomic, deterministic.

- No name taken from a trace (artifact, graph dump, DDP child, dump file, output-code file
  names, compile ids) and no member of an input archive can place a file outside the output
  folder: ``..``, absolute and drive paths, NUL, very long names, names that collide when case
  is ignored. tlparse 0.4.3 writes an artifact named ``../../x`` outside its output folder.
- A build that fails at any step (pages, bundle, the final swap, an interrupt) leaves an
  existing report and its bundle as they were, and no temporary folder behind.
- Two builds of the same trace, from different folders and on different days, give
  byte-identical sites, zip bundles and 7z bundles.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import py7zr
import pytest
from corpus import PROJECT_ROOT, TORCH_213, tlparse_input, trace_lines

from tlsite import cli
from tlsite.cli import build
from tlsite.core.bundle import write_7z

CID = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
EXAMPLE = PROJECT_ROOT / "core" / "examples" / "example.log"

#: Names that try to leave the output folder, break file systems, or collide with each other.
EVIL_NAMES = [
    "../../escaped",
    "../../../../../../../../tmp/tlsite_escaped",
    "/tmp/tlsite_absolute",
    "..",
    ".",
    "",
    "a/../../../escaped_nested",
    "nul\x00byte",
    "C:\\Windows\\escaped",
    "\\\\server\\share\\escaped",
    "..\\..\\escaped_backslash",
    "~/escaped_home",
    "%2e%2e%2fescaped_encoded",
    "x" * 5000,
    "ü" * 300,
    "Collide",
    "collide",
    "COLLIDE",
    "a/b",
    "a_b",
    ".hidden",
    "CON",
    "trailing dot.",
    "<eval_with_key>.7",
    "eval_with_key_7",
]


def evil_trace() -> str:
    """Every record kind whose names become paths, once per evil name."""
    text = ""
    for name in EVIL_NAMES:
        text += trace_lines({"artifact": {"name": name, "encoding": "string"}, **CID}, name)
        text += trace_lines({"artifact": {"name": name, "encoding": "json"}, **CID}, "{}")
        text += trace_lines({"graph_dump": {"name": name}, **CID}, "graph")
        text += trace_lines({"optimize_ddp_split_child": {"name": name}, **CID}, "child")
        text += trace_lines({"dump_file": {"name": name}, **CID}, f"source of {name!r}")
        text += trace_lines({"inductor_output_code": {"filename": f"/x/{name}.py"}, **CID}, "c")
    for ids in (
        {"frame_id": 2**70, "frame_compile_id": 0},
        {"frame_id": 10**3000},
        {"frame_id": -1},
        {"compiled_autograd_id": 2**63, "frame_id": 0},
    ):
        text += trace_lines({"artifact": {"name": "by_id", "encoding": "string"}, **ids}, "x")
    return text


def snapshot(root: Path, skip: Callable[[Path], bool] = lambda p: False) -> dict[str, bytes]:
    """Every file below ``root`` (not below skipped paths) with its content's digest."""
    files = {}
    for path in sorted(root.rglob("*")):
        if skip(path) or not path.is_file():
            continue
        files[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).digest()
    return files


def assert_contained(out: Path) -> None:
    """Every path below ``out`` really is below it; names fit file systems and never collide."""
    real = out.resolve()
    seen: dict[str, str] = {}
    for path in out.rglob("*"):
        assert not path.is_symlink(), path
        assert path.resolve().is_relative_to(real), path
        relative = path.relative_to(out).as_posix()
        for part in relative.split("/"):
            assert len(part.encode("utf-8")) <= 255, relative
            assert part not in ("", ".", ".."), relative
        key = relative.lower()
        assert key not in seen, f"{relative} and {seen[key]} collide when case is ignored"
        seen[key] = relative


def assert_safe_members(names: list[str], root: str) -> None:
    """Archive member names that unpack inside ``root/`` everywhere, without collisions."""
    assert len(set(names)) == len(names)
    lowered = [n.lower() for n in names]
    assert len(set(lowered)) == len(lowered), "members collide when case is ignored"
    for name in names:
        assert name.startswith(f"{root}/"), name
        assert "\\" not in name and "\x00" not in name and ":" not in name, name
        assert ".." not in name.split("/"), name


# -- no path escapes -------------------------------------------------------------------------------
def test_names_from_the_trace_never_leave_the_output_folder(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "sibling").mkdir(parents=True)
    (work / "sibling" / "keep.txt").write_text("untouched\n", encoding="utf-8")
    log = work / "in" / "evil.log"
    log.parent.mkdir()
    log.write_text(evil_trace(), encoding="utf-8")
    out = work / "deep" / "er" / "out"
    before = snapshot(tmp_path)
    outcome = build(str(log), out, bundle="zip")
    assert outcome.clean, outcome.summary

    site_and_bundle = (out, out.with_name("out.zip"))
    after = snapshot(tmp_path, skip=lambda p: p in site_and_bundle or out in p.parents)
    assert after == before  # nothing was written or changed anywhere else
    assert sorted(p.name for p in out.parent.iterdir()) == ["out", "out.zip"]
    for stray in ("/tmp/tlsite_escaped", "/tmp/tlsite_absolute", "/tmp/tlsite_absolute_0.txt"):
        assert not os.path.exists(stray)
    assert_contained(out)
    with zipfile.ZipFile(out.with_name("out.zip")) as bundle:
        assert_safe_members(bundle.namelist(), "out")
    # every record still produced its numbered output, listed where tlparse lists it
    directory = json.loads((out / "compile_directory.json").read_text(encoding="utf-8"))
    listed = [a["url"] for entry in directory.values() for a in entry["artifacts"]]
    assert len(listed) == 6 * len(EVIL_NAMES) + 4
    for url in listed:
        assert (out / url).is_file(), url


def test_dump_files_that_differ_in_case_or_in_unsafe_characters_get_their_own_file(
    tmp_path: Path,
) -> None:
    names = ["Model", "model", "MODEL", "a/b", "a_b", "a_b", "<eval_with_key>.3", "eval_with_key_3"]
    log = tmp_path / "dumps.log"
    log.write_text(
        "".join(
            trace_lines({"dump_file": {"name": n}, **CID}, f"# {i}: {n}")
            for i, n in enumerate(names)
        ),
        encoding="utf-8",
    )
    out = tmp_path / "site"
    build(str(log), out, bundle="none")
    pages = sorted(p.name for p in (out / "dump_file").iterdir())
    # the same name twice shares its page (tlparse overwrites it too); other names never do
    assert pages == [
        "MODEL_3.html",
        "Model.html",
        "a_b.html",
        "a_b_2.html",
        "eval_with_key_3.html",
        "eval_with_key_3_2.html",
        "model_2.html",
    ]
    assert_contained(out)


def _zip_with(path: Path, members: dict[str, bytes], *, symlink: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            if name == symlink:
                info.external_attr = 0o120777 << 16
            archive.writestr(info, data)
    return path


def _7z_with(path: Path, members: dict[str, bytes]) -> Path:
    with py7zr.SevenZipFile(path, "w") as archive:
        for name, data in members.items():
            # writestr() refuses such names; an attacker's tool would not
            archive._writef(io.BytesIO(data), name)
    return path


def _lying_zip(path: Path) -> Path:
    """A zip whose member declares 10 bytes but holds a whole log."""
    _zip_with(path, {"trace.log": tlparse_input("links.log").read_bytes()})
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.index(signature)
        data[at + offset : at + offset + 4] = (10).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    return path


def _huge_declared_zip(path: Path) -> Path:
    """Three rank logs that each declare almost 4 GiB: over the 8 GiB unpacked-size cap."""
    log = tlparse_input("links.log").read_bytes()
    names = [f"dedicated_log_torch_trace_rank_{r}_x.log" for r in range(3)]
    _zip_with(path, dict.fromkeys(names, log))
    data = bytearray(path.read_bytes())
    start = 0
    while (at := data.find(b"PK\x01\x02", start)) >= 0:
        data[at + 24 : at + 28] = (0xFFFF_FFF0).to_bytes(4, "little")
        start = at + 4
    path.write_bytes(bytes(data))
    return path


LOG = b"".join([trace_lines({"artifact": {"name": "a", "encoding": "string"}}, "x").encode()])
ARCHIVES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "zip_slip": (
        lambda d: _zip_with(d / "a.zip", {"../../outside.log": LOG}),
        "member '../../outside.log' would escape; refused",
    ),
    "zip_absolute": (
        lambda d: _zip_with(d / "a.zip", {"/tmp/tlsite_outside.log": LOG}),
        "would escape; refused",
    ),
    "zip_backslashes": (
        lambda d: _zip_with(d / "a.zip", {"..\\..\\outside.log": LOG}),
        "would escape; refused",
    ),
    "zip_drive_letter": (
        lambda d: _zip_with(d / "a.zip", {"C:/outside.log": LOG}),
        "would escape; refused",
    ),
    "zip_symlink": (
        lambda d: _zip_with(d / "a.zip", {"trace.log": b"/etc/passwd"}, symlink="trace.log"),
        "is a symlink; refused",
    ),
    "7z_slip": (
        lambda d: _7z_with(d / "a.7z", {"logs/../../outside.log": LOG}),
        "would escape; refused",
    ),
    "zip_member_lies_about_its_size": (
        lambda d: _lying_zip(d / "a.zip"),
        "the data breaks off before any record",
    ),
    "zip_declares_a_bomb": (
        lambda d: _huge_declared_zip(d / "a.zip"),
        "unpack to 12.0 GiB, over the 256.0 MiB limit; refused",  # 1100x the zip, at least
    ),
}


@pytest.mark.parametrize("kind", sorted(ARCHIVES))
def test_input_archives_cannot_escape_or_explode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    make, message = ARCHIVES[kind]
    inputs = tmp_path / "inputs" / "deep"
    inputs.mkdir(parents=True)
    archive = make(inputs)
    out = tmp_path / "out" / "site"
    before = snapshot(tmp_path)
    code = cli.main(["build", str(archive), "-o", str(out), "--no-browser"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert message in err
    assert not out.exists()
    assert snapshot(tmp_path) == before
    assert not list(tmp_path.rglob("outside.log"))
    assert not os.path.exists("/tmp/tlsite_outside.log")


# -- atomic output ---------------------------------------------------------------------------------
@pytest.fixture
def existing(tmp_path: Path) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """A report and its bundle from an earlier build: (site, its files, files beside it)."""
    out = tmp_path / "report"
    build(str(tlparse_input("links.log")), out, bundle="zip")
    with open(out / "index.html", "a", encoding="utf-8") as page:  # a file tlsite listed
        page.write("<!-- changed since the build -->\n")
    return out, snapshot(out), snapshot(tmp_path, skip=lambda p: out in p.parents or p == out)


def assert_untouched(existing: tuple[Path, dict[str, bytes], dict[str, bytes]]) -> None:
    out, site, beside = existing
    assert snapshot(out) == site
    assert snapshot(out.parent, skip=lambda p: out in p.parents or p == out) == beside
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []  # no staging folder, no moved-aside old report


def _fail_after_writing_pages(real: Callable[..., Any], error: BaseException) -> Callable:
    def failing(trace: Any, site_dir: Path, **kwargs: Any) -> Any:
        real(trace, site_dir, **kwargs)
        assert (site_dir / "index.html").is_file()  # the new report was half done
        raise error

    return failing


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_build_failing_after_the_pages_leaves_the_old_report(
    existing: Any, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    import tlsite.mkdocs_plugin.pipeline as site_build

    failing = _fail_after_writing_pages(site_build.build_report, error)
    monkeypatch.setattr(site_build, "build_report", failing)
    with pytest.raises(type(error)):
        build(str(EXAMPLE), existing[0], bundle="zip")
    assert_untouched(existing)


def test_a_build_failing_in_the_bundle_leaves_the_old_report_and_bundle(
    existing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tlsite.core.bundle as bundle

    def failing(*args: Any) -> bundle._Entry:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bundle, "_deflate_entry", failing)
    with pytest.raises(OSError):
        build(str(EXAMPLE), existing[0], bundle="zip")
    assert_untouched(existing)


def test_a_failed_swap_puts_the_old_report_back(
    existing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = existing[0]
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == out and "tlsite-old-" not in Path(src).name:
            raise OSError(5, "Input/output error")
        real(src, dst)

    monkeypatch.setattr(cli.os, "replace", replace)
    with pytest.raises(OSError):
        build(str(EXAMPLE), out, bundle="zip")
    assert_untouched(existing)


def test_unreadable_input_leaves_the_old_report(
    existing: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    out = existing[0]
    empty = out.parent / "empty.log"
    empty.write_bytes(b"")
    code = cli.main(["build", str(empty), "-o", str(out), "--overwrite", "--no-browser"])
    assert code == cli.EXIT_FAILED
    assert "empty file" in capsys.readouterr().err
    empty.unlink()
    assert_untouched(existing)


def test_a_successful_build_replaces_report_and_bundle_together(existing: Any) -> None:
    out = existing[0]
    outcome = build(str(EXAMPLE), out, bundle="zip")
    assert "changed since the build" not in (out / "index.html").read_text(encoding="utf-8")
    assert outcome.bundle == out.with_name("report.zip")
    with zipfile.ZipFile(outcome.bundle) as bundle:
        names = {n.removeprefix("report/") for n in bundle.namelist()}
    assert names == set(snapshot(out))
    assert sorted(p.name for p in out.parent.iterdir()) == ["report", "report.zip"]


# -- deterministic output --------------------------------------------------------------------------
class _AnotherDay(datetime.datetime):
    """``datetime`` as MkDocs sees it on another day (it dates pages and the sitemap)."""

    @classmethod
    def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:  # type: ignore[override]
        return datetime.datetime(2001, 2, 3, 4, 5, 6, tzinfo=tz)


def _provenance_trace() -> Path:
    found = sorted((TORCH_213 / "provenance").glob("*.log"))
    if not found:
        pytest.fail(f"no provenance trace in {TORCH_213}")
    return found[0]


DETERMINISM_TRACES = {
    "example": lambda: EXAMPLE,
    "export": lambda: tlparse_input("export.log"),
    "provenance": _provenance_trace,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DETERMINISM_TRACES))
def test_two_builds_are_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    import mkdocs.utils

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    source = DETERMINISM_TRACES[name]()
    built = []
    for run in ("first", "second"):
        log = tmp_path / f"input-{run}" / "trace.log"  # the same name, in another folder
        log.parent.mkdir()
        shutil.copyfile(source, log)
        with monkeypatch.context() as patch:
            if run == "second":
                patch.setattr(mkdocs.utils, "datetime", _AnotherDay)
            outcome = build(str(log), tmp_path / run / "report", bundle="zip")
        assert outcome.bundle is not None
        sevenzip = outcome.site.with_name("report.7z")
        write_7z(outcome.site, sevenzip)  # files written at other times, with other ctimes
        built.append((snapshot(outcome.site), outcome.bundle.read_bytes(), sevenzip.read_bytes()))
    (site_1, zip_1, sz_1), (site_2, zip_2, sz_2) = built
    assert site_1 == site_2
    assert zip_1 == zip_2
    assert sz_1 == sz_2

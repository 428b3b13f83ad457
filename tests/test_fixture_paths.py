"""The traces this repository ships hold no path of the machine they were made on.

Fixtures and the packaged example are real traces, and torch writes absolute paths into them
(scripts, virtual environments, the interpreter). ``tests/fixtures/scripts/scrub_paths.py``
rewrites them to neutral ones; these tests catch a trace committed without it, and a rewrite
that left a payload's declared MD5 stale (which a report would call damaged).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import py7zr
import pytest
from corpus import FIXTURE_TRACES, PROJECT_ROOT

from tlsite.core import load

_SCRIPT = PROJECT_ROOT / "tests" / "fixtures" / "scripts" / "scrub_paths.py"
_spec = importlib.util.spec_from_file_location("scrub_paths", _SCRIPT)
assert _spec is not None and _spec.loader is not None
scrub_paths = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scrub_paths)
LEFT, scrub = scrub_paths.LEFT, scrub_paths.scrub

EXAMPLE = PROJECT_ROOT / "core" / "examples" / "example.log"


def _shipped_logs(unpacked: Path) -> dict[str, bytes]:
    """Every trace this repository holds, by a name for the failure message (``unpacked``:
    a folder to extract archives into)."""
    logs = {str(p.relative_to(PROJECT_ROOT)): p.read_bytes() for p in FIXTURE_TRACES.rglob("*.log")}
    logs[str(EXAMPLE.relative_to(PROJECT_ROOT))] = EXAMPLE.read_bytes()
    for archive in FIXTURE_TRACES.rglob("*.7z"):
        into = unpacked / archive.stem
        with py7zr.SevenZipFile(archive) as z:
            z.extractall(into)
        for log in into.rglob("*.log"):
            logs[f"{archive.relative_to(PROJECT_ROOT)}:{log.relative_to(into)}"] = log.read_bytes()
    return logs


@pytest.fixture(scope="module")
def shipped_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return _shipped_logs(tmp_path_factory.mktemp("unpacked"))


def test_no_shipped_trace_holds_a_machine_path(shipped_logs: dict[str, bytes]) -> None:
    assert len(shipped_logs) > 60
    left = {}
    for name, data in shipped_logs.items():
        found = LEFT.search(data)
        if found is not None:
            line = data.count(b"\n", 0, found.start()) + 1
            left[name] = (line, data[found.start() : found.start() + 40])
    assert not left, left


def _damaged(path: Path) -> int:
    trace = load(str(path))
    try:
        return trace.stats.findings["md5_mismatch"]
    finally:
        trace.close()


def test_scrubbing_keeps_every_payload_readable(tmp_path: Path) -> None:
    # the 2.15 fixture as this machine wrote it: paths in payloads, their MD5s declared for them
    shipped = (FIXTURE_TRACES / "torch-2.15" / "graph_breaks.log").read_bytes()
    made_here = tmp_path / "made_here.log"
    made_here.write_bytes(shipped.replace(b"/home/user/traces/", b"/work/traces/"))
    assert _damaged(made_here) > 0  # the paths are in payloads: their MD5s no longer match
    scrubbed = tmp_path / "scrubbed.log"
    scrubbed.write_bytes(scrub(made_here.read_bytes()))
    assert _damaged(scrubbed) == 0
    assert LEFT.search(scrubbed.read_bytes()) is None


def _one_record(payload_lines: list[bytes], newline: bytes = b"\n") -> bytes:
    """A log of one artifact record whose payload is ``payload_lines`` (``b""``: a blank
    line between them), its MD5 declared as torch declares it."""
    payload = b"\n".join(line for line in payload_lines if line)
    md5 = hashlib.md5(payload).hexdigest()
    head = (
        'V1129 10:00:00.000000 123 torch/_dynamo/utils.py:1] {"artifact": {"name": "x", '
        '"encoding": "string"}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0, '
        f'"has_payload": "{md5}"}}'
    ).encode()
    lines = [head] + [b"\t" + line if line else b"" for line in payload_lines]
    return newline.join(lines) + newline


@pytest.mark.parametrize(
    ("payload", "newline"),
    [
        ([b"first", b"", b'File "/work/main/x.py", line 3'], b"\n"),  # a blank line inside
        ([b'File "/work/main/x.py", line 3', b"", b"last"], b"\n"),
        ([b'File "/work/main/x.py", line 3', b"last"], b"\r\n"),
        ([b'File "/work/main/x.py", line 3\r', b"last"], b"\r\n"),  # a CR before the CRLF
    ],
)
def test_a_payload_the_reader_accepts_is_scrubbed_with_a_true_md5(
    tmp_path: Path, payload: list[bytes], newline: bytes
) -> None:
    made_here = tmp_path / "made_here.log"
    made_here.write_bytes(_one_record(payload, newline))
    assert _damaged(made_here) == 0
    scrubbed = tmp_path / "scrubbed.log"
    scrubbed.write_bytes(scrub(made_here.read_bytes()))
    assert b"/home/user/tlsite/x.py" in scrubbed.read_bytes()
    assert LEFT.search(scrubbed.read_bytes()) is None
    assert _damaged(scrubbed) == 0


def test_this_checkouts_own_folder_and_other_homes_are_paths_to_scrub() -> None:
    # a fixture made from any checkout, or under any home folder, is caught and rewritten
    repo = str(PROJECT_ROOT).encode()
    assert (
        scrub(repo + b"/tests/fixtures/scripts/x.py")
        == b"/home/user/tlsite/tests/fixtures/scripts/x.py"
    )
    for path in (b"/home/alice/src/x.py", b"/Users/bob/x.py", b"/root/x.py"):
        assert LEFT.search(path), path
    assert LEFT.search(b"/home/user/tlsite/x.py") is None

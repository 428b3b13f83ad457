"""Shared test helpers: where the real traces live, and a cached run of the reference tlparse.

The corpus is shared between projects and read in place (``../shared/corpus`` relative to the
project root); tests never copy it into the project. Copies into ``tmp_path`` are fine.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tlsite.core import Trace, load
from tlsite.core.render.compat import CompatWriter

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CORPUS = PROJECT_ROOT.parent / "shared" / "corpus"
TLPARSE_INPUTS = CORPUS / "tlparse" / "inputs"
TORCH_213 = CORPUS / "torch-2.13"
FIXTURE_TRACES = PROJECT_ROOT / "tests" / "fixtures" / "traces"
TRAINING_TRACE_GLOB = "training/*.log"

TLPARSE = "tlparse"
TLPARSE_VERSION = "0.4.3"
TLPARSE_TIMEOUT_S = 300


def tlparse_input(name: str) -> Path:
    """One of tlparse's own test inputs, e.g. ``tlparse_input("simple.log")``."""
    path = TLPARSE_INPUTS / name
    if not path.is_file():
        pytest.fail(f"corpus file missing: {path}")
    return path


def _non_empty(paths: Iterable[Path]) -> list[Path]:
    return sorted(p for p in paths if p.is_file() and p.stat().st_size > 0)


def tlparse_top_level_inputs() -> list[Path]:
    """``tlparse/inputs/*.log`` and ``*.txt`` (the single-rank test inputs)."""
    return _non_empty([*TLPARSE_INPUTS.glob("*.log"), *TLPARSE_INPUTS.glob("*.txt")])


def torch_213_traces() -> list[Path]:
    return _non_empty(TORCH_213.glob("*/*.log"))


def fixture_traces() -> list[Path]:
    """The torch 2.13 fixtures; the other versions' (``torch-<version>/``) and the diff pairs
    (``diff_<scenario>/``, one side of one on torch 2.15) have their own tests."""
    traces = FIXTURE_TRACES.glob("*/*.log")
    return _non_empty(p for p in traces if not p.parent.name.startswith(("torch-", "diff_")))


def differential_traces() -> list[Path]:
    """Every trace the differential tests compare against tlparse."""
    return tlparse_top_level_inputs() + torch_213_traces() + fixture_traces()


def all_corpus_traces() -> list[Path]:
    """Every non-empty trace: the differential set plus multi-rank and exec-order rank logs."""
    nested = [
        *TLPARSE_INPUTS.glob("*/*.log"),
        *(CORPUS / "tlparse" / "graph_exec_order_tests").glob("*.log"),
    ]
    return differential_traces() + _non_empty(nested)


def trace_id(path: Path) -> str:
    """A readable pytest id: the path below the corpus or project root."""
    for root in (CORPUS, PROJECT_ROOT):
        try:
            return str(path.relative_to(root))
        except ValueError:
            continue
    return path.name


def physical_lines(path: Path) -> int:
    """Lines as an editor counts them: a last line without a newline still counts."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


# -- writing small traces -----------------------------------------------------------------------
HEADER_PREFIX = "V1206 15:18:15.925000 1500233 torch/_dynamo/utils.py:1288] "


def trace_lines(envelope: dict[str, Any], payload: str | None = None, *, prefix: str = "") -> str:
    """One record as PyTorch writes it: glog header, JSON envelope, TAB-prefixed payload lines.

    With a payload, ``has_payload`` is set to its MD5 (unless the envelope already has one).
    """
    envelope = dict(envelope)
    if payload is not None:
        envelope.setdefault("has_payload", hashlib.md5(payload.encode("utf-8")).hexdigest())
    text = (prefix or HEADER_PREFIX) + json.dumps(envelope) + "\n"
    if payload is not None:
        text += "".join(f"\t{line}\n" for line in payload.split("\n"))
    return text


# -- our side -----------------------------------------------------------------------------------
def write_compat(log: Path, out: Path, *, export_mode: bool | None = None) -> Trace:
    """``load()`` + ``CompatWriter`` into ``out`` (what tlsite writes for tlparse users)."""
    trace = load(log, export_mode=export_mode)

    def raw_log() -> Iterable[bytes]:
        with open(log, "rb") as stream:
            yield from iter(lambda: stream.read(1 << 20), b"")

    CompatWriter(trace, out, raw_log=raw_log).write_all()
    return trace


def files_under(root: Path) -> set[str]:
    """Relative POSIX paths of every file below ``root``."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


# -- the reference tool -------------------------------------------------------------------------
_STATS = re.compile(r"^Stats \{(?P<body>[^}]*)\}\s*$", re.MULTILINE)


@dataclass
class TlparseRun:
    """One tlparse run: its output folder, exit code, stderr and parsed ``Stats { … }`` line."""

    log: Path
    out: Path
    returncode: int
    stderr: str
    stats: dict[str, int] | None = field(default=None)

    @property
    def files(self) -> set[str]:
        return files_under(self.out)

    def json(self, name: str) -> Any:
        return json.loads((self.out / name).read_text(encoding="utf-8"))


def parse_stats_line(stderr: str) -> dict[str, int] | None:
    """``Stats { ok: 64, fail_payload_md5: 1 }`` → ``{"ok": 64, "fail_payload_md5": 1}``."""
    match = _STATS.search(stderr)
    if match is None:
        return None
    stats: dict[str, int] = {}
    for part in match["body"].split(","):
        if part.strip():
            key, _, value = part.partition(":")
            stats[key.strip()] = int(value)
    return stats


@functools.cache
def tlparse_missing_reason() -> str | None:
    """Why the reference binary cannot be used, or None when ``tlparse 0.4.3`` is on PATH."""
    binary = shutil.which(TLPARSE)
    if binary is None:
        return "the reference tool `tlparse` is not installed (pip install tlparse==0.4.3)"
    try:
        version = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`tlparse --version` failed: {exc}"
    if version != f"tlparse {TLPARSE_VERSION}":
        return f"expected tlparse {TLPARSE_VERSION}, found {version!r}"
    return None


_cache: dict[tuple[Path, bool], TlparseRun] = {}
_cache_root: Path | None = None


def _root() -> Path:
    global _cache_root
    if _cache_root is None:
        _cache_root = Path(tempfile.mkdtemp(prefix="tlsite-tlparse-runs-"))
        atexit.register(shutil.rmtree, _cache_root, True)
    return _cache_root


def run_tlparse(log: Path, *, export: bool = False) -> TlparseRun:
    """Run tlparse once per (log, mode) per test process; skip when the binary is missing."""
    reason = tlparse_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    key = (log.resolve(), export)
    if key not in _cache:
        out = _root() / f"{len(_cache)}-{log.stem}{'-e' if export else ''}"
        command = [TLPARSE, str(log), "-o", str(out), "--overwrite", "--no-browser"]
        if export:
            command.append("-e")
        done = subprocess.run(command, capture_output=True, text=True, timeout=TLPARSE_TIMEOUT_S)
        _cache[key] = TlparseRun(
            log=log,
            out=out,
            returncode=done.returncode,
            stderr=done.stderr,
            stats=parse_stats_line(done.stderr),
        )
    return _cache[key]

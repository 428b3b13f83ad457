"""Fuzz whole builds: mutated real traces, crafted lines and archives, each in its own process.

``fuzz_reader.py`` checks the reader in-process; this runs ``tlsite build`` end to end in a
subprocess per input, under a wall-clock limit and an address-space limit, and records for
each input its exit code, whether a Python traceback was printed, its time and its peak
resident memory (``wait4``'s ``ru_maxrss``, which covers the worker processes it waited
for). An input passes when the build exits 0 (a report) or says why not in a ``tlsite:
error:`` line, prints no traceback, stays within both limits, and every JSON file tlsite
writes at the site's top level parses as strict JSON (no ``NaN``/``Infinity``).

Inputs are derived from seeds (``tests/fixtures/traces`` and small traces of the shared
corpus) by deterministic mutators: byte flips, cut and duplicated lines, JSON type swaps of
one field (numbers, strings, lists, objects, null, huge and non-finite numbers, odd unicode),
deep stacks, huge names, crafted header lines; and archives of them (zip, gzip, 7z, a
``.gz`` inside a ``.zip``, several rank logs in one zip).

Usage::

    nice -n 10 python bench/fuzz_build.py --minutes 15 --out /tmp/fuzz-build
    python bench/fuzz_build.py --replay /tmp/fuzz-build/failures/<name>   # one input again

Failing inputs are kept under ``<out>/failures/`` with the build's stderr; ``results.jsonl``
has one line per input and ``summary.json`` the totals (inputs, failures, maxima).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
CORPUS = PROJECT.parent / "shared" / "corpus"
SEED_LIMIT_BYTES = 3_000_000  # seeds above this are left out: a fuzz input must build fast

HEADER = "V1122 05:19:03.905000 20775 torch/_dynamo/utils.py:2009] "
ODD_STRINGS = [
    "",
    "\u202eevil\u202c",  # right-to-left override
    "\x00nul",
    "\ud800",  # a lone surrogate (JSON allows it; UTF-8 does not)
    "CON",
    "../../etc/passwd",
    "\x1b]8;;http://x\x07link\x1b]8;;\x07",
    "[bold]rich[/bold]",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 " * 50,
    "x" * 100_000,
]
ODD_VALUES: list[object] = [
    0,
    -1,
    1.5,
    10**300,
    "1",
    "text",
    [],
    [1, "a", None],
    {},
    {"a": {"b": [1]}},
    None,
    True,
    *ODD_STRINGS,
]
RAW_TOKENS = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1" * 400]


@dataclass
class Result:
    name: str
    mutation: str
    size: int
    exit_code: int
    traceback: bool
    timed_out: bool
    seconds: float
    peak_rss_mb: float
    bad_json: str = ""

    said_why: bool = False  # a failed build said why in a "tlsite: error:" line

    @property
    def ok(self) -> bool:
        handled = self.exit_code == 0 or self.said_why
        return handled and not self.traceback and not self.timed_out and not self.bad_json


# -- seeds --------------------------------------------------------------------------------------
def seeds() -> list[Path]:
    found = sorted((PROJECT / "tests" / "fixtures" / "traces").glob("*/*.log"))
    found += sorted((CORPUS / "torch-2.13").glob("*/*.log"))
    found += sorted((CORPUS / "tlparse" / "inputs").glob("*.log"))
    return [p for p in found if 0 < p.stat().st_size <= SEED_LIMIT_BYTES]


# -- mutators: (rng, lines) -> lines ---------------------------------------------------------
Lines = list[bytes]


def flip_bytes(rng: random.Random, lines: Lines) -> Lines:
    data = bytearray(b"".join(lines))
    for _ in range(rng.randint(1, 20)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data).splitlines(keepends=True)


def cut_line(rng: random.Random, lines: Lines) -> Lines:
    i = rng.randrange(len(lines))
    lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    return lines


def cut_log(rng: random.Random, lines: Lines) -> Lines:
    data = b"".join(lines)
    return data[: rng.randrange(len(data))].splitlines(keepends=True)


def duplicate_lines(rng: random.Random, lines: Lines) -> Lines:
    i = rng.randrange(len(lines))
    j = min(len(lines), i + rng.randint(1, 50))
    return lines[:j] + lines[i:j] * rng.randint(1, 20) + lines[j:]


def _records(lines: Lines) -> list[int]:
    return [i for i, line in enumerate(lines) if b"] {" in line[:200]]


def _split(line: bytes) -> tuple[bytes, dict | None]:
    head, sep, body = line.partition(b"] ")
    try:
        value = json.loads(body)
    except ValueError:
        return line, None
    return head + sep, value if isinstance(value, dict) else None


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path inside ``value`` (dicts and lists), bounded."""
    out: list[tuple] = []
    todo = [(value, prefix)]
    while todo and len(out) < 500:
        current, path = todo.pop()
        items = current.items() if isinstance(current, dict) else enumerate(current)
        for key, child in items:
            out.append((*path, key))
            if isinstance(child, (dict, list)) and child:
                todo.append((child, (*path, key)))
    return out


def swap_type(rng: random.Random, lines: Lines) -> Lines:
    """One field of one record gets a value of another type (or a raw non-finite number)."""
    records = _records(lines)
    for _ in range(20):
        if not records:
            return lines
        i = rng.choice(records)
        head, envelope = _split(lines[i])
        if envelope is None:
            continue
        paths = _paths(envelope)
        if not paths:
            continue
        path = rng.choice(paths)
        target = envelope
        for key in path[:-1]:
            target = target[key]
        if rng.random() < 0.3:
            marker = "@@RAW@@"
            target[path[-1]] = marker
            text = json.dumps(envelope).replace(f'"{marker}"', rng.choice(RAW_TOKENS))
        else:
            target[path[-1]] = rng.choice(ODD_VALUES)
            text = json.dumps(envelope)
        lines[i] = head + text.encode("utf-8", "surrogatepass") + b"\n"
        return lines
    return lines


def deep_stack(rng: random.Random, lines: Lines) -> Lines:
    depth = rng.choice([300, 1_100, 5_000])
    frame = {"line": 1, "name": "recurse", "filename": "/x/deep.py"}
    stack = [dict(frame, line=n) for n in range(depth)]
    cid = {"frame_id": rng.randrange(3), "frame_compile_id": 0, "attempt": 0}
    record = HEADER + json.dumps({"dynamo_start": {"stack": stack}, **cid}) + "\n"
    at = rng.randrange(len(lines) + 1)
    return [*lines[:at], record.encode(), *lines[at:]]


def huge_names(rng: random.Random, lines: Lines) -> Lines:
    name = rng.choice([*ODD_STRINGS, "A" * 5000, "nul.txt", "a/b\\c:d*e?f"])
    kind = rng.choice(["artifact", "dump_file", "link", "graph_dump"])
    meta = {"name": name, "encoding": "string", "url": name, "filename": name}
    record = HEADER + json.dumps({kind: meta, "frame_id": 0, "frame_compile_id": 0})
    payload = "payload"
    import hashlib

    envelope = json.loads(record[len(HEADER) :])
    envelope["has_payload"] = hashlib.md5(payload.encode()).hexdigest()
    text = HEADER + json.dumps(envelope) + "\n\t" + payload + "\n"
    at = rng.randrange(len(lines) + 1)
    return [*lines[:at], text.encode("utf-8", "surrogatepass"), *lines[at:]]


def crafted_lines(rng: random.Random, lines: Lines) -> Lines:
    crafted = [
        b"V0101 00:00:00.000000 " + b"1" * 20_000 + b"\n",
        HEADER.encode() + b"{" * 5_000 + b"\n",
        HEADER.encode() + b'{"str": ["a", 99999999999999999999]}\n',
        HEADER.encode() + b'{"dynamo_start": {"stack": [{"filename": 10, "line": "x"}]}}\n',
        HEADER.encode() + b'{"artifact": {"name": "x"}, "has_payload": "00"}\n\t\xff\xfe\n',
        HEADER.encode()
        + b'{"compilation_metrics": {}, "frame_id": -1, "frame_compile_id": 1e400}\n',
        HEADER.encode() + b'{"chromium_event": {}, "has_payload": "x"}\n\t{"ph": "B", "ts": NaN}\n',
        b"\t orphan payload\n",
        b"\r\n\r\n",
        b"\x00" * 1000 + b"\n",
    ]
    at = rng.randrange(len(lines) + 1)
    return lines[:at] + rng.sample(crafted, rng.randint(1, 4)) + lines[at:]


MUTATORS: dict[str, Callable[[random.Random, Lines], Lines]] = {
    "flip_bytes": flip_bytes,
    "cut_line": cut_line,
    "cut_log": cut_log,
    "duplicate_lines": duplicate_lines,
    "swap_type": swap_type,
    "deep_stack": deep_stack,
    "huge_names": huge_names,
    "crafted_lines": crafted_lines,
}


# -- containers -----------------------------------------------------------------------------------
def write_input(rng: random.Random, data: bytes, folder: Path, stem: str) -> tuple[Path, str]:
    """The mutated log as a plain file or inside an archive; the path and how it was packed."""
    form = rng.choices(
        ["plain", "gz", "zip", "zip_gz", "7z", "ranks_zip", "cut_gz"], [6, 1, 1, 1, 1, 1, 1]
    )[0]
    log_name = "dedicated_log_torch_trace_fuzz.log"
    if form == "plain":
        path = folder / f"{stem}.log"
        path.write_bytes(data)
    elif form in ("gz", "cut_gz"):
        path = folder / f"{stem}.log.gz"
        packed = gzip.compress(data, compresslevel=1)
        if form == "cut_gz":
            packed = packed[: max(20, len(packed) // 2)]
        path.write_bytes(packed)
    elif form == "zip":
        path = folder / f"{stem}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(rng.choice([log_name, "a/../" + log_name, "\u202e.log"]), data)
    elif form == "zip_gz":
        path = folder / f"{stem}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(log_name + ".gz", gzip.compress(data, compresslevel=1))
    elif form == "7z":
        import py7zr

        path = folder / f"{stem}.7z"
        with py7zr.SevenZipFile(path, "w") as archive:
            archive.writestr(data, log_name)
    else:  # ranks_zip: two ranks, one of them the mutated log
        path = folder / f"{stem}.zip"
        first = data.splitlines(keepends=True)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(
                "dedicated_log_torch_trace_rank_0_a.log", b"".join(first[: len(first) // 2])
            )
            rank = rng.choice(["1", "9" * 300, "00001"])
            zf.writestr(f"dedicated_log_torch_trace_rank_{rank}_b.log", data)
    return path, form


# -- running one build --------------------------------------------------------------------------
def _limits(memory_mb: int) -> Callable[[], None]:
    def apply() -> None:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.setsid()

    return apply


def run_build(path: Path, out: Path, *, seconds: float, memory_mb: int) -> tuple:
    """(exit code, stderr, timed out, wall seconds, peak RSS MB) of one ``tlsite build``."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT.parent)}
    command = [sys.executable, "-m", "tlsite", "build", str(path), "-o", str(out)]
    command += ["--no-browser", "--overwrite", "--bundle", "none", "--quiet", "--jobs", "1"]
    started = time.monotonic()
    with open(out.parent / "stderr.txt", "w+b") as err:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=err, env=env, preexec_fn=_limits(memory_mb)
        )
        timed_out = False
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > seconds:
                timed_out = True
                os.killpg(process.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    return process.returncode, stderr, timed_out, time.monotonic() - started, usage.ru_maxrss / 1024


def strict_json_problem(site: Path) -> str:
    def refuse(token: str) -> None:
        raise ValueError(f"holds {token}")

    for path in [*site.glob("*.json"), *site.glob("rank_*/*.json")]:
        try:
            json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)
        except ValueError as exc:
            return f"{path.relative_to(site)}: {exc}"
    return ""


def fuzz_one(
    rng: random.Random, seed: Path, work: Path, number: int, args: argparse.Namespace
) -> tuple[Result, Path]:
    lines = seed.read_bytes().splitlines(keepends=True) or [b"\n"]
    names = rng.sample(list(MUTATORS), rng.randint(1, 3))
    for name in names:
        lines = MUTATORS[name](rng, lines) or [b"\n"]
    data = b"".join(lines)
    case = work / f"case{number}"
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir(parents=True)
    path, form = write_input(rng, data, case, f"{seed.stem[:40]}_{number}")
    site = case / "site"
    code, stderr, timed_out, seconds, rss = run_build(
        path, site, seconds=args.seconds, memory_mb=args.memory_mb
    )
    result = Result(
        name=path.name,
        mutation=f"{seed.name}: {'+'.join(names)} as {form}",
        size=path.stat().st_size,
        exit_code=code,
        traceback="Traceback (most recent call last)" in stderr,
        timed_out=timed_out,
        seconds=round(seconds, 2),
        peak_rss_mb=round(rss, 1),
        bad_json=strict_json_problem(site) if code == 0 else "",
        said_why="tlsite: error:" in stderr,
    )
    return result, case


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--seconds", type=float, default=120, help="time limit per build")
    parser.add_argument("--memory-mb", type=int, default=4096, help="address-space limit")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("/tmp/fuzz-build"))
    parser.add_argument("--replay", type=Path, help="build one saved input and report")
    args = parser.parse_args()
    if args.replay:
        out = Path(args.out) / "replay"
        out.mkdir(parents=True, exist_ok=True)
        code, stderr, timed_out, seconds, rss = run_build(
            args.replay, out / "site", seconds=args.seconds, memory_mb=args.memory_mb
        )
        print(stderr)
        print(f"exit {code}, timed out {timed_out}, {seconds:.1f} s, {rss:.0f} MB")
        return 0
    rng = random.Random(args.seed)
    work = args.out / "work"
    failures = args.out / "failures"
    failures.mkdir(parents=True, exist_ok=True)
    all_seeds = seeds()
    deadline = time.monotonic() + args.minutes * 60
    results: list[Result] = []
    with open(args.out / "results.jsonl", "w", encoding="utf-8") as log:
        number = 0
        while time.monotonic() < deadline:
            number += 1
            result, case = fuzz_one(rng, rng.choice(all_seeds), work, number, args)
            results.append(result)
            log.write(json.dumps({**asdict(result), "ok": result.ok}) + "\n")
            log.flush()
            if not result.ok:
                keep = failures / f"case{number}"
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(case, keep, ignore=shutil.ignore_patterns("site"))
                print(f"FAIL {result}", flush=True)
            shutil.rmtree(case, ignore_errors=True)
    summary = {
        "inputs": len(results),
        "failures": sum(not r.ok for r in results),
        "tracebacks": sum(r.traceback for r in results),
        "timeouts": sum(r.timed_out for r in results),
        "exit_codes": {
            str(c): sum(r.exit_code == c for r in results)
            for c in sorted({r.exit_code for r in results})
        },
        "max_seconds": max((r.seconds for r in results), default=0),
        "max_rss_mb": max((r.peak_rss_mb for r in results), default=0),
        "largest_input_bytes": max((r.size for r in results), default=0),
        "slowest": asdict(max(results, key=lambda r: r.seconds)) if results else None,
        "hungriest": asdict(max(results, key=lambda r: r.peak_rss_mb)) if results else None,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())

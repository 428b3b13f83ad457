"""Time and peak memory of tlsite on crafted hostile inputs, at growing sizes.

Each input is generated into a scratch folder and read in its own subprocess (``load()``
alone, or ``tlsite build`` with ``--build``); wall time, CPU time and peak RSS come from
``os.wait4`` of that child. Doubling the size should about double time, and memory should
stay flat (records that no page lists) or grow with the largest page:

- ``long-line``: one record whose JSON envelope is N MB (and a line of N MB of junk);
- ``digits``: a line ``V0101 00:00:00.000000 111…`` of N KB (the header pattern's worst case);
- ``tiny``: N records of kinds torch writes by the thousand (string table, chromium events,
  tensor descriptions, guards);
- ``guards``, ``symbols``, ``chromium``: N ``guard_added``, ``create_symbol`` or chromium
  records (the first two in one compile id); ``guard-storm``: N guards, 1,000 per compile id;
- ``artifacts``: N artifacts in one compile id;
- ``breaks``, ``failures``: N compile ids of one frame, each with its own graph break or
  compile failure (a recompile storm: one page per compile id, as tlparse makes).

    python bench/hostile_bench.py                        # every case, default sizes
    python bench/hostile_bench.py tiny --sizes 250000 500000 1000000
    python bench/hostile_bench.py artifacts --build --sizes 10000 20000 40000
    python bench/hostile_bench.py artifacts --build --sizes 100000 300000 1000000  # a site of
    # a million files: the zip's directory, digests and listing must not grow with it
    python bench/hostile_bench.py guards symbols --build --sizes 1000000 3000000
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scratch_disk import warn_if_unjournaled

PROJECT_PARENT = Path(__file__).resolve().parents[2]
HEAD = "V0101 00:00:00.000000 1 f.py:1] "
IDS = '"frame_id": 0, "frame_compile_id": 0, "attempt": 0'

LOAD = r"""
import sys
from tlsite.core import load
trace = load(sys.argv[1])
print(trace.stats.summary())
trace.close()
"""


def _payload(payload: str) -> str:
    body = payload.replace("\n", "\n\t")
    return f'"has_payload": "{hashlib.md5(payload.encode()).hexdigest()}"}}\n\t{body}\n'


def long_line(path: Path, megabytes: int) -> None:
    pad = "a" * (megabytes * 500_000)
    with open(path, "w") as out:
        out.write(HEAD + '{"artifact": {"name": "x", "encoding": "string", "pad": "' + pad)
        out.write('"}}\n' + "x" * (megabytes * 500_000) + "\n")


def digits(path: Path, kilobytes: int) -> None:
    path.write_text("V0101 00:00:00.000000 " + "1" * (kilobytes * 1000) + "\n")


def tiny(path: Path, count: int) -> None:
    chromium = '{"name": "a", "ph": "i", "ts": 1700000000000000, "pid": 0}'
    with open(path, "w") as out:
        out.write(HEAD + '{"str": ["a.py", 0]}\n')
        for i in range(count):
            kind = i % 4
            if kind == 0:
                out.write(f'{HEAD}{{"str": ["x{i}.py", {i % 1000}]}}\n')
            elif kind == 1:
                out.write(HEAD + '{"chromium_event": {}, ' + IDS + ", " + _payload(chromium))
            elif kind == 2:
                out.write(f'{HEAD}{{"describe_tensor": {{"id": {i}, "ndim": 1}}, {IDS}}}\n')
            else:
                out.write(f'{HEAD}{{"guard_added_fast": {{"expr": "s0 > 1"}}, {IDS}}}\n')


def _ids(frame: int, attempt: int = 0) -> str:
    return f'"frame_id": {frame}, "frame_compile_id": {attempt}, "attempt": 0'


def guards(path: Path, count: int) -> None:
    """N ``guard_added`` records (distinct expressions) in one compile id."""
    with open(path, "w") as out:
        for i in range(count):
            out.write(f'{HEAD}{{"guard_added": {{"expr": "s0 > {i}"}}, {IDS}}}\n')


def guard_storm(path: Path, count: int) -> None:
    """N ``guard_added`` records, 1,000 in each compile id (each compile under the per-compile
    cap: the cap on the whole trace bounds them)."""
    with open(path, "w") as out:
        for i in range(count):
            ids = _ids(0, i // 1000)
            out.write(f'{HEAD}{{"guard_added": {{"expr": "s0 > {i % 1000}"}}, {ids}}}\n')


def symbols(path: Path, count: int) -> None:
    """N ``create_symbol`` records in one compile id."""
    with open(path, "w") as out:
        for i in range(count):
            meta = f'{{"symbol": "s{i}", "val": 2, "source": "L[\'x{i}\'].size()[0]"}}'
            out.write(f'{HEAD}{{"create_symbol": {meta}, {IDS}}}\n')


def chromium(path: Path, count: int) -> None:
    """N chromium instant events."""
    with open(path, "w") as out:
        for i in range(count):
            event = f'{{"name": "e{i % 100}", "ph": "i", "ts": {1700000000000000 + i}, "pid": 0}}'
            out.write(HEAD + '{"chromium_event": {}, ' + IDS + ", " + _payload(event))


def breaks(path: Path, count: int) -> None:
    """N distinct graph breaks, one per compile id of one frame (a recompile storm)."""
    with open(path, "w") as out:
        for i in range(count):
            text = f"Graph break in user code at /x/m.py:{i}\nGraph Break Reason: Unsupported {i}"
            name = '{"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, '
            out.write(HEAD + name + _ids(0, i) + ", " + _payload(text))


def failures(path: Path, count: int) -> None:
    """N compile ids, each failing with its own reason (a recompile storm that fails)."""
    with open(path, "w") as out:
        for i in range(count):
            meta = (
                f'{{"co_name": "f", "co_filename": "/x/m.py", "co_firstlineno": 1, '
                f'"fail_type": "Unsupported", "fail_reason": "reason {i}", '
                f'"recompile_reason": "size mismatch at index 0. expected {i}, actual {i + 1}"}}'
            )
            out.write(f'{HEAD}{{"compilation_metrics": {meta}, {_ids(0, i)}}}\n')


def artifacts(path: Path, count: int) -> None:
    with open(path, "w") as out:
        for i in range(count):
            name = f'{{"artifact": {{"name": "art_{i}", "encoding": "string"}}, '
            out.write(HEAD + name + IDS + ", " + _payload(f"payload {i}"))


CASES: dict[str, tuple[Callable[[Path, int], None], list[int], str]] = {
    "long-line": (long_line, [50, 100, 200], "MB"),
    "digits": (digits, [25, 50, 100], "KB"),
    "tiny": (tiny, [250_000, 500_000, 1_000_000], "records"),
    "artifacts": (artifacts, [5_000, 10_000, 20_000], "artifacts"),
    "guards": (guards, [250_000, 500_000, 1_000_000], "records"),
    "guard-storm": (guard_storm, [250_000, 500_000, 1_000_000], "records"),
    "symbols": (symbols, [250_000, 500_000, 1_000_000], "records"),
    "chromium": (chromium, [250_000, 500_000, 1_000_000], "records"),
    "breaks": (breaks, [5_000, 10_000, 20_000], "compile ids"),
    "failures": (failures, [5_000, 10_000, 20_000], "compile ids"),
}


def run(trace: Path, build: bool, scratch: Path) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds, peak RSS (MB) and the last output line of one child."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_PARENT)}
    if build:
        site = scratch / "site"
        shutil.rmtree(site, ignore_errors=True)
        command = [sys.executable, "-m", "tlsite", "build", str(trace), "-o", str(site)]
    else:
        command = [sys.executable, "-c", LOAD, str(trace)]
    started = time.monotonic()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert child.stdout is not None
    output = child.stdout.read().decode(errors="replace").strip().splitlines()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n" + "\n".join(output[-20:]))
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss // 1024, output[-1] if output else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", choices=[*CASES, []], default=list(CASES))
    parser.add_argument("--sizes", type=int, nargs="+", help="sizes in the case's unit")
    parser.add_argument("--build", action="store_true", help="time `tlsite build`, not load()")
    args = parser.parse_args()
    print("| case | size | wall (s) | CPU (s) | peak RSS (MB) |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="tlsite-hostile-") as folder:
        warn_if_unjournaled(folder)
        scratch = Path(folder)
        for case in args.cases:
            make, sizes, unit = CASES[case]
            for size in args.sizes or sizes:
                trace = scratch / f"{case}-{size}.log"
                make(trace, size)
                wall, cpu, rss, _ = run(trace, args.build, scratch)
                trace.unlink()
                print(f"| {case} | {size:,} {unit} | {wall:.2f} | {cpu:.2f} | {rss:,} |")


if __name__ == "__main__":
    main()

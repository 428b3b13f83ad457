"""Time tlsite's parse stage against tlparse 0.4.3 on the same trace, in the same run.

Three commands are measured, each in its own subprocess (wall time with a monotonic clock,
peak RSS from ``os.wait4``'s rusage of that very child), interleaved for ``--repeat`` rounds:

* ``tlsite load+compat``: ``load()`` and ``CompatWriter.write_all()`` (tlparse's machine
  outputs: artifact files, payloads/, raw.jsonl, compile_directory.json, chromium events, raw.log);
* ``tlsite load``: ``load()`` alone (reading, modelling, payload store);
* ``tlparse``: ``tlparse TRACE -o OUT --overwrite --no-browser`` (which also renders its HTML).

Subprocess wall time includes interpreter start-up and imports, as a user sees it; the
``in-process`` column is the time the Python child measured around its own work.

    python bench/parse_bench.py /tmp/big.log
    python bench/parse_bench.py --make 128MB            # generate with make_trace.py first
    python bench/parse_bench.py /tmp/big.log --profile  # plus cProfile of load()
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = BENCH_DIR.parent
TLPARSE = "tlparse"

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from tlsite.core import load
trace_path, out, write = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if write:  # "load" alone does not pay for the renderer's imports (Jinja)
    from tlsite.core.render.compat import CompatWriter
t1 = time.perf_counter()
trace = load(trace_path)
t2 = time.perf_counter()
if write:
    from pathlib import Path
    CompatWriter(trace, Path(out), raw_log=Path(trace_path)).write_all()
t3 = time.perf_counter()
records = trace.stats.records
trace.close()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "write_s": t3 - t2,
                  "records": records}))
"""


@dataclass
class Run:
    wall_s: float
    peak_rss_mb: float
    inner_s: float | None = None
    records: int | None = None


@dataclass
class Subject:
    name: str
    runs: list[Run] = field(default_factory=list)

    def walls(self) -> list[float]:
        return [r.wall_s for r in self.runs]

    @property
    def median_wall(self) -> float:
        return statistics.median(self.walls())

    @property
    def peak_rss(self) -> float:
        return max(r.peak_rss_mb for r in self.runs)

    @property
    def median_inner(self) -> float | None:
        inner = [r.inner_s for r in self.runs if r.inner_s is not None]
        return statistics.median(inner) if inner else None


def measure(command: list[str], *, env: dict[str, str] | None = None) -> tuple[Run, str]:
    """Run ``command``; wall time and the child's own peak RSS (``ru_maxrss``, KiB on Linux)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if child.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({child.returncode}):\n{stderr[-3000:]}")
    rss_mb = usage.ru_maxrss * 1024 / 1e6 if sys.platform != "darwin" else usage.ru_maxrss / 1e6
    return Run(wall, rss_mb), stdout


def run_tlsite(trace: Path, scratch: Path, *, write: bool) -> Run:
    out = scratch / "tlsite-out"
    env = dict(os.environ, TMPDIR=str(scratch))  # the payload store lives beside the output
    command = [sys.executable, "-c", CHILD, str(trace), str(out), "1" if write else "0"]
    run, stdout = measure(command, env=env)
    shutil.rmtree(out, ignore_errors=True)
    report = json.loads(stdout.strip().splitlines()[-1])
    run.inner_s = report["load_s"] + report["write_s"]
    run.records = report["records"]
    return run


def run_tlparse(trace: Path, scratch: Path) -> Run:
    out = scratch / "tlparse-out"
    run, _ = measure([TLPARSE, str(trace), "-o", str(out), "--overwrite", "--no-browser"])
    shutil.rmtree(out, ignore_errors=True)
    return run


def fmt_range(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def table(trace: Path, subjects: list[Subject], repeat: int) -> str:
    size_mb = trace.stat().st_size / 1e6
    reference = next((s for s in subjects if s.name == "tlparse"), None)
    lines = [
        f"Trace: `{trace.name}`, {size_mb:,.1f} MB; {repeat} runs each, interleaved; "
        f"MB = 10^6 bytes; peak RSS = max over runs.",
        "",
        "| command | median wall s | min–max s | in-process s | MB/s | peak RSS MB "
        "| throughput vs tlparse | peak RSS vs tlparse |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for subject in subjects:
        median = subject.median_wall
        inner = subject.median_inner
        speed = "" if reference is None else f"{reference.median_wall / median:.2f}×"
        memory = "" if reference is None else f"{subject.peak_rss / reference.peak_rss:.2f}×"
        lines.append(
            f"| {subject.name} | {median:.2f} | {fmt_range(subject.walls())} | "
            f"{'' if inner is None else f'{inner:.2f}'} | {size_mb / median:,.1f} | "
            f"{subject.peak_rss:,.0f} | {speed} | {memory} |"
        )
    return "\n".join(lines)


def profile_load(trace: Path, top: int) -> str:
    """cProfile of ``load()`` in a child process, sorted by cumulative time."""
    code = (
        "import cProfile, pstats, io, sys\n"
        "from tlsite.core import load\n"
        "profiler = cProfile.Profile()\n"
        "profiler.enable(); trace = load(sys.argv[1]); profiler.disable()\n"
        "stream = io.StringIO()\n"
        f"pstats.Stats(profiler, stream=stream).sort_stats('cumulative').print_stats({top})\n"
        "trace.close(); print(stream.getvalue())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(trace)], capture_output=True, text=True, check=True
    )
    return done.stdout


def make_trace(size: str, scratch: Path) -> Path:
    path = scratch / f"synthetic-{size}.log"
    subprocess.run(
        [sys.executable, str(BENCH_DIR / "make_trace.py"), "--size", size, "-o", str(path)],
        check=True,
    )
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, nargs="?", help="trace to parse")
    parser.add_argument("--make", metavar="SIZE", help="generate a synthetic trace (e.g. 128MB)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (default 3)")
    parser.add_argument("--no-tlparse", action="store_true", help="skip the reference tool")
    parser.add_argument("--profile", action="store_true", help="also cProfile load()")
    parser.add_argument("--top", type=int, default=25, help="profile entries to show")
    args = parser.parse_args(argv)
    if (args.trace is None) == (args.make is None):
        parser.error("give a trace or --make SIZE (not both)")
    with_tlparse = not args.no_tlparse
    if with_tlparse and shutil.which(TLPARSE) is None:
        parser.error("tlparse is not installed (pip install tlparse==0.4.3) or use --no-tlparse")

    scratch = Path(tempfile.mkdtemp(prefix="tlsite-bench-"))
    try:
        trace = args.trace.resolve() if args.trace else make_trace(args.make, scratch)
        subjects = [Subject("tlsite load+compat"), Subject("tlsite load")]
        if with_tlparse:
            subjects.append(Subject("tlparse"))
        for round_number in range(args.repeat):
            for subject in subjects:
                if subject.name == "tlparse":
                    run = run_tlparse(trace, scratch)
                else:
                    run = run_tlsite(trace, scratch, write=subject.name.endswith("compat"))
                subject.runs.append(run)
                print(
                    f"round {round_number + 1}: {subject.name}: {run.wall_s:.2f} s, "
                    f"{run.peak_rss_mb:.0f} MB",
                    file=sys.stderr,
                )
        print(table(trace, subjects, args.repeat))
        if args.profile:
            print()
            print(f"cProfile of load({trace.name}), top {args.top} by cumulative time:")
            print("```")
            print(profile_load(trace, args.top).rstrip())
            print("```")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

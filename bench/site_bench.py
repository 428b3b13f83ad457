"""Time ``tlsite build`` (site + zip) against ``tlparse`` on the same traces, in the same run.

For every corpus trace (and any trace named on the command line), both tools run ``--repeat``
times, interleaved, each as a fresh process the way a user runs them; the table reports the
median wall time of each, their ratio, and the size of what tlsite wrote (site folder, zip
bundle, search index).

    python bench/site_bench.py                      # every corpus trace, 3 runs each
    python bench/site_bench.py -n 5 /tmp/big.log    # the corpus plus one trace, 5 runs
    python bench/site_bench.py --only /tmp/big.log  # just that trace
    python bench/site_bench.py -o bench/results.md  # also write the table to a file
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scratch_disk import warn_if_unjournaled

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CORPUS = PROJECT_ROOT.parent / "shared" / "corpus"
TIMEOUT_S = 1800


def corpus_traces() -> list[Path]:
    """tlparse's single-rank inputs, the torch 2.13 traces, our fixtures and the example."""
    inputs = CORPUS / "tlparse" / "inputs"
    found = [
        *inputs.glob("*.log"),
        *inputs.glob("*.txt"),
        *(CORPUS / "torch-2.13").glob("*/*.log"),
        *(PROJECT_ROOT / "tests" / "fixtures" / "traces").glob("*/*.log"),
        PROJECT_ROOT / "core" / "examples" / "example.log",
    ]
    return sorted((p for p in found if p.is_file() and p.stat().st_size > 0), key=_label)


def _label(path: Path) -> str:
    for root in (CORPUS, PROJECT_ROOT):
        try:
            return path.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
    return path.name


@dataclass
class Result:
    trace: Path
    tlsite_s: float
    tlparse_s: float | None  # None when tlparse is missing or failed
    site_bytes: int
    zip_bytes: int
    index_bytes: int
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.tlparse_s is None or self.tlparse_s <= 0:
            return None
        return self.tlsite_s / self.tlparse_s


def _timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    return time.perf_counter() - started, done


def _tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def bench_trace(trace: Path, repeat: int, scratch: Path, tlparse: str | None) -> Result:
    site = scratch / "site"
    tlsite_command = [
        sys.executable,
        "-m",
        "tlsite",
        "build",
        str(trace),
        "-o",
        str(site),
        "--overwrite",
        "--no-browser",
        "--quiet",
    ]
    tlparse_out = scratch / "tlparse"
    tlparse_command = [tlparse or "tlparse", str(trace), "-o", str(tlparse_out), "--overwrite"]
    tlparse_command.append("--no-browser")
    tlsite_times: list[float] = []
    tlparse_times: list[float] = []
    note = ""
    for _ in range(repeat):
        seconds, done = _timed(tlsite_command)
        if done.returncode not in (0, 3):
            message = (done.stderr.strip().splitlines() or ["?"])[-1]
            return Result(trace, float("nan"), None, 0, 0, 0, f"tlsite failed: {message}")
        tlsite_times.append(seconds)
        if tlparse is not None:
            seconds, done = _timed(tlparse_command)
            if done.returncode == 0:
                tlparse_times.append(seconds)
            else:
                note = f"tlparse exit {done.returncode}"
    index = site / "search" / "search_index.json"
    bundle = site.with_name(site.name + ".zip")
    return Result(
        trace=trace,
        tlsite_s=statistics.median(tlsite_times),
        tlparse_s=statistics.median(tlparse_times) if tlparse_times else None,
        site_bytes=_tree_bytes(site),
        zip_bytes=bundle.stat().st_size if bundle.is_file() else 0,
        index_bytes=index.stat().st_size if index.is_file() else 0,
        note=note,
    )


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f}"


def _s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.2f}"


def table(results: list[Result], repeat: int, tlparse_version: str) -> str:
    lines = [
        f"Median of {repeat} run(s) each; tlsite = `tlsite build` (site + zip, new process); "
        f"tlparse = `{tlparse_version}`.",
        "",
        "| trace | trace MB | tlsite s | tlparse s | tlsite/tlparse | site MB | zip MB "
        "| search index kB | note |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        ratio = "n/a" if r.ratio is None else f"{r.ratio:.1f}×"
        lines.append(
            f"| {_label(r.trace)} | {_mb(r.trace.stat().st_size)} | {_s(r.tlsite_s)} "
            f"| {_s(r.tlparse_s)} | {ratio} | {_mb(r.site_bytes)} | {_mb(r.zip_bytes)} "
            f"| {r.index_bytes / 1e3:.0f} | {r.note} |"
        )
    timed = [r for r in results if r.tlparse_s is not None and r.tlsite_s == r.tlsite_s]
    if timed:
        ours = sum(r.tlsite_s for r in timed)
        theirs = sum(r.tlparse_s or 0.0 for r in timed)
        lines.append(
            f"| **total** ({len(timed)} traces) | "
            f"{_mb(sum(r.trace.stat().st_size for r in timed))} | {ours:.2f} | {theirs:.2f} "
            f"| {ours / theirs:.1f}× | {_mb(sum(r.site_bytes for r in timed))} "
            f"| {_mb(sum(r.zip_bytes for r in timed))} "
            f"| {sum(r.index_bytes for r in timed) / 1e3:.0f} | |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, help="extra traces to benchmark")
    parser.add_argument("-n", "--repeat", type=int, default=3, help="runs per tool (default 3)")
    parser.add_argument("--only", action="store_true", help="skip the corpus traces")
    parser.add_argument("-o", "--output", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat needs a positive count")
    traces = [] if args.only else corpus_traces()
    traces += [t.resolve() for t in args.traces]
    if not traces:
        parser.error("no traces: the corpus is missing and none were given")
    tlparse = shutil.which("tlparse")
    version = "tlparse not installed"
    if tlparse is not None:
        version = subprocess.run(
            [tlparse, "--version"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    results = []
    with tempfile.TemporaryDirectory(prefix="tlsite-bench-") as scratch:
        warn_if_unjournaled(scratch)
        for number, trace in enumerate(traces, 1):
            print(f"[{number}/{len(traces)}] {_label(trace)}", file=sys.stderr, flush=True)
            folder = Path(scratch) / str(number)
            folder.mkdir()
            results.append(bench_trace(trace, args.repeat, folder, tlparse))
            shutil.rmtree(folder, ignore_errors=True)
    text = table(results, args.repeat, version)
    print(text, end="")
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

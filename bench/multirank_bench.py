"""Build synthetic N-rank jobs and show that time and size grow linearly with N.

The ranks are copies of real corpus rank logs (renamed ``dedicated_log_torch_trace_rank_<k>``),
so every rank is a realistic single-rank trace. For each N the full ``tlsite build`` runs once
(site and zip) and the table reports seconds per rank and site megabytes per rank: linear
growth means both stay about constant.

    python bench/multirank_bench.py                 # N = 8, 16, 32, 64 from torch-2.13/multi_rank
    python bench/multirank_bench.py --ranks 4 8 16  # other sizes
    python bench/multirank_bench.py --compare 3 --ranks 16 [--root before=/path/to/old/parent]
        # interleaved with tlparse 0.4.3 --all-ranks-html on the same job: medians of wall
        # time and CPU (the build's and its helpers'), and each tool's output size
    python bench/multirank_bench.py --compare 3 --job /work/traces/ddp16
        # the same comparison on a real job's folder of rank logs instead of copies
        # (copies share every page across ranks; a real job's ranks differ)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scratch_disk import warn_if_unjournaled

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BASE = PROJECT_ROOT.parent / "shared" / "corpus" / "torch-2.13" / "multi_rank"


def make_job(folder: Path, ranks: int) -> int:
    """Copy the base rank logs round-robin into ``ranks`` rank logs; return their bytes."""
    bases = sorted(BASE.glob("dedicated_log_torch_trace_rank_*.log"))
    folder.mkdir(parents=True)
    total = 0
    for rank in range(ranks):
        target = folder / f"dedicated_log_torch_trace_rank_{rank}.log"
        shutil.copyfile(bases[rank % len(bases)], target)
        total += target.stat().st_size
    return total


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--compare", type=int, metavar="N", help="rounds against tlparse")
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="also time the tlsite importable from PATH (the folder holding tlsite/)",
    )
    parser.add_argument(
        "--job", type=Path, help="with --compare: time this real job folder instead of copies"
    )
    args = parser.parse_args(argv)
    if args.compare:
        roots = dict(r.split("=", 1) for r in args.root)
        return compare(args.ranks, args.compare, roots, args.job)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tlsite-ranks-bench-") as scratch:
        warn_if_unjournaled(scratch)
        for ranks in args.ranks:
            job = Path(scratch) / f"job{ranks}"
            trace_bytes = make_job(job, ranks)
            site = Path(scratch) / f"site{ranks}"
            command = [sys.executable, "-m", "tlsite", "build", str(job), "-o", str(site)]
            command += ["--no-browser", "--quiet"]
            started = time.perf_counter()
            subprocess.run(command, check=True)
            seconds = time.perf_counter() - started
            size = tree_bytes(site)
            zip_size = site.with_name(site.name + ".zip").stat().st_size
            landing = (site / "index.html").stat().st_size
            rows.append((ranks, trace_bytes, seconds, size, zip_size, landing))
            print(f"{ranks} ranks: {seconds:.1f} s", file=sys.stderr, flush=True)
            shutil.rmtree(site)
            shutil.rmtree(job)
    print(
        "| ranks | trace MB | build s | s per rank | site MB | site MB per rank | zip MB "
        "| landing page kB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for ranks, trace_bytes, seconds, size, zip_size, landing in rows:
        print(
            f"| {ranks} | {trace_bytes / 1e6:.0f} | {seconds:.1f} | {seconds / ranks:.2f} "
            f"| {size / 1e6:.0f} | {size / 1e6 / ranks:.2f} | {zip_size / 1e6:.1f} "
            f"| {landing / 1e3:.0f} |"
        )
    return 0


def _timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of ``command`` (CPU: it and every helper it waited for)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, command
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def compare(sizes: list[int], rounds: int, roots: dict[str, str], real: Path | None = None) -> int:
    """tlsite (this checkout and ``roots``) and tlparse on the same jobs, interleaved.

    ``real`` is a job folder to time as it is (its rank count is the row's) instead of copies.
    """
    tools = {"tlsite": str(PROJECT_ROOT.parent), **roots, "tlparse": ""}
    print("| ranks | tool | wall s median (min–max) | vs tlparse | CPU s median | output MB |")
    print("|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="tlsite-ranks-bench-") as scratch:
        warn_if_unjournaled(scratch)
        for ranks in [len(list(real.glob("*rank_*.log")))] if real else sizes:
            job = real or Path(scratch) / f"job{ranks}"
            if not real:
                make_job(job, ranks)
            runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in tools}
            for number in range(rounds):
                for name, root in tools.items():
                    site = Path(scratch) / "site"
                    if name == "tlparse":
                        command = ["tlparse", str(job), "-o", str(site), "--overwrite"]
                        command += ["--no-browser", "--all-ranks-html"]
                        env = None
                    else:
                        command = [sys.executable, "-m", "tlsite", "build", str(job)]
                        command += ["-o", str(site), "--no-browser", "--quiet"]
                        env = dict(os.environ, PYTHONPATH=root)
                    wall, cpu = _timed(command, env)
                    archive = site.with_name("site.zip")
                    size = archive.stat().st_size if archive.exists() else tree_bytes(site)
                    runs[name].append((wall, cpu, size))
                    print(f"{number} {name}: {wall:.2f} s, CPU {cpu:.2f} s", file=sys.stderr)
                    shutil.rmtree(site)
                    archive.unlink(missing_ok=True)
            theirs = statistics.median(w for w, _, _ in runs["tlparse"])
            for name, values in runs.items():
                walls = [w for w, _, _ in values]
                wall = statistics.median(walls)
                cpu = statistics.median(c for _, c, _ in values)
                print(
                    f"| {ranks} | {name} | {wall:.2f} ({min(walls):.2f}–{max(walls):.2f}) "
                    f"| {wall / theirs:.2f}× | {cpu:.2f} | {values[-1][2] / 1e6:.1f} |"
                )
            if not real:
                shutil.rmtree(job)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

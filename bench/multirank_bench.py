"""Build synthetic N-rank jobs and show that time and size grow linearly with N.

The ranks are copies of real corpus rank logs (renamed ``dedicated_log_torch_trace_rank_<k>``),
so every rank is a realistic single-rank trace. For each N the full ``tlsite build`` runs once
(site and zip) and the table reports seconds per rank and site megabytes per rank: linear
growth means both stay about constant.

    python bench/multirank_bench.py                 # N = 8, 16, 32, 64 from torch-2.13/multi_rank
    python bench/multirank_bench.py --ranks 4 8 16  # other sizes
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tlsite-ranks-bench-") as scratch:
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


if __name__ == "__main__":
    raise SystemExit(main())

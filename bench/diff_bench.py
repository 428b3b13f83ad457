"""Time ``tlsite diff BEFORE AFTER`` against building both reports (``tlsite build`` twice).

    python bench/make_trace.py --size 128MB -o /tmp/before.log
    python bench/make_trace.py --size 120MB -o /tmp/after.log
    python bench/diff_bench.py /tmp/before.log /tmp/after.log

Each command runs in a fresh subprocess (wall time includes start-up, as a user sees it; peak
RSS is the child's own, from ``os.wait4``), writing into a scratch folder removed afterwards.
Prints a Markdown table, with the size of each site's search index.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scratch_disk import warn_if_unjournaled


def run(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one subprocess."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return wall, usage.ru_maxrss / 1024


def index_size(site: Path) -> int:
    return sum(p.stat().st_size for p in (site / "search").glob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("before")
    parser.add_argument("after")
    args = parser.parse_args()
    tlsite = [sys.executable, "-m", "tlsite"]
    common = ["--no-browser", "--quiet", "--bundle", "zip"]
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="diff_bench_"))
    warn_if_unjournaled(scratch)
    try:
        for name, path in (("before", args.before), ("after", args.after)):
            wall, rss = run([*tlsite, "build", path, "-o", str(scratch / name), *common])
            rows.append((f"tlsite build {name}", wall, rss, index_size(scratch / name)))
        out = scratch / "diff"
        wall, rss = run([*tlsite, "diff", args.before, args.after, "-o", str(out), *common])
        rows.append(("tlsite diff before after", wall, rss, index_size(out)))
        pages = len(list((out / "compiles").glob("*.html")))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sizes = " / ".join(f"{os.path.getsize(p) / 1e6:.0f} MB" for p in (args.before, args.after))
    print(f"Traces: {sizes}; the diff has {pages} compile pages.\n")
    print("| command | wall s | peak RSS MB | search index |")
    print("|---|---:|---:|---:|")
    for name, wall, rss, index in rows:
        print(f"| {name} | {wall:.1f} | {rss:.0f} | {index / 1e6:.2f} MB |")
    both = rows[0][1] + rows[1][1]
    print(f"| both builds | {both:.1f} | | |")


if __name__ == "__main__":
    main()

"""Check the memory goal: a ``tlsite build`` of the 128 MB trace peaks at ≤ 0.5× tlparse.

Builds the trace (``make_trace.py --size 128MB``, cached like ``build_bench.py``'s) with
``tlsite build`` (site + zip) and with tlparse 0.4.3, ``--repeat`` times each, and compares
the medians of the peak memory of each whole process tree (the summed RSS of the process and
its helpers, sampled every 50 ms; see ``build_bench.TreeSampler``). Exits 1 when the goal is
missed, so it can gate a change that touches how a build holds its data.

    python bench/memory_check.py                    # 128 MB trace, 1 run each
    python bench/memory_check.py --repeat 3 /tmp/x.log
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from build_bench import DEFAULT_CACHE, TARGET_RSS_RATIO, TLPARSE, ensure_trace, measure


def peak_mb(command: list[str], repeat: int) -> float:
    """The median peak RSS of ``command``'s process tree, in MB."""
    peaks = []
    for _ in range(repeat):
        run, stderr, code = measure(command)
        if code != 0:
            raise SystemExit(f"{command[0]} failed ({code}):\n{stderr}")
        peaks.append(run.tree_mb)
    return statistics.median(peaks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", type=Path, help="default: the cached 128 MB trace")
    parser.add_argument("-n", "--repeat", type=int, default=1, help="runs per tool (default 1)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="synthetic traces")
    args = parser.parse_args(argv)
    trace = args.trace or ensure_trace(args.cache, "size", "128MB", regenerate=False)
    with tempfile.TemporaryDirectory(prefix="tlsite-memory-check-") as scratch:
        out = str(Path(scratch) / "site")
        tlsite = [sys.executable, "-m", "tlsite", "build", str(trace), "-o", out]
        ours = peak_mb([*tlsite, "--overwrite", "--no-browser", "--quiet"], args.repeat)
        reference = [TLPARSE, str(trace), "-o", out, "--overwrite", "--no-browser"]
        theirs = peak_mb(reference, args.repeat)
    ratio = ours / theirs
    verdict = "ok" if ratio <= TARGET_RSS_RATIO else "MISSED"
    print(
        f"{trace.name}: peak memory tlsite {ours:.0f} MB, tlparse {theirs:.0f} MB: "
        f"{ratio:.2f}× (goal ≤ {TARGET_RSS_RATIO}×): {verdict}"
    )
    return 0 if ratio <= TARGET_RSS_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())

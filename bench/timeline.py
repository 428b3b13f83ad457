"""Which process of a ``tlsite build`` uses the CPU when: the build and each helper apart.

Runs ``tlsite build TRACE -o OUT --no-browser --quiet`` (OUT removed first) and reads the CPU
time (user + system) of every process of its tree from ``/proc`` every 0.1 s. Prints each
process (the build; its helpers by service: ``_highlight_service``, ``_zip_service``, ranks)
with when it started and ended and its CPU, then the share of a core each used in every
half second: where the build waits for a helper, and whether both cores are busy.

    python bench/timeline.py /tmp/bp/big128.log -o /tmp/t/site
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from build_bench import _tree
from scratch_disk import warn_if_unjournaled

_TICKS = os.sysconf("SC_CLK_TCK")
BUCKET_S = 0.5


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of ``pid`` so far (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def role(pid: int) -> str:
    """``build``, or the service a helper runs (its ``module:function`` argument)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
    except OSError:
        return "?"
    services = [
        arg.decode().rsplit(":", 1)[1] for arg in argv if arg.startswith(b"tlsite.") and b":" in arg
    ]
    return services[0] if services else "build"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    warn_if_unjournaled(args.out.parent)
    args.out.with_suffix(".zip").unlink(missing_ok=True)
    command = [sys.executable, "-m", "tlsite", "build", args.trace, "-o", str(args.out)]
    start = time.perf_counter()
    child = subprocess.Popen([*command, "--no-browser", "--quiet"])
    seen: dict[int, tuple[str, float]] = {}  # pid -> (role, first seen)
    last_seen: dict[int, float] = {}
    used: dict[int, float] = {}  # pid -> CPU seconds at the last sample
    buckets: dict[int, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    while child.poll() is None:
        now = time.perf_counter() - start
        for pid in _tree(child.pid):
            cpu = cpu_seconds(pid)
            if cpu is None:
                continue
            if pid not in seen:
                seen[pid] = (role(pid), now)
            last_seen[pid] = now
            buckets[int(now / BUCKET_S)][pid] += cpu - used.get(pid, 0.0)
            used[pid] = cpu
        time.sleep(0.1)
    wall = time.perf_counter() - start
    pids = sorted(seen, key=lambda pid: seen[pid][1])
    print(f"wall {wall:.2f} s, CPU {sum(used.values()):.2f} s (exit {child.returncode})")
    for pid in pids:
        name, first = seen[pid]
        print(f"  {name:20} {first:6.2f}–{last_seen[pid]:6.2f} s  CPU {used[pid]:5.2f} s")
    print("time  " + " ".join(f"{seen[pid][0][:12]:>12}" for pid in pids))
    for bucket in sorted(buckets):
        shares = (buckets[bucket][pid] / BUCKET_S * 100 for pid in pids)
        print(f"{bucket * BUCKET_S:4.1f}  " + " ".join(f"{share:11.0f}%" for share in shares))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

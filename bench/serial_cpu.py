"""How much of a build's CPU runs while only one of its processes can run (issue #19).

On a loaded machine wall times say little about how well a job's build uses two cores. This
samples the build's process tree every 10 ms (``/proc``): the CPU used while one process, or
none, was runnable (``serial``: the other core idles whatever the load) and while two or more
were (``parallel``). On an otherwise idle two-core machine the build would take about
``serial + parallel / 2`` (the ``2-core estimate``). Linux only.

    python bench/serial_cpu.py 3 /work/traces/ddp16 now=<parent of tlsite/> before=<parent>
"""

from __future__ import annotations

import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scratch_disk import warn_if_unjournaled

_TICK = os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> dict[int, tuple[str, float]]:
    """The state and CPU seconds of ``root`` and every process below it."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    info: dict[int, tuple[str, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        children[int(fields[1])].append(int(name))
        info[int(name)] = (fields[0], (int(fields[11]) + int(fields[12])) / _TICK)
    found: dict[int, tuple[str, float]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in info:
            found[pid] = info[pid]
        todo += children.get(pid, [])
    return found


def sample(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, serial CPU and parallel CPU of ``command``."""
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: dict[int, float] = {}
    serial = parallel = 0.0
    while child.poll() is None:
        tree = _tree(child.pid)
        runnable = sum(1 for state, _ in tree.values() if state in "RD")
        used = sum(max(0.0, cpu - seen.get(pid, 0.0)) for pid, (_, cpu) in tree.items())
        seen.update({pid: cpu for pid, (_, cpu) in tree.items()})
        if runnable >= 2:
            parallel += used
        else:
            serial += used
        time.sleep(0.01)
    assert child.returncode == 0, command
    return time.perf_counter() - started, serial, parallel


def main(argv: list[str]) -> int:
    rounds, trace, roots = int(argv[0]), argv[1], dict(a.split("=", 1) for a in argv[2:])
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in roots}
    with tempfile.TemporaryDirectory(prefix="tlsite-serial-") as scratch:
        warn_if_unjournaled(scratch)
        site = Path(scratch) / "site"
        for number in range(rounds):
            for name, root in roots.items():
                command = [sys.executable, "-m", "tlsite", "build", trace, "-o", str(site)]
                command += ["--no-browser", "--quiet"]
                wall, serial, parallel = sample(command, dict(os.environ, PYTHONPATH=root))
                runs[name].append((wall, serial, parallel))
                line = f"{number} {name}: {wall:.2f} s, serial {serial:.2f}"
                print(f"{line}, parallel {parallel:.2f}", file=sys.stderr)
                shutil.rmtree(site)
                site.with_name("site.zip").unlink(missing_ok=True)
    print("| build | wall s | serial CPU s | parallel CPU s | CPU s | 2-core estimate (min–max) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, values in runs.items():
        wall, serial, parallel = (statistics.median(v[k] for v in values) for k in range(3))
        estimates = [s + p / 2 for _, s, p in values]
        print(
            f"| {name} | {wall:.2f} | {serial:.2f} | {parallel:.2f} | {serial + parallel:.2f} "
            f"| {statistics.median(estimates):.2f} ({min(estimates):.2f}–{max(estimates):.2f}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

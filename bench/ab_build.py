"""Two revisions of ``tlsite build`` on the same trace, interleaved in one run.

On a shared machine wall time moves several-fold from minute to minute, so a change is
measured against its base in the same run: each round builds the trace once with each
revision (``git archive`` snapshots, in alternating order), and reports the CPU time of the
build's process tree (user + system, from ``os.wait4``: less sensitive to other load than wall
time), the wall time, and the sizes a user gets (search index, code index, zip, site). Each
snapshot is byte-compiled first, as pip installs a package.
``--tlparse`` times tlparse on the trace in each round too, for each revision's ratio to it;
CPU per compile id divides by the number of compile pages the build wrote.

    python bench/ab_build.py TRACE --base 19061eb --new HEAD -n 3 --tlparse
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

PROJECT = Path(__file__).resolve().parent.parent


def snapshot(revision: str, into: Path) -> Path:
    """``git archive`` of ``revision`` as ``into/tlsite`` (a folder to put on PYTHONPATH)."""
    package = into / "tlsite"
    package.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(PROJECT), "archive", revision], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(package)], input=archive, check=True)
    # byte-compiled, as an installed package is: else each build compiles tlsite's modules
    # from source again (PYTHONDONTWRITEBYTECODE), a cost no installed tlsite has
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    return into


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_once(trace: str, root: Path, out: Path) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    out.with_suffix(".zip").unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(root))
    command = [sys.executable, "-m", "tlsite", "build", trace, "-o", str(out), "--no-browser"]
    start = time.perf_counter()
    child = subprocess.Popen([*command, "--quiet"], env=env, cwd=root)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 3):
        raise SystemExit(f"build failed: {' '.join(command)}")
    search = out / "search"
    return {
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": wall,
        "index": size(search / "search_index.json"),
        "code": size(search / "code_index.js") if (search / "code_index.js").exists() else 0,
        "zip": size(out.with_suffix(".zip")),
        "site": size(out),
        "ids": len([p for p in out.glob("-_*") if p.is_dir()]),
    }


def tlparse_once(trace: str, out: Path) -> dict[str, float]:
    """tlparse's CPU and wall time on the trace (the reference the issue's goals are in).

    Its previous output is removed first, untimed, as tlsite's is in :func:`build_once`: else
    tlparse's time would include deleting the last round's thousands of files."""
    shutil.rmtree(out, ignore_errors=True)
    command = ["tlparse", trace, "-o", str(out), "--overwrite", "--no-browser"]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"tlparse failed: {' '.join(command)}")
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # absolute: each build runs from its snapshot's folder
    parser.add_argument("trace", type=lambda path: str(Path(path).resolve()))
    parser.add_argument("--base", default="HEAD~1")
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("-n", "--repeat", type=int, default=3)
    parser.add_argument("--tlparse", action="store_true", help="time tlparse in each round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tlsite-ab-") as scratch:
        warn_if_unjournaled(scratch)
        revisions = {
            name: snapshot(rev, Path(scratch) / name)
            for name, rev in (("base", args.base), ("new", args.new))
        }
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in revisions}
        reference: list[dict[str, float]] = []
        for round_ in range(args.repeat):
            order = list(revisions) if round_ % 2 == 0 else list(reversed(revisions))
            for name in order:
                run = build_once(args.trace, revisions[name], Path(scratch) / f"out-{name}")
                runs[name].append(run)
                cpu, wall = run["cpu"], run["wall"]
                print(f"round {round_ + 1} {name}: cpu {cpu:.2f} s, wall {wall:.2f} s")
            if args.tlparse:
                reference.append(tlparse_once(args.trace, Path(scratch) / "out-tlparse"))
                cpu, wall = reference[-1]["cpu"], reference[-1]["wall"]
                print(f"round {round_ + 1} tlparse: cpu {cpu:.2f} s, wall {wall:.2f} s")
    print(f"\n`{Path(args.trace).name}`, {args.repeat} interleaved rounds, medians (min–max):\n")
    tl_cpu = statistics.median(r["cpu"] for r in reference) if reference else 0.0
    tl_wall = statistics.median(r["wall"] for r in reference) if reference else 0.0
    print(
        "| revision | CPU s | CPU ms per compile id | CPU ÷ tlparse | wall s | wall ÷ tlparse"
        " | search index MiB | code index KiB | zip MB | site MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, rev in (("base", args.base), ("new", args.new)):
        cpu = [r["cpu"] for r in runs[name]]

        def median(key: str, rows: list[dict[str, float]] = runs[name]) -> float:
            return statistics.median(r[key] for r in rows)

        per_id = f"{median('cpu') / median('ids') * 1000:.1f}" if median("ids") else ""
        cpu_ratio = f"{median('cpu') / tl_cpu:.1f}×" if tl_cpu else ""
        wall_ratio = f"{median('wall') / tl_wall:.1f}×" if tl_wall else ""
        print(
            f"| {rev} | {median('cpu'):.2f} ({min(cpu):.2f}–{max(cpu):.2f}) | {per_id}"
            f" | {cpu_ratio} | {median('wall'):.2f} | {wall_ratio}"
            f" | {median('index') / 2**20:.3f} | {median('code') / 1024:.1f}"
            f" | {median('zip') / 1e6:.2f} | {median('site') / 1e6:.1f} |"
        )
    if reference:
        print(
            f"| tlparse 0.4.3 | {tl_cpu:.2f} | {tl_cpu / max(median('ids'), 1) * 1000:.1f}"
            f" | 1.0× | {tl_wall:.2f} | 1.0× | | | | |"
        )


if __name__ == "__main__":
    main()

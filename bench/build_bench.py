"""Full ``tlsite build`` (site + zip) against tlparse 0.4.3 on big synthetic traces (issue #7).

For each trace, ``tlsite build TRACE -o DIR --overwrite --no-browser --quiet`` and
``tlparse TRACE -o DIR --overwrite --no-browser`` run ``--repeat`` times, interleaved (the
order alternates every round), each in a fresh subprocess. Measured per run:

* wall time around the subprocess (so it includes interpreter start-up, as a user sees it);
* peak RSS of the main process: ``ru_maxrss`` from ``os.wait4`` of that child (Linux folds
  the child's reaped children into it, so it is the largest single process of the tree);
* peak RSS of the whole process tree (tlsite's highlight workers are grandchildren of the
  benchmark): ``VmRSS`` of the child and all its descendants, read from ``/proc`` every
  50 ms and summed. Forked workers share copy-on-write pages with their parent, which a sum
  of RSS counts twice, so the peak of the summed ``Pss`` (``/proc/PID/smaps_rollup``, read
  while the tree has more than one process) is reported too.

Then the sizes of what tlsite wrote (site folder, zip bundle, ``search/search_index.json``),
and with ``--browser`` how fast the built overview page is in Chromium (file://, headless).

Traces: by default a ~128 MB one made with ``make_trace.py --size 128MB``; with ``--large``
also a 1 GB one and recompile storms of 1,250 / 2,500 / 5,000 compile ids. They are cached
in ``--cache`` (default /tmp/tlsite-bench-traces) and reused. Traces named on the command
line are added.

    python bench/build_bench.py                          # 128 MB trace, 3 interleaved rounds
    python bench/build_bench.py --large --repeat 1       # + 1 GB and the storms
    python bench/build_bench.py --browser -o /tmp/b.md   # + page/search timings; write table
    python bench/build_bench.py --only /tmp/x.log        # just that trace
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scratch_disk import warn_if_unjournaled

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = BENCH_DIR.parent
DEFAULT_CACHE = Path("/tmp/tlsite-bench-traces")
DEFAULT_SIZE = "128MB"
LARGE_SIZE = "1GB"
LARGE_STORMS = (1250, 2500, 5000)
TLPARSE = "tlparse"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SAMPLE_INTERVAL_S = 0.05
RUN_TIMEOUT_S = 3 * 3600

# Targets of issue #7.
TARGET_WALL_RATIO = 1.0  # 128 MB build wall time ≤ 1.0× tlparse
TARGET_RSS_RATIO = 0.5  # peak RSS ≤ 0.5× tlparse
TARGET_INDEX_MB = 5.0  # search index ≤ 5 MB
TARGET_ZIP_MB = 25.0  # zip bundle ≤ 25 MB (GitHub's attachment limit)
TARGET_LARGE_TIME_RATIO = 8.0  # 1 GB build ≤ 8× the 128 MB build
TARGET_LARGE_RSS_TOLERANCE = 0.2  # ... with the same peak memory, ±20%
TARGET_STORM_SLOPE = 1.2  # s per compile id at the largest storm ≤ 1.2× at the smallest
TARGET_INTERACTIVE_S = 1.0  # overview interactive (search usable) ≤ 1 s
TARGET_SEARCH_S = 0.5  # search results ≤ 0.5 s after the last key


# --------------------------------------------------------------------------------------------
# Traces


@dataclass
class TraceSpec:
    label: str
    path: Path
    storm: int | None = None  # compile ids of a --storm trace
    size_arg: str | None = None  # the --size argument of a synthetic trace


def ensure_trace(cache: Path, option: str, value: str, *, regenerate: bool) -> Path:
    """The cached output of ``make_trace.py --OPTION VALUE``, made first if missing."""
    path = cache / f"{option}-{value}.log"
    if path.is_file() and path.stat().st_size > 0 and not regenerate:
        print(f"reusing {path}", file=sys.stderr, flush=True)
        return path
    cache.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    print(f"making {path} (make_trace.py --{option} {value}) ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    command = [sys.executable, str(BENCH_DIR / "make_trace.py"), f"--{option}", value]
    subprocess.run([*command, "-o", str(part)], check=True)
    part.replace(path)  # never reuse a half-written trace
    print(f"  made in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return path


# --------------------------------------------------------------------------------------------
# Memory of a process tree


def _children_map() -> dict[int, list[int]]:
    """ppid → pids, from /proc/*/stat (this kernel has no /proc/PID/task/TID/children)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stream:
                stat = stream.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    return children


def _tree(root: int) -> list[int]:
    children = _children_map()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, ()))
    return pids


def _field_kib(path: str, key: bytes) -> int:
    """A ``Key:   123 kB`` line of a /proc file, in KiB (0 if absent or gone)."""
    try:
        with open(path, "rb") as stream:
            for line in stream:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class TreeSampler(threading.Thread):
    """Samples the summed VmRSS (and Pss) of a process and its descendants until stopped."""

    def __init__(self, root: int, interval: float = SAMPLE_INTERVAL_S) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.interval = interval
        self.stopped = threading.Event()
        self.peak_rss_kib = 0
        self.peak_pss_kib = 0
        self.max_processes = 0
        self.samples = 0

    def sample(self) -> None:
        pids = _tree(self.root)
        rss = [_field_kib(f"/proc/{pid}/status", b"VmRSS:") for pid in pids]
        live = sum(1 for value in rss if value)
        if live > 1:  # shared copy-on-write pages: count each page once, proportionally
            pss = sum(_field_kib(f"/proc/{pid}/smaps_rollup", b"Pss:") for pid in pids)
        else:
            pss = sum(rss)
        self.peak_rss_kib = max(self.peak_rss_kib, sum(rss))
        self.peak_pss_kib = max(self.peak_pss_kib, pss)
        self.max_processes = max(self.max_processes, live)
        self.samples += 1

    def run(self) -> None:
        while not self.stopped.is_set():
            self.sample()
            self.stopped.wait(self.interval)


@dataclass
class Run:
    wall_s: float
    main_mb: float  # ru_maxrss of the child
    tree_mb: float  # peak of the summed VmRSS of the tree
    tree_pss_mb: float  # peak of the summed Pss of the tree
    processes: int  # most processes alive at once in the tree


def measure(command: list[str], *, env: dict[str, str] | None = None) -> tuple[Run, str, int]:
    """Run ``command`` in a fresh process; its wall time, memory, stderr tail and exit code."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        # a session of its own, so a timeout can end the child and its workers together
        child = subprocess.Popen(command, stdout=out, stderr=err, env=env, start_new_session=True)
        sampler = TreeSampler(child.pid)
        sampler.start()
        timer = threading.Timer(RUN_TIMEOUT_S, os.killpg, (child.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        sampler.stopped.set()
        sampler.join()
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    main_mb = usage.ru_maxrss * 1024 / 1e6
    run = Run(
        wall_s=wall,
        main_mb=main_mb,
        # a run shorter than one sample interval may have been sampled before it grew
        tree_mb=max(sampler.peak_rss_kib * 1024 / 1e6, main_mb),
        # a lone process: Pss was not read (it is its RSS), so the same floor applies
        tree_pss_mb=max(
            sampler.peak_pss_kib * 1024 / 1e6, main_mb if sampler.max_processes <= 1 else 0.0
        ),
        processes=max(sampler.max_processes, 1),
    )
    return run, stderr[-3000:], child.returncode


# --------------------------------------------------------------------------------------------
# Builds


@dataclass
class Tool:
    name: str
    runs: list[Run] = field(default_factory=list)

    def values(self, attribute: str) -> list[float]:
        return [getattr(run, attribute) for run in self.runs]

    def median(self, attribute: str) -> float:
        return statistics.median(self.values(attribute))


@dataclass
class BrowserRun:
    dcl_s: float
    load_s: float
    focus_s: float  # when the search input got focus (clicked as soon as possible)
    ready_s: float  # when the search worker reported its index ready
    blocked: int  # non-file requests refused
    version: str  # the browser's version
    searches: dict[str, tuple[float | None, int]]  # query → (s from last key, results)

    @property
    def interactive_s(self) -> float:
        return max(self.load_s, self.ready_s)


@dataclass
class TraceResult:
    spec: TraceSpec
    size_bytes: int
    tlsite: Tool
    tlparse: Tool
    site_bytes: int = 0
    zip_bytes: int = 0
    index_bytes: int = 0
    tlparse_bytes: int = 0
    compile_ids: int | None = None
    artifacts: int | None = None
    browser: list[BrowserRun] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def size_mb(self) -> float:
        return self.size_bytes / 1e6

    def ratio(self, attribute: str) -> float:
        return self.tlsite.median(attribute) / self.tlparse.median(attribute)


class BuildFailed(Exception):
    """A tool exited with an error on a trace."""


def _git(*command: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), *command], capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def source_revision() -> str:
    """The commit tlsite runs from, and whether its files had uncommitted changes at start."""
    commit = _git("rev-parse", "--short", "HEAD")
    if not commit:
        return "an unknown revision"
    changed = _git("status", "--porcelain", "--untracked-files=no").splitlines()
    dirty = f" + uncommitted changes in {len(changed)} file(s)" if changed else ""
    return f"the working tree: commit {commit}{dirty}"


def snapshot(revision: str, dest: Path) -> tuple[str, dict[str, str]]:
    """Unpack ``git archive REVISION`` as ``dest/tlsite``; its label and the env to run it.

    The project root is the ``tlsite`` package, so with ``PYTHONPATH=dest`` the children import
    this frozen copy instead of the editable install (whose files may change during a run).
    """
    commit = _git("rev-parse", "--short", f"{revision}^{{commit}}")
    if not commit:
        raise SystemExit(f"--revision {revision}: not a commit of {PROJECT_ROOT}")
    package = dest / "tlsite"
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "archive", "--format=tar", commit],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(package)], input=archive.stdout, check=True)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(dest), os.environ.get("PYTHONPATH")]))}
    where = subprocess.run(
        [sys.executable, "-c", "import tlsite; print(tlsite.__file__)"],
        capture_output=True,
        text=True,
        env=dict(os.environ, **env),
        check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(package.resolve()):
        raise SystemExit(f"--revision: the snapshot is not the tlsite imported ({where})")
    return f"commit {commit} (a `git archive` snapshot)", env


def _tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _compile_directory(site: Path) -> tuple[int | None, int | None]:
    """(compile ids, artifacts) listed in the site's compile_directory.json."""
    try:
        directory = json.loads((site / "compile_directory.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    ids = sum(1 for key in directory if key != "[-/-]")
    artifacts = sum(len(entry.get("artifacts", ())) for entry in directory.values())
    return ids, artifacts


def _remove(*paths: Path) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()


def bench_trace(
    spec: TraceSpec,
    repeat: int,
    scratch: Path,
    *,
    on_site: Callable[[TraceResult, Path], None] | None = None,
    tlsite_env: dict[str, str] | None = None,
) -> TraceResult:
    """Interleaved tlsite / tlparse runs on one trace; ``on_site`` sees the last built site."""
    site = scratch / "site"
    bundle = site.with_name(site.name + ".zip")
    tlparse_out = scratch / "tlparse"
    tmp = scratch / "tmp"  # tlsite's payload store and highlight cache
    env = dict(os.environ, **(tlsite_env or {}), TMPDIR=str(tmp))
    trace = str(spec.path)
    commands = {
        "tlsite": [
            *(sys.executable, "-m", "tlsite", "build", trace, "-o", str(site)),
            *("--overwrite", "--no-browser", "--quiet"),
        ],
        "tlparse": [TLPARSE, trace, "-o", str(tlparse_out), "--overwrite", "--no-browser"],
    }
    result = TraceResult(spec, spec.path.stat().st_size, Tool("tlsite build"), Tool("tlparse"))
    for number in range(repeat):
        order = ("tlsite", "tlparse") if number % 2 == 0 else ("tlparse", "tlsite")
        for name in order:
            # same start for every run (not timed): no output of the previous run
            if name == "tlsite":
                _remove(site, bundle, tmp)
                tmp.mkdir(parents=True)
                run, stderr, code = measure(commands[name], env=env)
                failed = code not in (0, 3)  # 3: built, but --strict would have complained
            else:
                _remove(tlparse_out)
                run, stderr, code = measure(commands[name])
                failed = code != 0
            if failed:
                print(stderr, file=sys.stderr, flush=True)
                last = (stderr.strip().splitlines() or ["?"])[-1]
                raise BuildFailed(f"{name} failed on {spec.label} (exit {code}): {last}")
            (result.tlsite if name == "tlsite" else result.tlparse).runs.append(run)
            print(
                f"  round {number + 1}/{repeat} {name}: {run.wall_s:.2f} s, main "
                f"{run.main_mb:.0f} MB, tree {run.tree_mb:.0f} MB (PSS {run.tree_pss_mb:.0f}, "
                f"{run.processes} processes)",
                file=sys.stderr,
                flush=True,
            )
            if name == "tlparse":
                result.tlparse_bytes = _tree_bytes(tlparse_out)
    result.site_bytes = _tree_bytes(site)
    result.zip_bytes = bundle.stat().st_size if bundle.is_file() else 0
    index = site / "search" / "search_index.json"
    result.index_bytes = index.stat().st_size if index.is_file() else 0
    result.compile_ids, result.artifacts = _compile_directory(site)
    if on_site is not None:
        on_site(result, site)
    _remove(site, bundle, tlparse_out, tmp)
    return result


# --------------------------------------------------------------------------------------------
# Browser: the overview page from file:// in Debian's Chromium

# Runs before the page's scripts in every frame. It wraps window.Worker (and whatever class
# replaces it later: tlsite's file:// shim assigns window.Worker = FrameWorker) so every
# worker's messages are logged with performance.now() timestamps; Material's protocol: page
# → worker 0 setup, 2 query (data = the query string); worker → page 1 ready, 3 result.
INIT_SCRIPT = r"""
(() => {
  if (window.__tlb) return;
  const log = window.__tlb = {msgs: [], keyups: [], focus: null, items: []};
  const now = () => performance.now();
  function hook(worker) {
    try {
      const post = worker.postMessage;
      worker.postMessage = function (data) {
        const type = data && data.type;
        log.msgs.push({dir: "post", type, t: now(), q: type === 2 ? String(data.data) : null});
        return post.apply(this, arguments);
      };
      worker.addEventListener("message", (event) => {
        const data = event.data, type = data && data.type;
        const items = type === 3 && data.data && data.data.items;
        log.msgs.push({dir: "recv", type, t: now(), n: items ? items.length : null});
      });
    } catch (error) {
      log.error = String(error);
    }
    return worker;
  }
  // A Worker class may construct another inside (tlsite's search-code.js wraps the shim's):
  // only the outermost one, the worker as Material sees it, is hooked.
  let depth = 0;
  function wrap(Base) {
    if (typeof Base !== "function" || Base.__tlb) return Base;
    const Wrapped = new Proxy(Base, {
      construct(target, args) {
        depth++;
        let worker;
        try { worker = Reflect.construct(target, args); } finally { depth--; }
        return depth === 0 ? hook(worker) : worker;
      },
    });
    Wrapped.__tlb = true;
    return Wrapped;
  }
  let current = wrap(window.Worker);
  Object.defineProperty(window, "Worker", {
    configurable: true, get() { return current; }, set(value) { current = wrap(value); },
  });
  window.addEventListener("keyup", () => log.keyups.push(now()), true);
  window.addEventListener("focusin", (event) => {
    if (log.focus === null && event.target.matches && event.target.matches(".md-search__input"))
      log.focus = now();
  }, true);
  document.addEventListener("DOMContentLoaded", () => {
    const list = document.querySelector(".md-search-result__list");
    if (!list) return;
    new MutationObserver(() => {
      log.items.push({t: now(), n: list.querySelectorAll(".md-search-result__item").length});
    }).observe(list, {childList: true});
  });
})();
"""

# True once the worker answered the last query posted so far (answers come in order).
SETTLED = """() => {
  const m = window.__tlb.msgs;
  const posts = m.filter(x => x.dir === "post" && x.type === 2).length;
  return m.filter(x => x.dir === "recv" && x.type === 3).length >= posts;
}"""

# True once the worker answered query ``q`` posted after message index ``start``.
ANSWERED = """([q, start]) => {
  const m = window.__tlb.msgs.slice(start);
  const posts = m.filter(x => x.dir === "post" && x.type === 2).map(x => x.q);
  const i = posts.lastIndexOf(q);
  return i >= 0 && m.filter(x => x.dir === "recv" && x.type === 3).length > i;
}"""


SEARCH_READY = "() => window.__tlb.msgs.some(m => m.dir === 'recv' && m.type === 1)"


def _wait(page: Any, predicate: str, arg: Any = None, *, timeout_ms: int) -> None:
    """Poll ``predicate`` from here every 20 ms until it is true.

    Not ``page.wait_for_function``: its in-page polling evaluates the predicate with ``eval``,
    which the report's Content-Security-Policy (no 'unsafe-eval') refuses; ``page.evaluate``
    goes through the DevTools protocol, which the CSP does not govern. The page keeps its CSP.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    while not page.evaluate(predicate, arg):
        if time.monotonic() > deadline:
            raise TimeoutError(f"still false after {timeout_ms / 1000:g} s: {predicate}")
        page.wait_for_timeout(20)


def default_queries(site: Path) -> list[str]:
    """A compile id of the site (as displayed, with brackets) and a graph-break phrase."""
    queries = []
    try:
        directory = json.loads((site / "compile_directory.json").read_text(encoding="utf-8"))
        ids = [key for key in directory if key != "[-/-]"]
        if ids:
            queries.append(ids[len(ids) // 2])
    except (OSError, ValueError):
        pass
    return [*queries, "graph break"]


def _search_once(
    page: Any, query: str, key_delay_ms: int, timeout_ms: int
) -> tuple[float | None, int]:
    """Type ``query`` key by key; seconds from its last key-up to the first result shown."""
    box = page.locator(".md-search__input")
    box.fill("")
    _wait(page, SETTLED, timeout_ms=timeout_ms)
    page.wait_for_timeout(200)
    start = page.evaluate("window.__tlb.msgs.length")
    items_start = page.evaluate("window.__tlb.items.length")
    box.press_sequentially(query, delay=key_delay_ms)
    _wait(page, ANSWERED, [query, start], timeout_ms=timeout_ms)
    page.wait_for_timeout(100)  # let the results render
    log = page.evaluate("window.__tlb")
    last_key = log["keyups"][-1]
    messages = log["msgs"][start:]
    posts = [m for m in messages if m["dir"] == "post" and m["type"] == 2]
    answers = [m for m in messages if m["dir"] == "recv" and m["type"] == 3]
    index = max(i for i, m in enumerate(posts) if m["q"] == query)
    answer = answers[index]
    if not answer["n"]:
        return None, 0
    shown = [m["t"] for m in log["items"][items_start:] if m["n"] and m["t"] >= answer["t"]]
    first = shown[0] if shown else answer["t"]
    return (first - last_key) / 1000, answer["n"]


def browse(
    site: Path, queries: Sequence[str], repeat: int, *, key_delay_ms: int, timeout_s: float
) -> list[BrowserRun]:
    """Open ``site``'s overview ``repeat`` times, each in a fresh browser context."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # never `playwright install`: the system Chromium is used
        raise SystemExit(f"--browser needs the python playwright package: {exc}") from exc
    url = (site / "index.html").resolve().as_uri()
    timeout_ms = int(timeout_s * 1000)
    runs = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            for _ in range(repeat):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                blocked: list[str] = []

                def route(request_route: Any, blocked: list[str] = blocked) -> None:
                    if request_route.request.url.startswith("file:"):
                        request_route.continue_()
                    else:
                        blocked.append(request_route.request.url)
                        request_route.abort()

                context.route("**/*", route)
                context.add_init_script(INIT_SCRIPT)
                page = context.new_page()
                page.set_default_timeout(timeout_ms)
                page.goto(url, wait_until="domcontentloaded", timeout=timeout_ms)
                page.click(".md-search__input")  # Material loads the index on file:// now
                _wait(page, SEARCH_READY, timeout_ms=timeout_ms)
                _wait(page, "() => performance.timing.loadEventEnd > 0", timeout_ms=timeout_ms)
                timing = page.evaluate(
                    """() => { const t = performance.timing, log = window.__tlb;
                    return {dcl: t.domContentLoadedEventEnd - t.navigationStart,
                            load: t.loadEventEnd - t.navigationStart, focus: log.focus,
                            ready: log.msgs.find(m => m.dir === 'recv' && m.type === 1).t}; }"""
                )
                searches = {
                    query: _search_once(page, query, key_delay_ms, timeout_ms) for query in queries
                }
                runs.append(
                    BrowserRun(
                        dcl_s=timing["dcl"] / 1000,
                        load_s=timing["load"] / 1000,
                        focus_s=(timing["focus"] or 0) / 1000,
                        ready_s=timing["ready"] / 1000,
                        blocked=len(blocked),
                        version=browser.version,
                        searches=searches,
                    )
                )
                run = runs[-1]
                shown = ", ".join(
                    f"{q!r} {'no result' if s is None else f'{s:.3f} s'} ({n})"
                    for q, (s, n) in searches.items()
                )
                print(
                    f"  browser: DOMContentLoaded {run.dcl_s:.3f} s, load {run.load_s:.3f} s, "
                    f"search ready {run.ready_s:.3f} s; {shown}",
                    file=sys.stderr,
                    flush=True,
                )
                context.close()
        finally:
            browser.close()
    return runs


# --------------------------------------------------------------------------------------------
# Report


def _cell(values: Sequence[float], digits: int = 2) -> str:
    """``median (min–max)``, or just the value for a single run."""
    middle = f"{statistics.median(values):,.{digits}f}"
    if len(values) < 2:
        return middle
    return f"{middle} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def _mb(n: int, digits: int = 1) -> str:
    return f"{n / 1e6:,.{digits}f}"


def _int(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def build_table(results: list[TraceResult], repeat: int, version: str, revision: str) -> str:
    lines = [
        f"{repeat} run(s) per tool per trace, interleaved, each a fresh process; cells are "
        f"median (min–max); MB = 10^6 bytes. tlsite = `tlsite build TRACE -o DIR --overwrite "
        f"--no-browser --quiet` (site + zip) at {revision}; tlparse = `{version}`. "
        f"RSS main = `ru_maxrss` of the child; RSS tree = peak of the summed VmRSS of the child "
        f"and its descendants "
        f"(sampled every {SAMPLE_INTERVAL_S * 1000:.0f} ms); PSS tree = the same with Pss "
        f"(shared pages counted once). Ratios are tlsite / tlparse medians of the same run.",
        "",
        "| trace | trace MB | compile ids | artifacts | tool | wall s | MB/s | RSS main MB "
        "| RSS tree MB | PSS tree MB | procs | output MB | zip MB | search index MB "
        "| wall vs tlparse | RSS tree vs tlparse |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for tool in (r.tlsite, r.tlparse):
            ours = tool is r.tlsite
            lines.append(
                "| "
                + " | ".join(
                    [
                        r.spec.label,
                        f"{r.size_mb:,.1f}",
                        _int(r.compile_ids),
                        _int(r.artifacts),
                        tool.name,
                        _cell(tool.values("wall_s")),
                        f"{r.size_mb / tool.median('wall_s'):,.1f}",
                        _cell(tool.values("main_mb"), 0),
                        _cell(tool.values("tree_mb"), 0),
                        _cell(tool.values("tree_pss_mb"), 0),
                        str(max(run.processes for run in tool.runs)),
                        _mb(r.site_bytes if ours else r.tlparse_bytes),
                        _mb(r.zip_bytes, 2) if ours else "",
                        _mb(r.index_bytes, 2) if ours else "",
                        f"{r.ratio('wall_s'):.2f}×" if ours else "1.00×",
                        f"{r.ratio('tree_mb'):.2f}×" if ours else "1.00×",
                    ]
                )
                + " |"
            )
    notes = [note for r in results for note in r.notes]
    if notes:
        lines += ["", *(f"Note: {note}" for note in notes)]
    return "\n".join(lines)


def storm_table(storms: list[TraceResult]) -> str:
    lines = [
        "Recompile storms (`make_trace.py --storm N`): seconds per compile id (median wall / N); "
        "marginal = extra seconds per extra compile id from the previous row.",
        "",
        "| compile ids | trace MB | tlsite s | tlsite ms/id | tlsite marginal ms/id "
        "| RSS tree MB | tlparse s | tlparse ms/id | wall vs tlparse |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    previous: TraceResult | None = None
    for r in storms:
        n = r.spec.storm or 1
        ours, theirs = r.tlsite.median("wall_s"), r.tlparse.median("wall_s")
        marginal = ""
        if previous is not None and previous.spec.storm:
            extra = n - previous.spec.storm
            marginal = f"{(ours - previous.tlsite.median('wall_s')) / extra * 1000:.2f}"
        lines.append(
            f"| {n:,} | {r.size_mb:,.1f} | {ours:.2f} | {ours / n * 1000:.2f} | {marginal} "
            f"| {r.tlsite.median('tree_mb'):,.0f} | {theirs:.2f} | {theirs / n * 1000:.2f} "
            f"| {ours / theirs:.2f}× |"
        )
        previous = r
    return "\n".join(lines)


def browser_table(results: list[TraceResult], key_delay_ms: int) -> str:
    runs = [b for r in results for b in r.browser]
    version = runs[0].version if runs else "?"
    blocked = sum(b.blocked for b in runs)
    lines = [
        f"Overview page (`index.html`) from file:// in headless Chromium {version} "
        f"(`{CHROMIUM}`, fresh context per run; non-file requests blocked: {blocked}); seconds "
        "since navigation start, median (min–max). The search input is clicked as soon as the "
        "DOM is ready (on file:// Material loads the index only then); *search ready* = the "
        "search worker's ready message; *interactive* = max(load, search ready). *Search* = "
        f"from the last key-up (typed key by key, each key held {key_delay_ms} ms) to the "
        "first result item shown for the full query.",
        "",
        "| trace | DOMContentLoaded s | load s | search clicked s | search ready s "
        f"| ready after click s | interactive s | ≤ {TARGET_INTERACTIVE_S:g} s | query "
        f"| search s | results | ≤ {TARGET_SEARCH_S:g} s |",
        "|---|---:|---:|---:|---:|---:|---:|:-:|---|---:|---:|:-:|",
    ]
    for r in results:
        if not r.browser:
            continue
        runs = r.browser
        interactive = [b.interactive_s for b in runs]
        first = True
        for query in r.queries:
            seconds = [b.searches[query][0] for b in runs]
            found = [s for s in seconds if s is not None]
            count = runs[-1].searches[query][1]
            head = (
                [
                    r.spec.label,
                    _cell([b.dcl_s for b in runs], 3),
                    _cell([b.load_s for b in runs], 3),
                    _cell([b.focus_s for b in runs], 3),
                    _cell([b.ready_s for b in runs], 3),
                    _cell([b.ready_s - b.focus_s for b in runs], 3),
                    _cell(interactive, 3),
                    _mark(statistics.median(interactive) <= TARGET_INTERACTIVE_S),
                ]
                if first
                else [""] * 8
            )
            search = _cell(found, 3) if len(found) == len(seconds) else "no results"
            ok = _mark(bool(found) and statistics.median(found) <= TARGET_SEARCH_S)
            lines.append("| " + " | ".join([*head, f"`{query}`", search, str(count), ok]) + " |")
            first = False
    return "\n".join(lines)


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def targets(
    results: list[TraceResult],
    base: TraceResult | None,
    large: TraceResult | None,
    storms: list[TraceResult],
) -> str:
    lines = ["Targets of issue #7:", ""]

    def add(ok: bool, text: str) -> None:
        lines.append(f"- {_mark(ok)} {text}")

    # the issue sets the per-trace targets (time and memory against tlparse, sizes, browser)
    # for the ~128 MB trace (the base); the 1 GB and storm rows have scaling targets instead
    # (their ratios are in the tables). Without a base (--only with paths): every row.
    targeted = [base] if base is not None else results
    for r in targeted:
        ratio = r.ratio("wall_s")
        add(
            ratio <= TARGET_WALL_RATIO,
            f"{r.spec.label}: build wall ≤ {TARGET_WALL_RATIO:g}× tlparse — {ratio:.2f}× "
            f"({r.tlsite.median('wall_s'):.2f} s vs {r.tlparse.median('wall_s'):.2f} s)",
        )
        tree, main = r.ratio("tree_mb"), r.tlsite.median("main_mb") / r.tlparse.median("main_mb")
        pss = r.tlsite.median("tree_pss_mb") / r.tlparse.median("tree_pss_mb")
        add(
            tree <= TARGET_RSS_RATIO,
            f"{r.spec.label}: peak RSS ≤ {TARGET_RSS_RATIO:g}× tlparse — tree {tree:.2f}× "
            f"({r.tlsite.median('tree_mb'):,.0f} MB vs {r.tlparse.median('tree_mb'):,.0f} MB); "
            f"main process {main:.2f}×, tree PSS {pss:.2f}×",
        )
        add(
            r.index_bytes / 1e6 <= TARGET_INDEX_MB,
            f"{r.spec.label}: search index ≤ {TARGET_INDEX_MB:g} MB — {_mb(r.index_bytes, 2)} MB",
        )
        add(
            r.zip_bytes / 1e6 <= TARGET_ZIP_MB,
            f"{r.spec.label}: zip ≤ {TARGET_ZIP_MB:g} MB — {_mb(r.zip_bytes, 2)} MB",
        )
    if base is not None and large is not None:
        factor = large.tlsite.median("wall_s") / base.tlsite.median("wall_s")
        size_factor = large.size_bytes / base.size_bytes
        add(
            factor <= TARGET_LARGE_TIME_RATIO,
            f"{large.spec.label} build ≤ {TARGET_LARGE_TIME_RATIO:g}× the {base.spec.label} "
            f"build — {factor:.2f}× ({size_factor:.1f}× the bytes)",
        )
        memory = large.tlsite.median("tree_mb") / base.tlsite.median("tree_mb")
        main = large.tlsite.median("main_mb") / base.tlsite.median("main_mb")
        add(
            abs(memory - 1) <= TARGET_LARGE_RSS_TOLERANCE,
            f"{large.spec.label} peak memory = {base.spec.label}'s "
            f"±{TARGET_LARGE_RSS_TOLERANCE:.0%} — tree {memory:.2f}× "
            f"({large.tlsite.median('tree_mb'):,.0f} MB vs "
            f"{base.tlsite.median('tree_mb'):,.0f} MB), main process {main:.2f}×",
        )
    if len(storms) >= 2:
        per_id = [
            (r.spec.storm or 1, r.tlsite.median("wall_s") / (r.spec.storm or 1)) for r in storms
        ]
        growth = per_id[-1][1] / per_id[0][1]
        shown = ", ".join(f"{n:,}: {s * 1000:.2f} ms" for n, s in per_id)
        add(
            growth <= TARGET_STORM_SLOPE,
            f"storm time linear in compile ids (s per id at {per_id[-1][0]:,} ≤ "
            f"{TARGET_STORM_SLOPE:g}× at {per_id[0][0]:,}) — {growth:.2f}×; per id: {shown}",
        )
    for r in targeted:
        if not r.browser:
            continue
        interactive = statistics.median(b.interactive_s for b in r.browser)
        add(
            interactive <= TARGET_INTERACTIVE_S,
            f"{r.spec.label}: overview interactive ≤ {TARGET_INTERACTIVE_S:g} s — "
            f"{interactive:.3f} s",
        )
        for query in r.queries:
            found = [b.searches[query][0] for b in r.browser]
            if any(s is None for s in found):
                add(False, f"{r.spec.label}: search `{query}` ≤ {TARGET_SEARCH_S:g} s — no results")
                continue
            seconds = statistics.median(s for s in found if s is not None)
            add(
                seconds <= TARGET_SEARCH_S,
                f"{r.spec.label}: search `{query}` ≤ {TARGET_SEARCH_S:g} s — {seconds:.3f} s",
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, help="extra traces to benchmark")
    parser.add_argument("-n", "--repeat", type=int, default=3, help="runs per tool (default 3)")
    parser.add_argument(
        "--large",
        action="store_true",
        help=f"also a {LARGE_SIZE} trace and storms of "
        f"{', '.join(f'{n:,}' for n in LARGE_STORMS)} compile ids (minutes each)",
    )
    parser.add_argument("--only", action="store_true", help="only the traces given")
    parser.add_argument("--size", default=DEFAULT_SIZE, help=f"base trace (default {DEFAULT_SIZE})")
    parser.add_argument(
        "--large-size", default=LARGE_SIZE, help=f"--large trace size (default {LARGE_SIZE})"
    )
    parser.add_argument(
        "--storms",
        default=",".join(str(n) for n in LARGE_STORMS),
        help="--large storm sizes in compile ids, comma-separated (default %(default)s)",
    )
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="synthetic traces")
    parser.add_argument("--regenerate", action="store_true", help="remake cached traces")
    parser.add_argument("--browser", action="store_true", help="also time the site in Chromium")
    parser.add_argument(
        "--query",
        action="append",
        help="search to time with --browser (repeatable; default: a compile id of the site, "
        "as displayed, and 'graph break')",
    )
    parser.add_argument(
        "--key-delay", type=int, default=50, help="ms each key is held while typing (default 50)"
    )
    parser.add_argument("--browser-timeout", type=float, default=600, help="seconds per step")
    parser.add_argument("-o", "--output", type=Path, help="also write the tables to this file")
    parser.add_argument(
        "--revision",
        metavar="REV",
        help="benchmark this commit (a `git archive` snapshot, e.g. HEAD) instead of the "
        "working tree, which may change while a long run goes on",
    )
    parser.add_argument("--scratch", type=Path, help="folder for outputs (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat needs a positive count")
    if shutil.which(TLPARSE) is None:
        parser.error("tlparse is not installed (pip install tlparse==0.4.3)")
    if args.browser and not Path(CHROMIUM).exists():
        parser.error(f"--browser needs Chromium at {CHROMIUM}")
    storm_sizes = [int(n) for n in args.storms.split(",") if n.strip()]
    missing = [str(t) for t in args.traces if not t.exists()]
    if missing:
        parser.error(f"no such trace: {', '.join(missing)}")

    specs: list[TraceSpec] = []
    if not args.only:
        made = ensure_trace(args.cache, "size", args.size, regenerate=args.regenerate)
        specs.append(TraceSpec(f"synthetic {args.size}", made, size_arg=args.size))
        if args.large:
            made = ensure_trace(args.cache, "size", args.large_size, regenerate=args.regenerate)
            specs.append(TraceSpec(f"synthetic {args.large_size}", made, size_arg=args.large_size))
            for n in storm_sizes:
                made = ensure_trace(args.cache, "storm", str(n), regenerate=args.regenerate)
                specs.append(TraceSpec(f"storm {n:,}", made, storm=n))
    specs += [TraceSpec(t.name, t.resolve()) for t in args.traces]
    if not specs:
        parser.error("no traces: give some, or leave out --only")
    version = subprocess.run(
        [TLPARSE, "--version"], capture_output=True, text=True, timeout=60
    ).stdout.strip()
    revision = source_revision()

    def on_site(result: TraceResult, site: Path) -> None:
        if not args.browser:
            return
        result.queries = args.query or default_queries(site)
        try:
            result.browser = browse(
                site,
                result.queries,
                args.repeat,
                key_delay_ms=args.key_delay,
                timeout_s=args.browser_timeout,
            )
        except Exception as exc:  # keep the build numbers; say what went wrong
            message = f"{result.spec.label}: browser run failed: {type(exc).__name__}: {exc}"
            print(message, file=sys.stderr, flush=True)
            first = message.splitlines()[0]
            result.notes.append(first if len(first) <= 300 else first[:299] + "…")

    results: list[TraceResult] = []
    failures: list[str] = []
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="tlsite-build-bench-"))
    warn_if_unjournaled(scratch)
    try:
        env: dict[str, str] = {}
        if args.revision is not None:
            revision, env = snapshot(args.revision, scratch / "source")
        for number, spec in enumerate(specs, 1):
            print(
                f"[{number}/{len(specs)}] {spec.label}: {spec.path} "
                f"({spec.path.stat().st_size / 1e6:,.1f} MB)",
                file=sys.stderr,
                flush=True,
            )
            folder = scratch / str(number)
            folder.mkdir(parents=True, exist_ok=True)
            try:
                results.append(
                    bench_trace(spec, args.repeat, folder, on_site=on_site, tlsite_env=env)
                )
            except BuildFailed as exc:  # report it, go on with the other traces
                print(exc, file=sys.stderr, flush=True)
                failures.append(str(exc))
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        if args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)

    base = next((r for r in results if r.spec.size_arg == args.size), None)
    large = next((r for r in results if args.large and r.spec.size_arg == args.large_size), None)
    storms = sorted((r for r in results if r.spec.storm), key=lambda r: r.spec.storm or 0)
    if not results:
        raise SystemExit("no trace was benchmarked: " + "; ".join(failures))
    sections = [build_table(results, args.repeat, version, revision)]
    if len(storms) >= 2:
        sections.append(storm_table(storms))
    if any(r.browser for r in results):
        sections.append(browser_table(results, args.key_delay))
    sections.append(targets(results, base, large, storms))
    if failures:
        sections.append("\n".join(f"Failed: {failure}" for failure in failures))
    text = "\n\n".join(sections) + "\n"
    print(text, end="")
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

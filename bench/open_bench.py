"""How fast a built page opens from ``file://`` in Chromium (issue #19: first paint ≤ 0.5 s,
interactive ≤ 1 s).

Each page opens ``--repeat`` times, interleaved with the others, each in a fresh browser
context of one headless Debian Chromium (the system one, as a user's). Measured per open,
from navigation start:

* first paint / first contentful paint (``performance.getEntriesByType('paint')``);
* DOMContentLoaded end and load end (navigation timing);
* long tasks (> 50 ms on the main thread, a ``longtask`` PerformanceObserver registered
  before the page's own scripts): their count, total, and the end of the last one;
* interactive: the later of load end and the end of the last long task, after the main
  thread stayed free of long tasks for ``--quiet`` ms (a lab "time to interactive").

With ``--ablate`` each page is also opened as copies with parts removed (every script; the
code blocks' highlighting spans; the code blocks), to show what the time is spent on.

    python bench/open_bench.py SITE/index.html SITE/-_3_0_0/index.html TLPARSE/big.html
    python bench/open_bench.py --ablate --repeat 3 small=SITE/index.html  # what it costs
    python bench/open_bench.py --repeat 3 --largest 5 SITE --largest 5 SITE2  # any slow page
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

INIT_SCRIPT = """
(() => {
  window.__open = {long: []};
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__open.long.push([e.startTime, e.duration]);
    }).observe({type: "longtask", buffered: true});
  } catch (e) {}
})();
"""

TIMINGS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const paint = Object.fromEntries(performance.getEntriesByType("paint")
                                   .map(e => [e.name, e.startTime]));
  return {fp: paint["first-paint"] ?? null, fcp: paint["first-contentful-paint"] ?? null,
          dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
          long: window.__open.long, bytes: nav.decodedBodySize};
}"""


@dataclass
class Open:
    fp: float
    fcp: float
    dcl: float
    load: float
    long_n: int
    long_total: float
    interactive: float
    errors: int


@dataclass
class Target:
    label: str
    path: Path
    opens: list[Open] = field(default_factory=list)

    def median(self, attribute: str) -> float:
        return statistics.median(getattr(o, attribute) for o in self.opens)


def open_once(browser: Any, url: str, quiet_ms: int, timeout_ms: int) -> Open:
    """One open in a fresh context; waits until load plus ``quiet_ms`` without long tasks."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors: list[str] = []

    def route(request_route: Any) -> None:
        if request_route.request.url.startswith(("file:", "data:", "blob:")):
            request_route.continue_()
        else:
            request_route.abort()

    context.route("**/*", route)
    context.add_init_script(INIT_SCRIPT)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url, wait_until="load", timeout=timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:  # until the main thread was free of long tasks for quiet_ms after load
        t = page.evaluate(TIMINGS)
        now = page.evaluate("performance.now()")
        last = max([t["load"], *(s + d for s, d in t["long"])])
        if now - last >= quiet_ms or time.monotonic() > deadline:
            break
        page.wait_for_timeout(50)
    context.close()
    long_tasks = t["long"]
    return Open(
        fp=(t["fp"] or t["fcp"] or 0) / 1000,
        fcp=(t["fcp"] or 0) / 1000,
        dcl=t["dcl"] / 1000,
        load=t["load"] / 1000,
        long_n=len(long_tasks),
        long_total=sum(d for _, d in long_tasks) / 1000,
        interactive=last / 1000,
        errors=len(errors),
    )


SCRIPT_TAG = re.compile(r"<script\b[^>]*>.*?</script>", re.S)
CODE_BLOCK = re.compile(r"<pre\b[^>]*>.*?</pre>", re.S)
SPAN = re.compile(r"</?span\b[^>]*>")


def ablations(target: Target) -> list[Target]:
    """Copies of ``target``'s page with one part removed each, beside it (its links resolve)."""
    html = target.path.read_text(encoding="utf-8")
    variants = {
        "no scripts": SCRIPT_TAG.sub("", html),
        "code unhighlighted": CODE_BLOCK.sub(lambda m: SPAN.sub("", m.group(0)), html),
        "no code blocks": CODE_BLOCK.sub("<pre></pre>", html),
    }
    out = []
    for name, text in variants.items():
        copy = target.path.with_name(f".open_bench_{len(out)}_{target.path.name}")
        copy.write_text(text, encoding="utf-8")
        out.append(Target(f"{target.label} ({name})", copy))
    return out


def _row(target: Target) -> str:
    size = target.path.stat().st_size / 1e6
    cells = [target.median(a) for a in ("fp", "dcl", "load", "interactive", "long_total")]
    errors = max(o.errors for o in target.opens)
    return (
        f"| {target.label} | {size:.2f} | "
        + " | ".join(f"{c:.3f}" for c in cells)
        + f" | {statistics.median(o.long_n for o in target.opens):g} | {errors} |"
    )


def table(targets: list[Target], repeat: int, version: str) -> str:
    head = (
        f"Chromium {version}, headless, file://, 1280×900, fresh context per open; "
        f"medians of {repeat} interleaved opens; seconds from navigation start.\n\n"
        "| page | MB | first paint | DOMContentLoaded | load | interactive | long tasks s "
        "| long tasks | console errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    return "\n".join([head, *(_row(t) for t in targets)])


def largest_pages(site: Path, count: int) -> list[Path]:
    """The ``count`` largest HTML pages of ``site`` (the pages most likely to open slowly),
    largest first; tlparse's own files (`*/*.html` beside a compile page) are pages too."""
    pages = [p for p in site.rglob("*.html") if p.name != "404.html"]
    return sorted(pages, key=lambda p: (-p.stat().st_size, p.as_posix()))[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="HTML files, optionally LABEL=PATH")
    parser.add_argument(
        "--largest",
        nargs=2,
        action="append",
        default=[],
        metavar=("N", "SITE"),
        help="also open the N largest HTML pages of SITE (repeatable)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quiet", type=int, default=500, help="ms free of long tasks")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--ablate", action="store_true", help="also open pages with parts cut")
    parser.add_argument("-o", "--output", type=Path, help="write the Markdown table here")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    targets = []
    for spec in args.pages:
        label, _, path = spec.rpartition("=")
        targets.append(Target(label or spec, Path(path).resolve()))
    for count, site in args.largest:
        for page in largest_pages(Path(site), int(count)):
            label = f"{Path(site).name}/{page.relative_to(site).as_posix()}"
            targets.append(Target(label, page.resolve()))
    if not targets:
        parser.error("give pages or --largest N SITE")
    copies: list[Target] = []
    if args.ablate:
        for target in list(targets):
            copies.extend(ablations(target))
    everything = [*targets, *copies]
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            version = browser.version
            for round_ in range(args.repeat):
                order = everything if round_ % 2 == 0 else everything[::-1]
                for target in order:
                    run = open_once(
                        browser, target.path.as_uri(), args.quiet, int(args.timeout * 1000)
                    )
                    target.opens.append(run)
                    print(
                        f"{target.label}: fp {run.fp:.3f} dcl {run.dcl:.3f} load "
                        f"{run.load:.3f} interactive {run.interactive:.3f} long "
                        f"{run.long_n}/{run.long_total:.3f} errors {run.errors}",
                        file=sys.stderr,
                        flush=True,
                    )
            browser.close()
        text = table(everything, args.repeat, version)
    finally:
        for copy in copies:
            copy.path.unlink(missing_ok=True)
    print(text)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

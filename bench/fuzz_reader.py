"""Fuzz the trace reader (and, optionally, the whole model) for longer than CI runs.

CI runs the property tests in ``tests/test_reader_properties.py`` for a few seconds. This
script runs the same checks on coverage-guided inputs from atheris (libFuzzer) for as long as
you like; each input must satisfy:

- reading raises nothing, and every physical line is accounted for exactly once: the outcomes
  add up to the line count and equal those of the tests' line-by-line reference reading;
- splitting the input into other chunks (sizes derived from the input) changes nothing;
- with ``--target model``: the handlers, the analyses and the Markdown pages are built too.

A failed check is an uncaught exception, which atheris reports as a crash and saves the input
as ``crash-<sha1>`` in the working directory (rerun it with ``python bench/fuzz_reader.py
crash-<sha1>``).

Usage (atheris: ``pip install atheris``)::

    python bench/fuzz_reader.py --seed /tmp/fuzz-corpus              # put corpus seeds there
    python bench/fuzz_reader.py /tmp/fuzz-corpus -max_total_time=300 # 5 minutes, reader
    python bench/fuzz_reader.py --target model /tmp/fuzz-corpus -max_total_time=300
    python bench/fuzz_reader.py --hypothesis 200000                  # no atheris: hypothesis

Every other argument goes to libFuzzer (``-max_len``, ``-runs``, ``-jobs``, ``-rss_limit_mb``,
corpus folders). A summary line (inputs, lines, crashes, unaccounted lines) is printed every
``--report-every`` seconds (default 60) and on a crash; libFuzzer's own last line ("Done N
runs in T second(s)") gives the final count.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT / "tests"))  # the reference reading lives with the tests

SEED_TRACES = ("comp_metrics.log", "links.log", "chromium_events.log", "artifacts.log")


class Tally:
    """What the run has seen so far (a crash ends the run, so ``crashes`` is 0 or 1)."""

    def __init__(self, every_seconds: float) -> None:
        self.every_seconds = every_seconds
        self.last_report = time.monotonic()
        self.inputs = 0
        self.lines = 0
        self.unaccounted = 0
        self.crashes = 0
        self.started = time.monotonic()

    def line(self) -> str:
        rate = self.inputs / max(time.monotonic() - self.started, 1e-9)
        return (
            f"fuzz_reader: {self.inputs:,} inputs ({rate:,.0f}/s), {self.lines:,} lines, "
            f"{self.crashes} crashes, {self.unaccounted} lines unaccounted for"
        )

    def report(self) -> None:
        print(self.line(), file=sys.stderr, flush=True)


def chunk_sizes(data: bytes) -> list[int]:
    """Chunk sizes derived from the input, so a crash reproduces from the saved input alone."""
    return [1 + b % 97 for b in hashlib.md5(data).digest()[:6]]


def check(data: bytes, tally: Tally, *, model: bool) -> None:
    """The checks of tests/test_reader_properties.py, on one input."""
    from test_reader_properties import read, reference_outcomes, split

    whole = read([data])
    total = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    tally.inputs += 1
    tally.lines += total
    unaccounted = abs(total - sum(whole.outcomes.values())) + abs(total - whole.total)
    if unaccounted:
        tally.unaccounted += unaccounted
        raise AssertionError(f"{unaccounted} lines unaccounted for: {whole.outcomes}")
    outcomes, records = reference_outcomes(data)
    if whole.outcomes != outcomes or [r[:3] for r in whole.records] != records:
        raise AssertionError(f"reader {whole.outcomes} != reference {outcomes}")
    if read(split(data, chunk_sizes(data))) != whole:
        raise AssertionError("the chunking changed the result")
    if model:
        build_model(data)
    if tally.every_seconds and time.monotonic() - tally.last_report >= tally.every_seconds:
        tally.last_report = time.monotonic()
        tally.report()


def build_model(data: bytes) -> None:
    from tlsite.core.builder import build_trace
    from tlsite.core.render.pages import render_tree

    trace = build_trace([data], "fuzz.log")
    try:
        assert trace.stats.accounted_lines == trace.stats.total_lines
        for view in (trace.graph_breaks, trace.recompiles, trace.failures, trace.compile_times):
            assert isinstance(view, list)
        render_tree(trace)
    finally:
        trace.close()


def write_seeds(folder: Path) -> int:
    """Small corpus traces and pieces of them, as starting inputs."""
    from corpus import tlparse_input

    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for name in SEED_TRACES:
        data = tlparse_input(name).read_bytes()
        lines = data.splitlines(keepends=True)
        pieces = [data[:4096], data.replace(b"\n", b"\r\n")[:4096]]
        pieces += [b"".join(lines[i : i + 12]) for i in range(0, len(lines), 12)]
        for piece in pieces:
            (folder / hashlib.sha1(piece).hexdigest()).write_bytes(piece)
            count += 1
    return count


def run_atheris(argv: list[str], tally: Tally, model: bool) -> None:
    import atheris

    with atheris.instrument_imports(include=["tlsite"]):
        import tlsite.core.builder
        import tlsite.core.records

        if model:
            import tlsite.core.render.pages  # noqa: F401

    def one_input(data: bytes) -> None:
        try:
            check(data, tally, model=model)
        except BaseException:
            tally.crashes += 1
            tally.report()
            raise

    atheris.Setup([sys.argv[0], *argv], one_input)
    atheris.Fuzz()


def run_hypothesis(examples: int, tally: Tally, model: bool) -> None:
    """The fallback without atheris: the property tests with many more examples."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from test_reader_properties import near_traces

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.one_of(near_traces(), st.binary(max_size=4000)))
    def prop(data: bytes) -> None:
        check(data, tally, model=model)

    try:
        prop()
    except BaseException:
        tally.crashes += 1
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=["reader", "model"], default="reader")
    parser.add_argument("--seed", type=Path, help="write seed inputs into this folder and exit")
    parser.add_argument("--hypothesis", type=int, metavar="N", help="run N hypothesis examples")
    parser.add_argument("--report-every", type=float, default=60.0, metavar="SECONDS")
    args, rest = parser.parse_known_args()
    if args.seed is not None:
        print(f"wrote {write_seeds(args.seed)} seed inputs to {args.seed}")
        return
    tally = Tally(args.report_every)
    atexit.register(tally.report)
    model = args.target == "model"
    if args.hypothesis is not None:
        run_hypothesis(args.hypothesis, tally, model)
        return
    try:
        import atheris  # noqa: F401
    except ImportError:
        sys.exit("atheris is not installed (pip install atheris); use --hypothesis N instead")
    run_atheris(rest, tally, model)


if __name__ == "__main__":
    main()

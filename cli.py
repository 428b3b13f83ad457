"""The ``tlsite`` command line: argument parsing and the end-of-run summary only.

Exit codes: 0 the report was built; 1 nothing could be built; 2 usage error (bad flags, an
existing output folder without ``--overwrite``); 3 the report was built but ``--strict`` found
skipped lines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import webbrowser
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tlsite import __version__

if TYPE_CHECKING:
    from tlsite.core import LogSource

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STRICT = 0, 1, 2, 3


@dataclass
class BuildOutcome:
    site: Path
    bundle: Path | None
    bundle_size: int
    seconds: float
    summary: str
    clean: bool


def example_trace() -> Path:
    """The small real trace shipped inside the package (``tlsite build --example``)."""
    return Path(__file__).resolve().parent / "core" / "examples" / "example.log"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tlsite",
        description="Turn a PyTorch TORCH_TRACE log into a searchable, self-contained website.",
    )
    parser.add_argument("--version", action="version", version=f"tlsite {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser(
        "build",
        help="build the report site (and a zip of it) from a trace",
        description="Build the report for PATH: a log file, .gz, .zip, .7z, a directory "
        "holding logs, or - for standard input.",
    )
    build.add_argument("path", nargs="?", help="the trace (file, archive, directory or -)")
    build.add_argument("--example", action="store_true", help="build the bundled example trace")
    build.add_argument("-o", "--out", default="tl_site", help="site folder (default: tl_site)")
    build.add_argument("--latest", action="store_true", help="use the newest log in a directory")
    build.add_argument("--overwrite", action="store_true", help="replace an existing site folder")
    build.add_argument("--no-browser", action="store_true", help="do not open the report")
    build.add_argument("--no-zip", action="store_true", help="do not write the DIR.zip bundle")
    build.add_argument(
        "--strict", action="store_true", help="exit 3 (after building) if any line was skipped"
    )
    build.add_argument("--quiet", action="store_true", help="print only errors")
    build.add_argument("--rank", type=int, help="for a folder of rank logs: the rank to build")
    build.add_argument(
        "-e", "--export", action="store_true", default=None, help="draft-export report mode"
    )
    build.add_argument(
        "-i",
        "--inductor-provenance",
        action="store_true",
        help="accepted for tlparse users: provenance pages are always built when logged",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "build":
        return _build_command(args)
    return EXIT_USAGE


def _fail(message: str, code: int) -> int:
    print(f"tlsite: error: {message}", file=sys.stderr)
    return code


def _build_command(args: argparse.Namespace) -> int:
    from tlsite.core import InputError

    if args.example == bool(args.path):
        return _fail("give a trace PATH or --example (not both)", EXIT_USAGE)
    path = str(example_trace()) if args.example else args.path
    out = Path(args.out)
    if out.exists() and not args.overwrite:
        return _fail(f"{out} already exists; pass --overwrite to replace it or use -o DIR", 2)
    try:
        outcome = build(
            path,
            out,
            latest=args.latest,
            rank=args.rank,
            export_mode=args.export,
            make_zip=not args.no_zip,
            progress=not args.quiet and sys.stderr.isatty(),
        )
    except InputError as exc:
        return _fail(str(exc), EXIT_FAILED)
    except OSError as exc:
        return _fail(f"{exc.filename or out}: {exc.strerror or exc}", EXIT_FAILED)
    if not args.quiet:
        _print_summary(outcome)
    if not args.no_browser and _can_open_browser():
        webbrowser.open((outcome.site / "index.html").resolve().as_uri())
    if args.strict and not outcome.clean:
        return EXIT_STRICT
    return EXIT_OK


def build(
    path: str,
    out: Path,
    *,
    latest: bool = False,
    rank: int | None = None,
    export_mode: bool | None = None,
    make_zip: bool = True,
    progress: bool = False,
) -> BuildOutcome:
    """Read, render and build into a temporary folder, then swap it in place of ``out``."""
    from tlsite.core import load_source, resolve_input, select_log
    from tlsite.core.bundle import write_zip
    from tlsite.mkdocs_plugin.build import build_report

    from .progress import Progress

    started = time.perf_counter()
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with Progress(enabled=progress) as bar, resolve_input(path, latest=latest) as resolved:
        log = select_log(resolved, rank, path)
        bar.stage(f"Reading {log.display_name}", log.size_hint)
        trace = load_source(log, export_mode=export_mode, on_bytes=bar.advance)
        trace.notes.extend(resolved.notes)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
        try:
            bar.stage("Writing pages")
            build_report(trace, staging / "site", raw_log=lambda: _chunks(log), on_page=bar.advance)
            _swap_into_place(staging / "site", out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            trace.close()
        bundle = None
        size = 0
        if make_zip:
            bar.stage("Writing the zip bundle")
            bundle = out.with_name(out.name + ".zip")
            size = write_zip(out, bundle)
    return BuildOutcome(
        site=out,
        bundle=bundle,
        bundle_size=size,
        seconds=time.perf_counter() - started,
        summary=trace.stats.summary(),
        clean=trace.stats.is_clean,
    )


def _chunks(log: LogSource) -> Iterator[bytes]:
    """The chosen log's bytes (decompressed), for ``raw.log``."""
    with log.open() as stream:
        while chunk := stream.read(1 << 20):
            yield chunk


def _swap_into_place(built: Path, out: Path) -> None:
    """Replace ``out`` with ``built`` so a failed build never leaves a half-written report."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    os.replace(built, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _print_summary(outcome: BuildOutcome) -> None:
    from tlsite.core.bundle import GITHUB_ATTACHMENT_LIMIT

    lines = [outcome.summary, f"Report: {outcome.site / 'index.html'}"]
    if outcome.bundle is not None:
        mb = outcome.bundle_size / 1e6
        lines.append(f"Bundle: {outcome.bundle} ({mb:.1f} MB) — attach it to a GitHub issue")
        if outcome.bundle_size > GITHUB_ATTACHMENT_LIMIT:
            lines.append(
                "Warning: the bundle is over GitHub's 25 MB attachment limit; attach the raw "
                "log (gzipped) instead, or publish the site (see the README)."
            )
    lines.append(
        "Note: a trace contains your model's source code and file paths; share it knowingly."
    )
    lines.append(f"Built in {outcome.seconds:.1f} s.")
    print("\n".join(lines))


def _can_open_browser() -> bool:
    if os.environ.get("CI"):
        return False
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    return True


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

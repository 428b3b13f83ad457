"""The ``tlsite`` command line: argument parsing and the end-of-run summary only.

Exit codes: 0 the report was built; 1 nothing could be built (the input is missing,
unreadable or not a trace); 2 usage error (bad flags, an existing output without
``--overwrite``, or one ``--overwrite`` must not replace: see :mod:`tlsite.core.output`); 3 the
report was built but ``--strict`` found skipped lines or damaged payloads; 4 ``tlsite diff
--fail-on`` found AFTER worse than BEFORE (the diff was still written); 130 interrupted
(Ctrl-C); 143 terminated (SIGTERM). ``tlsite run`` exits with the command's own code when it
failed (``128 + N`` when signal N ended it).
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlsite import __version__
from tlsite.core.output import BuildOutcome
from tlsite.terminal import safe, say

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tlsite.core.redact import Redactor
    from tlsite.core.worker import TaskPool

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STRICT = 0, 1, 2, 3
#: Interrupted (Ctrl-C): what a shell reports for a process SIGINT ended.
EXIT_INTERRUPTED = 130


def _open_in_browser(url: str) -> None:
    import webbrowser  # only when a report is opened: --no-browser and the tests never do

    webbrowser.open(url)


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
    build.add_argument(
        "--serve", action="store_true", help="then serve the report over HTTP (see tlsite serve)"
    )
    _add_serve_options(build)
    _add_site_options(build)
    _add_trace_options(build)

    publish = commands.add_parser(
        "publish",
        help="build a report (or take a built site) and push it to a git branch (GitHub Pages)",
        description="Commit the report of PATH (a trace, or a site folder tlsite built) to a "
        "branch of a git remote with ghp-import, adding .nojekyll, and push it.",
    )
    publish.add_argument("path", nargs="?", help="a trace, or a built site folder (index.html)")
    publish.add_argument(
        "--to", required=True, metavar="GIT_REMOTE", help="a URL, a path or a remote name"
    )
    publish.add_argument("--branch", default="gh-pages", help="branch to commit to (gh-pages)")
    publish.add_argument("--message", "-m", help="commit message")
    publish.add_argument(
        "--no-history",
        action="store_true",
        help="replace the branch with one commit (forced push) instead of adding one on top",
    )
    publish.add_argument("--quiet", action="store_true", help="print only errors")
    _add_trace_options(publish)

    markdown = commands.add_parser(
        "markdown",
        help="write the report as Markdown files (a MkDocs project) instead of a site",
        description="Write DIR/docs (the pages as Markdown, theme assets, tlparse files) and "
        "DIR/mkdocs.yml, so the report can be built by MkDocs or copied into other docs.",
    )
    markdown.add_argument("path", nargs="?", help="the trace (file, archive, directory or -)")
    markdown.add_argument("-o", "--out", default="tl_markdown", help="folder (tl_markdown)")
    markdown.add_argument("--overwrite", action="store_true", help="replace an existing folder")
    markdown.add_argument("--quiet", action="store_true", help="print only errors")
    _add_trace_options(markdown)

    serve = commands.add_parser(
        "serve",
        help="serve a built report over HTTP (for a remote machine: through an SSH tunnel)",
        description="Serve the report site DIR (a folder tlsite built) on a free local port "
        "until Ctrl-C, and print the URL and the ssh -L command that reaches it.",
    )
    serve.add_argument("path", help="the site folder tlsite built (holds its manifest.json)")
    _add_serve_options(serve)

    run = commands.add_parser(
        "run",
        help="run a command with TORCH_TRACE set, then build the report of what it wrote",
        usage="tlsite run [build options] -- COMMAND [ARG ...]",
        description="Run COMMAND with TORCH_TRACE set to a new folder beside the report, "
        "then build the report from the logs it wrote (one report per rank for rank logs).",
    )
    run.add_argument(
        "--trace-dir", help="folder for TORCH_TRACE (must be new or empty; default: a new one)"
    )
    _add_site_options(run)
    _add_trace_options(run, latest=False)
    run.add_argument(
        "--compare",
        metavar="OLD_TRACE",
        help="then also write the diff of OLD_TRACE against this run into DIR_diff "
        "(with --fail-on: exit 4 when this run regressed)",
    )
    from tlsite.diff_command import add_diff_parser, add_fail_on

    add_fail_on(run)
    add_diff_parser(commands, _add_site_options, _add_trace_options)
    return parser


def _add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Where ``tlsite serve`` and ``build --serve`` listen."""
    parser.add_argument(
        "--port", type=int, default=0, help="port to listen on (default: a free one)"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; reach it with ssh -L)",
    )


def _add_site_options(parser: argparse.ArgumentParser) -> None:
    """Options of commands that write a report site and its bundle (build, run)."""
    parser.add_argument("-o", "--out", default="tl_site", help="site folder (default: tl_site)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing site folder")
    parser.add_argument("--no-browser", action="store_true", help="do not open the report")
    parser.add_argument(
        "--bundle",
        choices=("zip", "7z", "none"),  # tlsite.core.bundle.BUNDLE_FORMATS
        default="zip",
        help="archive written beside the site: zip (default; GitHub issues accept it), 7z "
        "(several times smaller, but GitHub issues do not accept .7z) or none",
    )
    parser.add_argument("--no-zip", action="store_true", help="write no bundle (--bundle none)")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 (after building) if any line was skipped or any payload was damaged",
    )
    parser.add_argument("--quiet", action="store_true", help="print only errors")
    parser.add_argument(
        "-i",
        "--inductor-provenance",
        action="store_true",
        help="accepted for tlparse users: provenance pages are always built when logged",
    )


def _add_trace_options(parser: argparse.ArgumentParser, *, latest: bool = True) -> None:
    """Options that choose and read the trace (every command that reads one)."""
    if latest:
        parser.add_argument(
            "--latest", action="store_true", help="use the newest log in a directory"
        )
    parser.add_argument("--rank", type=int, help="for a folder of rank logs: build this rank only")
    parser.add_argument(
        "--jobs",
        type=int,
        help="ranks read at a time for a folder of rank logs (default: one per core)",
    )
    parser.add_argument(
        "--all-ranks-html",
        action="store_true",
        help="accepted for tlparse users: a folder of rank logs always gives all ranks",
    )
    parser.add_argument(
        "-e", "--export", action="store_true", default=None, help="draft-export report mode"
    )
    parser.add_argument(
        "--redact",
        nargs="?",
        const="paths",
        metavar="paths|code",
        help="rewrite home-folder and user path prefixes in everything shown and bundled; "
        "--redact=code also drops the source lines of user code from stacks and graphs",
    )
    parser.add_argument(
        "--redact-prefix",
        action="append",
        default=[],
        metavar="PATH",
        help="with --redact: also replace this path prefix with REDACTED (repeatable)",
    )


def console_main() -> int:
    """The ``tlsite`` command (and ``python -m tlsite``): :func:`main` in a process of its own."""
    _freeze_at_exit()
    return main()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if argv[:1] == ["run"] and "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    parser = _parser()
    if argv and _looks_like_a_trace_path(argv[0]):  # tlparse's habit: tlparse trace.log
        parser.error(f"{argv[0]!r} is not a command; to build its report: tlsite build {argv[0]}")
    args = parser.parse_args(argv)
    if args.command == "run" and not command:
        parser.error("give the command to run after --: tlsite run [options] -- python train.py")
    if args.command == "serve":
        return _serve_command(Path(args.path), args.host, args.port)
    usage = _check_redact(args)
    if usage is not None:
        return _fail(usage, EXIT_USAGE)
    if args.command in ("publish", "markdown") and not args.path:
        parser.error(f"tlsite {args.command}: give the trace PATH")
    from tlsite.core.cleanup import EXIT_TERMINATED, Terminated, exit_on_sigterm

    exit_on_sigterm()
    try:
        if args.command == "build":
            return _build_command(args)
        if args.command == "publish":
            return _publish_command(args)
        if args.command == "markdown":
            return _markdown_command(args)
        if args.command == "run":
            return _run_command(args, command)
        if args.command == "diff":
            return _diff_command(args)
    except KeyboardInterrupt:  # the staging folder is gone by now: nothing half-written
        return _fail("interrupted", EXIT_INTERRUPTED)
    except Terminated as exc:  # SIGTERM: the ``finally`` blocks removed the scratch folders
        return _fail("terminated", int(exc.code or EXIT_TERMINATED))
    return EXIT_USAGE


def _freeze_at_exit() -> None:
    """Have the interpreter's exit leave what the process made to the operating system.

    Only for a process that is the command (:func:`console_main`): a program calling
    :func:`main` keeps its own exit as it was. A command's process ends with it, and its
    memory goes back as a whole; but the exit first runs full garbage collections over every
    object the command made (MkDocs and the other imports, the trace's model, pages), which
    find next to nothing to free. Frozen, they are skipped. Cyclic garbage left at exit is
    then not finalized, which Python does not promise anyway: tlsite closes its files and
    removes its scratch folders itself.
    """
    atexit.unregister(gc.freeze)  # once, however often main() runs in one process
    atexit.register(gc.freeze)


def _looks_like_a_trace_path(word: str) -> bool:
    """A first argument that names a file rather than a command (``tlsite trace.log``)."""
    if word.startswith("-") or word in ("build", "publish", "markdown", "run", "serve", "diff"):
        return False
    return os.path.exists(word) or "." in word or os.sep in word


def _output_problem(args: argparse.Namespace, inputs: list[str]) -> str | None:
    """Why the command must not write its output (None when it may): it may not be replaced
    at all, or the folder or its bundle exists and ``--overwrite`` was not given."""
    from tlsite.core.output import bundle_path, refusal

    out = Path(args.out).resolve()
    fmt = _bundle_format(args) if hasattr(args, "bundle") else "none"
    archive = bundle_path(out, fmt)
    refused = refusal(out, inputs=inputs, bundle=fmt)  # first: --overwrite would not help
    if refused is not None:
        return refused
    existing = [p for p in (out, archive) if p is not None and (p.exists() or p.is_symlink())]
    if existing and not args.overwrite:
        return f"{existing[0]} already exists; pass --overwrite to replace it or use -o DIR"
    return None


def _check_redact(args: argparse.Namespace) -> str | None:
    """Validate --redact; ``--redact TRACE`` (no mode) is read as ``--redact`` then TRACE."""
    from tlsite.core.redact import MODES

    mode = args.redact
    if mode is None or mode in MODES:
        if args.redact_prefix and mode is None:
            return "--redact-prefix needs --redact"
        return None
    if getattr(args, "path", "") is None:  # the trace was taken as the mode
        args.path, args.redact = mode, "paths"
        return None
    return f"--redact: expected paths or code, not {mode!r} (write --redact=code)"


def _redactor(args: argparse.Namespace) -> Redactor | None:
    from tlsite.core.redact import Redactor

    if args.redact is None:
        return None
    return Redactor(args.redact, list(args.redact_prefix))


def _bundle_format(args: argparse.Namespace) -> str:
    return "none" if args.no_zip else args.bundle


def _fail(message: str, code: int) -> int:
    print(f"tlsite: error: {safe(message)}", file=sys.stderr)
    return code


def _build_error(exc: Exception, out: Path, failed: int = EXIT_FAILED) -> int:
    """The line and exit code for what writing ``out`` raised: a refused output is a usage
    error; an input that cannot be read, or a write that failed, exits ``failed``."""
    from tlsite.core.output import OutputRefused

    if isinstance(exc, OutputRefused):
        return _fail(str(exc), EXIT_USAGE)
    if isinstance(exc, OSError):
        return _fail(f"{exc.filename or out}: {exc.strerror or exc}", failed)
    return _fail(str(exc), failed)


def _build_command(args: argparse.Namespace) -> int:
    from tlsite.core import InputError
    from tlsite.core.output import OutputRefused

    if args.example == bool(args.path):
        return _fail("give a trace PATH or --example (not both)", EXIT_USAGE)
    path = str(example_trace()) if args.example else args.path
    out = Path(args.out)
    problem = _output_problem(args, [path])
    if problem is not None:
        return _fail(problem, EXIT_USAGE)
    try:
        outcome = build(
            path,
            out,
            latest=args.latest,
            rank=args.rank,
            export_mode=args.export,
            progress=not args.quiet and sys.stderr.isatty(),
            bundle=_bundle_format(args),
            redactor=_redactor(args),
            jobs=args.jobs,
            all_ranks=args.all_ranks_html,
        )
    except (OutputRefused, InputError, OSError) as exc:
        return _build_error(exc, out)
    if not args.quiet:
        _print_summary(outcome)
    if args.serve:
        code = _serve_command(outcome.site, args.host, args.port)
        return _strict_code(args, outcome) if code == EXIT_OK else code
    if not args.no_browser and _can_open_browser():
        _open_in_browser((outcome.site / "index.html").resolve().as_uri())
    return _strict_code(args, outcome)


def _strict_code(args: argparse.Namespace, outcome: BuildOutcome) -> int:
    """EXIT_STRICT, saying why on stderr, when ``--strict`` finds the input damaged."""
    if not args.strict or outcome.clean:
        return EXIT_OK
    print(f"tlsite: --strict: {outcome.why_not_clean}; exit {EXIT_STRICT}", file=sys.stderr)
    return EXIT_STRICT


def _serve_command(site: Path, host: str, port: int) -> int:
    """Serve a site tlsite built until Ctrl-C (exit 0)."""
    from tlsite.core.output import is_tlsite_site
    from tlsite.serve import serve

    if not site.is_dir() or not is_tlsite_site(site):
        return _fail(f"{site} is not a report site tlsite built (no tlsite manifest.json)", 1)
    if not 0 <= port <= 65535:
        return _fail(f"--port {port}: expected 0 (a free port) to 65535", EXIT_USAGE)
    try:
        return serve(site, host, port)
    except OSError as exc:
        return _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", EXIT_FAILED)


def _publish_command(args: argparse.Namespace) -> int:
    from tlsite.core import InputError
    from tlsite.core.cleanup import scratch_folder
    from tlsite.mkdocs_plugin.publish import (
        PublishError,
        check_branch,
        is_built_site,
        publish_site,
    )

    given = Path(args.path)
    redactor = _redactor(args)
    if is_built_site(given) and redactor is not None:
        return _fail(f"{given} is a built site: --redact applies when building a trace", 2)
    name = redactor.text(given.name) if redactor is not None else given.name
    message = args.message or f"tlsite {__version__}: report of {name}"
    try:
        check_branch(args.branch)  # before a build that may take minutes
    except PublishError as exc:
        return _fail(str(exc), EXIT_USAGE)
    try:
        with scratch_folder("publish-site") as scratch:
            site = given
            if not is_built_site(given):
                site = build(
                    args.path,
                    Path(scratch) / "site",
                    latest=args.latest,
                    rank=args.rank,
                    export_mode=args.export,
                    bundle="none",
                    redactor=redactor,
                    progress=not args.quiet and sys.stderr.isatty(),
                ).site
            published = publish_site(
                site, args.to, branch=args.branch, message=message, no_history=args.no_history
            )
    except (InputError, PublishError) as exc:
        return _fail(str(exc), EXIT_FAILED)
    except OSError as exc:
        return _fail(f"{exc.filename or given}: {exc.strerror or exc}", EXIT_FAILED)
    if not args.quiet:
        lines = [
            f"Published to branch {published.branch} of {published.remote} "
            f"(commit {published.commit[:12]})."
        ]
        lines.extend(published.skipped)
        if published.pages_url:
            lines.append(
                f"Pages URL: {published.pages_url} (once GitHub Pages serves the "
                f"{published.branch} branch: Settings > Pages)"
            )
        if redactor is None:
            lines.append(
                "Note: the report is now as public as that repository; it holds your model's "
                "code and file paths (--redact rewrites home-folder paths)."
            )
        say("\n".join(lines))
    return EXIT_OK


def _markdown_command(args: argparse.Namespace) -> int:
    from tlsite.core import InputError
    from tlsite.core.output import OutputRefused
    from tlsite.mkdocs_plugin.markdown_export import export_markdown

    out = Path(args.out)
    problem = _output_problem(args, [args.path])
    if problem is not None:
        return _fail(problem, EXIT_USAGE)
    try:
        pages = export_markdown(
            args.path,
            out,
            latest=args.latest,
            rank=args.rank,
            export_mode=args.export,
            redactor=_redactor(args),
        )
    except (OutputRefused, InputError, OSError) as exc:
        return _build_error(exc, out)
    if not args.quiet:
        say(
            f"Markdown: {out / 'docs'} ({len(pages)} pages, with the theme assets and the "
            f"tlparse files they link to)\nBuild it with: mkdocs build -f {out / 'mkdocs.yml'}"
        )
    return EXIT_OK


def _run_command(args: argparse.Namespace, command: list[str]) -> int:
    from tlsite.core import InputError
    from tlsite.core.output import OutputRefused
    from tlsite.run_command import CommandError, new_trace_dir, run_traced, traced_ranks

    out = Path(args.out).resolve()
    if args.fail_on and not args.compare:
        return _fail("--fail-on needs --compare OLD_TRACE", EXIT_USAGE)
    problem = _output_problem(args, [args.trace_dir] if args.trace_dir else [])
    if problem is not None:
        return _fail(problem, EXIT_USAGE)
    if args.trace_dir:
        trace_dir = Path(args.trace_dir).resolve()
        if trace_dir.exists() and (not trace_dir.is_dir() or any(trace_dir.iterdir())):
            return _fail(f"{trace_dir}: --trace-dir must be a new or empty folder", EXIT_USAGE)
        trace_dir.mkdir(parents=True, exist_ok=True)
    else:
        trace_dir = new_trace_dir(out)
    if not args.quiet:
        say(f"tlsite: running {' '.join(command)} with TORCH_TRACE={trace_dir}", sys.stderr)
    options = {
        "export_mode": args.export,
        "bundle": _bundle_format(args),
        "redactor": _redactor(args),
        "progress": not args.quiet and sys.stderr.isatty(),
    }
    try:
        finished = run_traced(command, trace_dir)
    except CommandError as exc:
        if not args.trace_dir:
            trace_dir.rmdir()  # made for this run, still empty
        return _fail(str(exc), exc.code)
    returncode = EXIT_INTERRUPTED if finished.interrupted else finished.code
    try:
        ranks = traced_ranks(trace_dir)
        if len(ranks) > 1 and args.rank is None:  # one site for all ranks
            outcome = build(str(trace_dir), out, jobs=args.jobs, **options)
        else:
            outcome = build(str(trace_dir), out, latest=True, rank=args.rank, **options)
    except (OutputRefused, InputError, OSError) as exc:
        # a failing command's own code says more than ours
        return _build_error(exc, out, returncode or EXIT_FAILED)
    if not args.quiet:
        _print_summary(outcome)
        say(f"Trace: {trace_dir}")
        if finished.interrupted:
            print("Note: the command was interrupted; the report shows what it logged until then.")
        elif returncode != 0:
            print(f"Note: the command exited with {returncode}; the report shows what it logged.")
    if args.compare:
        compared = _diff_after_run(args, trace_dir, out)
        returncode = returncode or compared
    if not args.no_browser and _can_open_browser():
        _open_in_browser((outcome.site / "index.html").resolve().as_uri())
    if returncode != 0:
        return returncode
    return _strict_code(args, outcome)


#: Held while :func:`build` imports with the garbage collector off.
_IMPORTING = threading.Lock()
#: The collector's third threshold during a build: no full collection (see :func:`_build`).
NO_FULL_COLLECTION = 1 << 30


def build(path: str, out: Path, **options: Any) -> BuildOutcome:
    """:func:`tlsite.mkdocs_plugin.pipeline.build` (imported when first called: MkDocs takes
    a while to import, and ``tlsite --version`` or ``serve`` need none of it)."""
    # What importing MkDocs and the rest makes (modules, classes, functions) lives as long
    # as the process: the garbage collector's passes would find nothing to free in it, so
    # none runs while it is made, and it is frozen during the build (see _build).
    pool = _early_rank_pool(path, options)
    try:
        return _build(path, out, pool, options)
    finally:
        if pool is not None:  # unused (not a job after all), or a build that failed
            pool.close()


def _early_rank_pool(path: str, options: Mapping[str, Any]) -> TaskPool | None:
    """A job's rank helpers, started before MkDocs is imported (they import it meanwhile),
    when ``path`` looks like a folder of rank logs and the build may use them."""
    if options.get("rank") is not None or options.get("redactor") or options.get("latest"):
        return None  # one log, or the ranks read in this process
    if not os.path.isdir(path):  # a log or an archive: no import of the job's modules
        return None
    from tlsite.core.multirank import early_rank_pool

    return early_rank_pool(path, options.get("jobs"))


def _build(path: str, out: Path, pool: TaskPool | None, options: Mapping[str, Any]) -> BuildOutcome:
    with _IMPORTING:  # one thread at a time: another would find the collector off, and keep it so
        collecting = gc.isenabled()
        gc.disable()
        try:
            from tlsite.mkdocs_plugin.pipeline import build as build_pipeline
        finally:
            if collecting:
                gc.enable()
    if gc.get_freeze_count():  # the caller froze what it has: unfreezing would thaw that too
        return build_pipeline(path, out, pool=pool, **options)
    gc.freeze()
    # what a build makes lives until it ends (the model, pages, MkDocs' files): the young
    # generations are still collected, but no full collection scans it all again
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, NO_FULL_COLLECTION)
    try:
        return build_pipeline(path, out, pool=pool, **options)
    finally:
        gc.set_threshold(young, middle, old)
        gc.unfreeze()  # a process that builds again (the tests) collects as before


def _diff_command(args: argparse.Namespace) -> int:
    """``tlsite diff``: the site, the terminal summary, and the ``--fail-on`` verdict."""
    from tlsite.core import InputError
    from tlsite.core.output import OutputRefused
    from tlsite.diff_command import EXIT_REGRESSED, regressed, run_diff, sides, summary_text

    try:
        before, before_rank, after, after_rank = sides(args)
    except ValueError as exc:
        return _fail(str(exc), EXIT_USAGE)
    problem = _output_problem(args, [before, after])
    if problem is not None:
        return _fail(problem, EXIT_USAGE)
    try:
        outcome = run_diff(
            (before, before_rank),
            (after, after_rank),
            Path(args.out),
            bundle=_bundle_format(args),
            latest=args.latest,
            export_mode=args.export,
            redactor=_redactor(args),
            progress=not args.quiet and sys.stderr.isatty(),
        )
    except (OutputRefused, InputError, OSError) as exc:
        return _build_error(exc, Path(args.out))
    if not args.quiet:
        say(summary_text(outcome))
    if not args.no_browser and _can_open_browser():
        _open_in_browser((outcome.site / "index.html").resolve().as_uri())
    if regressed(outcome.diff, args.fail_on):
        return EXIT_REGRESSED
    d = outcome.diff
    if args.strict and not (d.before.clean and d.after.clean):
        print(f"tlsite: --strict: a side has damaged input; exit {EXIT_STRICT}", file=sys.stderr)
        return EXIT_STRICT
    return EXIT_OK


def _diff_after_run(args: argparse.Namespace, trace_dir: Path, out: Path) -> int:
    """``tlsite run --compare OLD``: the diff of OLD against the run's trace, into
    ``DIR_diff`` beside the report; returns an exit code (0 when it was written)."""
    from tlsite.core import InputError
    from tlsite.core.output import OutputRefused
    from tlsite.diff_command import EXIT_REGRESSED, regressed, run_diff, summary_text

    target = out.with_name(f"{out.name}_diff")
    if (target.exists() or target.is_symlink()) and not args.overwrite:
        return _fail(f"{target} already exists; pass --overwrite to replace it", EXIT_USAGE)
    try:
        outcome = run_diff(
            (args.compare, None),
            (str(trace_dir), args.rank),
            target,
            bundle=_bundle_format(args),
            latest=True,
            export_mode=args.export,
            redactor=_redactor(args),
        )
    except OutputRefused as exc:
        return _fail(str(exc), EXIT_USAGE)
    except (InputError, OSError) as exc:
        return _fail(f"--compare: {exc}", EXIT_FAILED)
    if not args.quiet:
        say(summary_text(outcome))
    return EXIT_REGRESSED if regressed(outcome.diff, args.fail_on) else 0


def _print_summary(outcome: BuildOutcome) -> None:
    from tlsite.core.bundle import GITHUB_ATTACHMENT_LIMIT, left_out_of_zip

    lines = [outcome.summary, f"Report: {outcome.site / 'index.html'}"]
    if outcome.bundle is not None and outcome.bundle_format == "7z":
        mb = outcome.bundle_size / 1e6
        lines.append(
            f"Bundle: {outcome.bundle} ({mb:.1f} MB) — for email, chat or release assets: "
            "GitHub issues accept .zip, not .7z (use --bundle zip to attach to an issue)"
        )
    elif outcome.bundle is not None:
        mb = outcome.bundle_size / 1e6
        lines.append(f"Bundle: {outcome.bundle} ({mb:.1f} MB) — attach it to a GitHub issue")
        if left := left_out_of_zip(outcome.site):
            lines.append(_left_out_note(left))
        if outcome.bundle_size > GITHUB_ATTACHMENT_LIMIT:
            lines.append(
                "Warning: the bundle is over GitHub's 25 MB attachment limit. To shrink it: "
                "--bundle 7z (several times smaller, for email or release assets), tlsite "
                "publish (GitHub Pages), or --redact=code; or attach the raw log gzipped."
            )
    lines.append(
        "Note: a trace contains your model's source code and file paths; share it knowingly."
    )
    lines.append(f"Built in {outcome.seconds:.1f} s.")
    say("\n".join(lines))


def _left_out_note(left: Mapping[str, str]) -> str:
    """The summary's note on the files the zip left out (the manifest lists each)."""
    from tlsite.core.bundle import input_copy_kind

    kinds = sorted({kind for name in left if (kind := input_copy_kind(name))})
    parts = [f"{' and '.join(kinds)} (copies of the input log)"] if kinds else []
    if copies := sum(1 for name in left if input_copy_kind(name) is None):
        parts.append(
            f"{copies:,} raw artifact file{'s' if copies != 1 else ''} (tlparse's copies of "
            "text the compile pages show in full; their 'raw file' links work in the site "
            "folder only)"
        )
    return (
        f"Note: {' and '.join(parts)} left out of the zip to keep it under GitHub's 25 MB "
        "attachment limit; they are in the site folder and listed in manifest.json."
    )


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

"""Issue #20, points 4, 6, 15 and 16: what tlsite prints, publishes, leaves behind and exits
with when the input is hostile or the process is interrupted."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "core" / "examples" / "example.log"
#: A name that would set a hyperlink (OSC 8), colour the terminal red, ring the bell, and
#: (as rich markup) close a tag that was never opened and open a link.
HOSTILE = (
    "trace[/x]\x1b]8;;http://evil.example/\x07[link=http://evil.example/]click[/link]"
    "\x1b[31mred\x9b2J.log"
)
#: The same for a file on disk (no ``/`` in a file name): a link and a colour.
HOSTILE_FILE = "trace\x1b]8;;evil\x07[link=evil]click[b]\x1b[31mred\x9b2J.log"
TIMEOUT_S = 120


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("TORCH_TRACE", None)
    env.update(extra)
    return env


def run_on_terminal(args: list[str], cwd: Path) -> tuple[int, bytes]:
    """Run ``python -m tlsite ARGS`` on a pseudo-terminal (so rich draws its progress
    display); its exit code and everything it wrote to the terminal."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(cwd)
        os.execve(
            sys.executable,
            [sys.executable, "-m", "tlsite", *args],
            _env(TERM="xterm-256color", COLUMNS="200"),
        )
    out = b""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out


def _no_escape_from_the_name(out: bytes) -> None:
    assert b"\x1b]8;" not in out, "a hyperlink (OSC 8) reached the terminal"
    assert b"\x07" not in out and b"\x1b[31m" not in out and "\x9b".encode() not in out
    assert b"Traceback" not in out


# --- point 6: the terminal is not the trace's to paint ------------------------------------


@pytest.mark.slow
def test_hostile_zip_member_name_is_shown_not_obeyed_on_a_terminal(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "t.zip", "w") as archive:
        archive.write(EXAMPLE, HOSTILE)
    code, out = run_on_terminal(
        ["build", "t.zip", "-o", "site", "--no-browser", "--bundle", "none"], tmp_path
    )
    assert code == 0, out.decode(errors="replace")
    _no_escape_from_the_name(out)
    text = out.decode()
    # the name is in the summary, with its control characters written out
    assert "trace[/x]\\x1b]8;;" in text and "[link=http:" in text and "\\x1b[31mred" in text
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.slow
def test_hostile_trace_file_name_is_shown_not_obeyed_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / HOSTILE_FILE).write_bytes(EXAMPLE.read_bytes())
    code, out = run_on_terminal(
        ["build", HOSTILE_FILE, "-o", "site", "--no-browser", "--bundle", "none"], tmp_path
    )
    assert code == 0, out.decode(errors="replace")
    _no_escape_from_the_name(out)
    assert "[link=evil]click[b]\\x1b[31mred" in out.decode()


def test_hostile_member_names_in_an_error_are_escaped(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as archive:
        archive.writestr(HOSTILE, "garbage\n")
        archive.writestr("b" + HOSTILE, "garbage\n")
    done = subprocess.run(
        [sys.executable, "-m", "tlsite", "build", "two.zip", "--no-browser"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1
    _no_escape_from_the_name(done.stdout + done.stderr)
    assert b"2 logs found" in done.stderr and b"\\x1b]8;;http:" in done.stderr


def test_safe_writes_every_control_visibly() -> None:
    from tlsite.terminal import markup_safe, safe

    assert safe("a\x1bb\x07c\rd\ne\x9bf\u202eg") == "a\\x1bb\\x07c\\x0dd\\x0ae\\x9bf\\u202eg"
    assert safe("not utf-8: \udcff") == "not utf-8: \\udcff"  # a surrogate never raises
    from rich.text import Text

    rendered = Text.from_markup(markup_safe("t[/x][link=http://e/]c[/link]"))
    assert rendered.plain == "t[/x][link=http://e/]c[/link]" and not rendered.spans


# --- point 4: publish keeps credentials out of every message, and refuses bad branches ----


def _tlsite(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tlsite", *args],
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def _git_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return _env(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", XDG_CONFIG_HOME=str(home))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder publish takes as a built site (it has index.html)."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "index.html").write_text("<html><body>report</body></html>", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "url",
    [
        "https://user:SECRET@127.0.0.1:9/x.git",
        "https://SECRET@127.0.0.1:9/x.git",
        "https://127.0.0.1:9/x.git?access_token=SECRET",
    ],
)
def test_publish_never_prints_the_credentials_of_its_remote(
    tmp_path: Path, site: Path, url: str
) -> None:
    done = _tlsite("publish", str(site), "--to", url, cwd=tmp_path, env=_git_env(tmp_path))
    assert done.returncode == 1
    assert "127.0.0.1" in done.stderr  # the message still says where it failed
    assert "SECRET" not in done.stdout + done.stderr


def test_publish_to_a_named_remote_hides_its_credentials(tmp_path: Path, site: Path) -> None:
    env = _git_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, env=env, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "https://u:SECRET@127.0.0.1:9/x.git"],
        cwd=work,
        env=env,
        check=True,
    )
    done = _tlsite("publish", str(site), "--to", "origin", cwd=work, env=env)
    assert done.returncode == 1 and "SECRET" not in done.stdout + done.stderr


@pytest.mark.parametrize("branch", ["HEAD", "a..b", "-f", "x.lock", "a b", "@{-1}"])
def test_publish_refuses_a_branch_git_would_not_create(
    tmp_path: Path, site: Path, branch: str
) -> None:
    env = _git_env(tmp_path)
    bare = tmp_path / "pages.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], env=env, check=True)
    done = _tlsite(
        "publish", str(site), "--to", str(bare), f"--branch={branch}", cwd=tmp_path, env=env
    )
    assert done.returncode == 2, done.stderr
    assert "not a valid branch name" in done.stderr
    refs = subprocess.run(
        ["git", "--git-dir", str(bare), "for-each-ref", "--format=%(refname)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert refs == ""  # nothing was pushed


def test_redact_credentials_keeps_the_rest_of_the_url() -> None:
    from tlsite.mkdocs_plugin.publish import redact_credentials

    assert redact_credentials("push to https://u:p@github.com/o/r.git failed") == (
        "push to https://***@github.com/o/r.git failed"
    )
    assert redact_credentials("git@github.com:o/r.git") == "git@github.com:o/r.git"
    assert redact_credentials("'https://h/r?token=abc/': x") == "'https://h/r?token=***/': x"


# --- point 16: `tlsite run` exits as the command did, and Ctrl-C still gives the report ---

KILL_ITSELF = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"


@pytest.mark.slow
def test_run_exits_128_plus_the_signal_that_killed_the_command(tmp_path: Path) -> None:
    # a job killed after it logged: the report is built, and the exit code says SIGKILL
    job = f"import os, shutil; shutil.copy({str(EXAMPLE)!r}, os.environ['TORCH_TRACE'])\n"
    done = _tlsite(
        "run", "--no-browser", "--", sys.executable, "-c", job + KILL_ITSELF, cwd=tmp_path
    )
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    assert (tmp_path / "tl_site" / "index.html").is_file()
    assert "exited with 137" in done.stdout and "Traceback" not in done.stderr
    # killed before it logged anything: still the job's code, not tlsite's 1
    done = _tlsite(
        "run", "--no-browser", "-o", "b", "--", sys.executable, "-c", KILL_ITSELF, cwd=tmp_path
    )
    assert done.returncode == 128 + signal.SIGKILL, done.stderr


def test_run_exits_with_the_code_of_a_command_that_wrote_no_trace(tmp_path: Path) -> None:
    done = _tlsite(
        "run", "--no-browser", "--", sys.executable, "-c", "import sys; sys.exit(5)", cwd=tmp_path
    )
    assert done.returncode == 5, done.stderr
    assert "wrote no trace" in done.stderr


@pytest.mark.slow
def test_ctrl_c_during_run_builds_the_report_and_exits_130(tmp_path: Path) -> None:
    trace_dir = tmp_path / "trace"
    # a job that has written its trace and then runs on until it is interrupted
    job = (
        "import os, shutil, sys, time\n"
        f"shutil.copy({str(EXAMPLE)!r}, os.environ['TORCH_TRACE'])\n"
        "try:\n    time.sleep(60)\n"
        "except KeyboardInterrupt:\n    sys.exit('job: interrupted')\n"
    )
    tlsite = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tlsite",
            "run",
            "--no-browser",
            "--trace-dir",
            str(trace_dir),
            "-o",
            "report",
            "--",
            sys.executable,
            "-c",
            job,
        ],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not any(trace_dir.glob("*.log")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the copy is complete
    tlsite.send_signal(signal.SIGINT)
    out, err = tlsite.communicate(timeout=TIMEOUT_S)
    assert tlsite.returncode == 130, err
    assert "job: interrupted" in err  # Ctrl-C reached the job
    assert "Traceback" not in err
    assert (tmp_path / "report" / "index.html").is_file()
    assert "interrupted" in out and "425 records" in out


# --- point 15: a killed build leaves nothing behind for good ------------------------------

MAKE_TRACE = Path(__file__).resolve().parents[1] / "bench" / "make_trace.py"


def _leftovers(out_parent: Path, tmp: Path) -> list[str]:
    beside = [p.name for p in out_parent.iterdir() if p.name.startswith(".")]
    return beside + [p.name for p in tmp.iterdir() if p.name.startswith("tlsite-")]


@pytest.mark.slow
def test_sigterm_during_a_build_removes_its_staging_folder_and_payload_store(
    tmp_path: Path,
) -> None:
    # big enough (> HIGHLIGHT_AHEAD_MIN_BYTES) for the build to keep a payload store on disk
    trace = tmp_path / "mid.log"
    subprocess.run(
        [sys.executable, str(MAKE_TRACE), "--size", "20MB", "-o", str(trace)],
        check=True,
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    build = subprocess.Popen(
        [sys.executable, "-m", "tlsite", "build", str(trace), "-o", "report", "--no-browser"],
        cwd=tmp_path,
        env=_env(TMPDIR=str(tmp)),
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and build.poll() is None:  # both exist: mid-build
        staging = list(tmp_path.glob(".report*"))
        if staging and list(tmp.glob("tlsite-store*")):
            break
        time.sleep(0.05)
    assert build.poll() is None, "the build ended before it could be interrupted"
    time.sleep(0.3)
    build.send_signal(signal.SIGTERM)
    _, err = build.communicate(timeout=TIMEOUT_S)
    assert build.returncode == 143, err
    assert "Traceback" not in err
    assert _leftovers(tmp_path, tmp) == []
    assert not (tmp_path / "report").exists()


SCRATCH_THEN_SIGTERM = """
import os, signal, sys
from tlsite.core.cleanup import exit_on_sigterm, make_scratch
exit_on_sigterm()
made = make_scratch("store")  # no finally removes it: as if the signal came just after
if os.fork() == 0:  # a child that exits through the interpreter leaves its parent's alone
    sys.exit(0)
os.wait()
print("kept by the child's exit" if made.is_dir() else "removed by the child's exit")
os.kill(os.getpid(), signal.SIGTERM)
"""


def test_a_scratch_folder_no_finally_reached_is_removed_when_the_process_ends(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRATCH_THEN_SIGTERM],
        env=_env(TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 143, done.stderr
    assert done.stdout.strip() == "kept by the child's exit"
    assert [p.name for p in tmp_path.iterdir()] == []


def test_sigterm_while_highlight_workers_start_removes_the_payload_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from tlsite.core.cleanup import Terminated
    from tlsite.core.render.highlight import Highlighter
    from tlsite.core.source import resolve_input
    from tlsite.mkdocs_plugin import pipeline

    def terminated(self: Highlighter) -> None:
        raise Terminated(143)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(pipeline, "HIGHLIGHT_AHEAD_MIN_BYTES", 0)  # the example takes that path
    monkeypatch.setattr(Highlighter, "start", terminated)
    with resolve_input(EXAMPLE) as resolved, pytest.raises(Terminated):
        pipeline._read_log(resolved.logs[0], export_mode=None, on_bytes=len, notes=[])
    assert [p.name for p in tmp_path.iterdir()] == []


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


@pytest.mark.slow
def test_the_next_build_removes_only_tlsites_own_stale_leftovers(tmp_path: Path) -> None:
    import socket

    from tlsite.core.cleanup import MARKER

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead, live, host = _dead_pid(), os.getpid(), socket.gethostname()

    def leftover(folder: Path, owner: str | None) -> Path:
        folder.mkdir()
        (folder / "payloads.pack").write_bytes(b"x" * 1000)
        if owner is not None:
            (folder / MARKER).write_text(owner, encoding="utf-8")
        return folder

    stale = [
        leftover(tmp_path / f".report.tlsite-staging-{dead}-abc", f"{dead} {host}\n"),
        leftover(tmp / f"tlsite-store-{dead}-abc", f"{dead} {host}\n"),
        leftover(tmp / f"tlsite-input-{dead}-abc", f"{dead} {host}\n"),
    ]
    kept = [
        leftover(tmp_path / f".report.tlsite-staging-{live}-abc", f"{live} {host}\n"),
        leftover(tmp / f"tlsite-store-{live}-abc", f"{live} {host}\n"),
        leftover(tmp / f"tlsite-store-{dead}-nomarker", None),  # not known to be tlsite's
        leftover(tmp / f"tlsite-store-{dead}-otherhost", f"{dead} elsewhere\n"),
        leftover(tmp / f"tlsite-store-{dead}-otherpid", f"{live} {host}\n"),
        leftover(tmp / f"mine-{dead}", f"{dead} {host}\n"),  # not named like tlsite's
    ]
    done = _tlsite(
        "build",
        str(EXAMPLE),
        "-o",
        "report",
        "--no-browser",
        cwd=tmp_path,
        env=_env(TMPDIR=str(tmp)),
    )
    assert done.returncode == 0, done.stderr
    assert [p for p in stale if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []
    assert (tmp_path / "report" / "index.html").is_file()
    # and a build leaves nothing of its own behind
    assert sorted(_leftovers(tmp_path, tmp)) == sorted(
        p.name for p in kept if p.name.startswith((".", "tlsite-"))
    )


@pytest.mark.slow
def test_ctrl_c_on_a_terminal_reaches_the_job_once(tmp_path: Path) -> None:
    """On a terminal Ctrl-C goes to tlsite and the job alike: tlsite must not send it again
    (a job that stops on the second Ctrl-C, like torchrun, would be cut short)."""
    trace_dir = tmp_path / "trace"
    job = (
        "import os, shutil, signal, sys, time\n"
        "got = []\n"
        "signal.signal(signal.SIGINT, lambda *_: got.append(1))\n"
        f"shutil.copy({str(EXAMPLE)!r}, os.environ['TORCH_TRACE'])\n"
        "open(os.environ['TORCH_TRACE'] + '/../ready', 'w').close()\n"
        "end = time.monotonic() + 60\n"
        "while not got and time.monotonic() < end: time.sleep(0.02)\n"
        "time.sleep(1)\n"
        "print(f'job: {len(got)} SIGINT')\n"
    )
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(tmp_path)
        argv = [sys.executable, "-m", "tlsite", "run", "--no-browser", "--trace-dir"]
        argv += [str(trace_dir), "-o", "report", "--", sys.executable, "-c", job]
        os.execve(sys.executable, argv, _env(TERM="dumb"))
    out = b""
    deadline = time.monotonic() + TIMEOUT_S
    sent = False
    while time.monotonic() < deadline:
        if not sent and (tmp_path / "ready").exists():
            os.write(fd, b"\x03")  # Ctrl-C, as typed: the terminal signals the foreground group
            sent = True
        try:
            import select

            if select.select([fd], [], [], 0.05)[0]:
                data = os.read(fd, 65536)
                if not data:
                    break
                out += data
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = out.decode(errors="replace")
    assert sent, text
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert "job: 1 SIGINT" in text and "Traceback" not in text
    assert (tmp_path / "report" / "index.html").is_file()


@pytest.mark.slow
def test_hostile_rank_log_names_in_the_multirank_summary_are_escaped(tmp_path: Path) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for name in ("dedicated_log_torch_trace_rank_0_", "dedicated_log_torch_trace_rank_1_", "x"):
        (folder / f"{name}{HOSTILE_FILE}").write_bytes(EXAMPLE.read_bytes())
    code, out = run_on_terminal(
        ["build", "ranks", "-o", "site", "--no-browser", "--bundle", "none"], tmp_path
    )
    assert code == 0, out.decode(errors="replace")
    _no_escape_from_the_name(out)
    text = out.decode()
    assert text.count("[link=evil]click[b]\\x1b[31mred") == 3  # two ranks, one ignored log
    assert "Not rank logs, ignored: xtrace\\x1b]8;;evil" in text


def test_hostile_member_names_in_a_mkdocs_build_error_are_escaped(tmp_path: Path) -> None:
    """The plugin in a user's own MkDocs site: a trace it cannot use is one escaped line."""
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as archive:
        archive.writestr(HOSTILE, "garbage\n")
        archive.writestr("b" + HOSTILE, "garbage\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Notes\n", encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: notes\ntheme:\n  name: material\nplugins:\n"
        "  - tlsite:\n      trace: two.zip\n      prefix: report\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1
    _no_escape_from_the_name(done.stdout + done.stderr)
    assert b"2 logs found" in done.stderr and b"\\x1b]8;;http:" in done.stderr

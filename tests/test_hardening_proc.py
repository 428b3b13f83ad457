"""Issue #20, points 4, 6, 15 and 16: what tlsite prints, publishes, leaves behind and exits
with when the input is hostile or the process is interrupted."""

from __future__ import annotations

import os
import pty
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

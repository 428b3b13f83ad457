"""``tlsite serve`` (a built site over HTTP) and vLLM / ``subgraph_name`` traces.

The server runs as the user runs it: ``python -m tlsite serve DIR`` in a subprocess, on a
free port it prints, stopped with SIGINT (Ctrl-C). The vLLM and regional-Inductor traces are
tlparse 0.4.8's own test inputs, read in place from the shared corpus.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from corpus import CORPUS, PROJECT_ROOT

TLPARSE_048 = CORPUS / "tlparse-0.4.8" / "inputs"
VLLM_SAMPLE = TLPARSE_048 / "vllm_sample.log"
VLLM_PASSES = TLPARSE_048 / "vllm_post_grad_diff.log"
SUBGRAPH_NAME = TLPARSE_048 / "subgraph_name.log"
TIMEOUT_S = 60
QUIET_BUILD = ("--no-browser", "--bundle", "none", "--quiet")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["PYTHONPATH"] = str(PROJECT_ROOT.parent)
    return env


def build_site(trace: Path, out: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "tlsite", "build", str(trace), "-o", str(out), *QUIET_BUILD],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def vllm_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(VLLM_SAMPLE, tmp_path_factory.mktemp("vllm") / "site")


# -- tlsite serve ----------------------------------------------------------------------------


class Server:
    """A ``tlsite serve`` subprocess and the port it printed."""

    def __init__(self, site: Path, *extra: str) -> None:
        self.site = site
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tlsite", "serve", str(site), *extra],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.banner = [self.proc.stdout.readline(), self.proc.stdout.readline()]
        match = re.search(r"http://[^ ]+:(\d+)/", self.banner[0])
        assert match, (self.banner, self.proc.stderr.read() if self.proc.stderr else "")
        self.port = int(match.group(1))

    def get(self, path: str) -> tuple[int, str, bytes]:
        """Status, content type and body of a raw request path (sent as is, not normalised)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path)
            answer = conn.getresponse()
            return answer.status, answer.getheader("Content-Type", ""), answer.read()
        finally:
            conn.close()

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=TIMEOUT_S)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def server(vllm_site: Path, tmp_path: Path) -> Iterator[Server]:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the site\n")
    for link in ("secret_link.txt", "outside_dir"):
        (vllm_site / link).unlink(missing_ok=True)
    (vllm_site / "secret_link.txt").symlink_to(secret)
    (vllm_site / "outside_dir").symlink_to(tmp_path, target_is_directory=True)
    running = Server(vllm_site)
    try:
        yield running
    finally:
        running.kill()
        for link in ("secret_link.txt", "outside_dir"):
            (vllm_site / link).unlink(missing_ok=True)


def test_serve_prints_url_and_tunnel_and_answers_pages(server: Server) -> None:
    assert f"ssh -L {server.port}:localhost:{server.port} " in server.banner[1]
    status, kind, body = server.get("/")
    assert (status, kind) == (200, "text/html"), kind
    assert b"vllm_sample.log" in body
    status, kind, body = server.get("/search/search_index.json")
    assert (status, kind) == (200, "application/json")
    assert body.startswith(b"{")
    scripts = sorted((server.site / "assets" / "tlsite").glob("*.js"))
    assert scripts, "the site has no tlsite scripts to fetch"
    status, kind, _ = server.get(f"/assets/tlsite/{scripts[0].name}")
    assert (status, kind) == (200, "text/javascript")


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/search/%2e%2e/%2e%2e/secret.txt",
        "/search/..%2f..%2fsecret.txt",
        "/secret_link.txt",
        "/outside_dir/secret.txt",
        "/assets/",
    ],
)
def test_serve_refuses_paths_outside_the_site(server: Server, path: str) -> None:
    status, _, body = server.get(path)
    assert status == 404, (path, status)
    assert b"outside the site" not in body


def test_serve_stops_cleanly_on_ctrl_c(server: Server) -> None:
    assert server.get("/index.html")[0] == 200
    code, err = server.interrupt()
    assert code in (0, 130), err
    assert "Traceback" not in err


def test_serve_refuses_a_folder_tlsite_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<p>mine</p>")
    done = subprocess.run(
        [sys.executable, "-m", "tlsite", "serve", str(tmp_path)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a report site tlsite built" in lines[0], done.stderr


def test_serve_warns_when_not_loopback(vllm_site: Path) -> None:
    running = Server(vllm_site, "--host", "0.0.0.0")
    try:
        assert "not loopback" in running.banner[1]
        deadline = time.monotonic() + 10
        while running.get("/index.html")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        running.kill()

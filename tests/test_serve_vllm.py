"""``tlsite serve`` (a built site over HTTP) and vLLM / ``subgraph_name`` traces.

The server runs as the user runs it: ``python -m tlsite serve DIR`` in a subprocess, on a
free port it prints, stopped with SIGINT (Ctrl-C). The vLLM and regional-Inductor traces are
tlparse 0.4.8's own test inputs, read in place from the shared corpus.
"""

from __future__ import annotations

import hashlib
import html
import http.client
import json
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


def _as_at_a_terminal() -> None:
    """In the child before it runs: Ctrl-C's signal handled as at a terminal, whatever the
    test runner's process was left with (a process started in the background of a shell
    without job control inherits SIGINT ignored, and ``tlsite serve`` could not be stopped)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def _signals(pid: int) -> str:
    """The child's signal masks from /proc (for a failure's message)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return ""
    return " ".join(line for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt")))


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
            preexec_fn=_as_at_a_terminal,
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
        masks = _signals(self.proc.pid)
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"tlsite serve ignored Ctrl-C; its signals: {masks}") from exc
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


SERVE = ("--no-browser", "--bundle", "none", "--serve", "--port", "0")


def test_build_then_serve(tmp_path: Path) -> None:
    out = tmp_path / "site"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tlsite", "build", str(SUBGRAPH_NAME), "-o", str(out), *SERVE],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_at_a_terminal,
    )
    try:
        assert proc.stdout is not None
        port = None
        for line in proc.stdout:
            match = re.search(r"Serving the report at http://127\.0\.0\.1:(\d+)/", line)
            if match:
                port = int(match.group(1))
                break
        assert port is not None
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/compile_ids.html")
        answer = conn.getresponse()
        assert answer.status == 200 and b"repeated_subgraph0" in answer.read()
        conn.close()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT_S)
        assert proc.returncode in (0, 130) and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# -- vLLM and subgraph_name traces ---------------------------------------------------------


def main_text(path: Path) -> str:
    """The article only (no navigation), as text."""
    markup = path.read_text(encoding="utf-8")
    start = markup.index('<article class="md-content__inner')
    body = markup[start : markup.index("</article>", start)]
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))
    return re.sub(r"\( ", "(", re.sub(r" ([,.;:)])", r"\1", text))


@pytest.fixture(scope="module")
def passes_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(VLLM_PASSES, tmp_path_factory.mktemp("passes") / "site")


@pytest.fixture(scope="module")
def subgraph_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(SUBGRAPH_NAME, tmp_path_factory.mktemp("subgraph") / "site")


def test_vllm_page_lists_config_and_subgraphs_by_range_and_size(vllm_site: Path) -> None:
    text = main_text(vllm_site / "vllm.html")
    assert "meta-llama/Llama-3.1-8B" in text
    assert "cudagraph_mode FULL_AND_PIECEWISE" in text
    assert "compile_sizes 8, 4" in text
    assert "4 piecewise compiles logged, of 2 subgraphs, in 2 compile ranges or sizes" in text
    assert "vLLM reported 33 subgraphs to compile for each" in text
    ranged, sized = text.split("Compile range [1, 16384]")[1].split("Compile size 8")
    assert "submod_0 0 no vllm_submod_0, inductor_post_grad_graph" in ranged
    assert "submod_2 1 no vllm_submod_2, inductor_post_grad_graph" in ranged
    assert "submod_0 0 yes none" in sized and "submod_2 1 yes none" in sized
    assert "vllm_piecewise_split_graph (2)" in text
    markup = (vllm_site / "vllm.html").read_text(encoding="utf-8")
    for href in re.findall(r'href="([^"#]+)(?:#artifact-\d+)?"', markup):
        if href.endswith((".html", ".json", ".txt")) and not href.startswith(("http", "..")):
            assert (vllm_site / href).is_file(), href


def test_vllm_page_is_linked_and_the_ordinary_report_stays(vllm_site: Path) -> None:
    overview = main_text(vllm_site / "index.html")
    assert "vLLM 1 compile call, 4 piecewise compiles" in overview
    assert 'href="vllm.html"' in (vllm_site / "index.html").read_text(encoding="utf-8")
    assert "[0/0]" in main_text(vllm_site / "compile_ids.html")
    assert (vllm_site / "-_0_0_0" / "index.html").is_file()


def test_vllm_pass_diff_against_the_graph_before(passes_site: Path) -> None:
    text = main_text(passes_site / "vllm.html")
    fusion = text.split("Diff of FusionPass")[1].split("1. ReshapePass")[0]
    assert "--- before_post_grad_graph +++ vllm_post_grad.0.FusionPass" in fusion
    assert "- a = torch.sin(x)" in fusion
    assert "+ fused_sincos = torch.ops.fused_sincos(x)" in fusion
    reshape = text.split("Diff of ReshapePass")[1]
    assert "--- vllm_post_grad.0.FusionPass +++ vllm_post_grad.1.ReshapePass" in reshape
    assert "+ y = fused_sincos.reshape(-1)" in reshape
    assert "torch.sin" not in reshape  # against the previous pass, not the first graph
    assert (
        "0. FusionPass: vllm_post_grad.0.FusionPass (raw) against before_post_grad_graph: "
        "2 lines added, 3 removed." in text
    )


@pytest.mark.parametrize("trace", [VLLM_SAMPLE, VLLM_PASSES, SUBGRAPH_NAME], ids=lambda p: p.stem)
def test_parse_health_lists_no_vllm_type_without_a_view(
    trace: Path, vllm_site: Path, passes_site: Path, subgraph_site: Path
) -> None:
    site = {VLLM_SAMPLE: vllm_site, VLLM_PASSES: passes_site, SUBGRAPH_NAME: subgraph_site}[trace]
    text = main_text(site / "health.html")
    assert "Event types without a special view" not in text
    assert "no special view" not in text


def test_subgraph_names_shown_on_compile_ids_and_compile_page(subgraph_site: Path) -> None:
    ids = main_text(subgraph_site / "compile_ids.html")
    assert ids.index("dynamo_output_graph") < ids.index("Subgraph Name: repeated_subgraph0")
    first = ids.split("Subgraph Name: repeated_subgraph0")[1]
    group, second = first.split("Subgraph Name: partitioned_bw_subgraph_1_0")
    assert "fx_graph_runnable" in group and "fx_graph_runnable" in second
    unit = main_text(subgraph_site / "-_0_0_0" / "index.html")
    assert "Subgraphs (regional Inductor) repeated_subgraph0, partitioned_bw_subgraph_1_0" in unit
    assert "fx_graph_runnable (subgraph repeated_subgraph0) (1)" in unit
    assert "fx_graph_runnable (subgraph partitioned_bw_subgraph_1_0) (2)" in unit
    assert not (subgraph_site / "vllm.html").exists()


def _record(line: int, envelope: dict, payload: str) -> str:
    """A glog header line with ``envelope`` and its payload, the MD5 as torch computes it."""
    envelope = {**envelope, "has_payload": hashlib.md5(payload.encode()).hexdigest()}
    body = "".join(f"\t{text}\n" for text in payload.split("\n"))
    return (
        f"V0127 17:17:45.{line:06d} 1175001 vllm/backends.py:{line}] {json.dumps(envelope)}\n{body}"
    )


def test_vllm_compile_event_and_a_second_compile_call(tmp_path: Path) -> None:
    """vLLM logs ``vllm_compile_event`` before each model's config (no corpus trace has one:
    this log is written here, in vLLM's record shapes); a second config starts a second call,
    and the pass baseline does not carry over to it."""
    from tlsite.core import load
    from tlsite.core.analysis.vllm import compile_calls

    ids = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    lines = []
    for call, (event, model) in enumerate([("fresh_compile", "a/b"), ("aot_cache_hit", "c/d")]):
        art = {"encoding": "json"}
        lines.append(
            _record(
                10 * call + 1,
                {"artifact": {"name": "vllm_compile_event", **art}, **ids},
                json.dumps({"type": event}),
            )
        )
        lines.append(
            _record(
                10 * call + 2,
                {"artifact": {"name": "vllm_compilation_config", **art}, **ids},
                json.dumps({"model": model, "mode": "3"}),
            )
        )
        lines.append(
            _record(
                10 * call + 3,
                {"graph_dump": {"name": f"vllm_post_grad.0.Pass{call}"}, **ids},
                f"def forward(self, x):\n    return x * {call}",
            )
        )
    log = tmp_path / "vllm_events.log"
    log.write_text("".join(lines))
    trace = load(log)
    try:
        calls = compile_calls(trace)
        assert [(c.event_type, (c.config or {}).get("model")) for c in calls] == [
            ("fresh_compile", "a/b"),
            ("aot_cache_hit", "c/d"),
        ]
        second = calls[1].passes[0]
        assert second.before is None  # not the first call's pass graph
        assert "+    return x * 1" in second.diff
        assert trace.stats.unknown_events == {}
    finally:
        trace.close()


def _event_handler_attributes(markup: str) -> list[str]:
    """``on…`` attributes of the page's elements (escaped text inside values is no element)."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.extend(f"{tag}.{name}" for name, _ in attrs if name.startswith("on"))

    Parser().feed(markup)
    return found


@pytest.mark.slow
def test_vllm_page_escapes_trace_text(tmp_path: Path) -> None:
    hostile = '<img src=x onerror="alert(1)"> {: onclick=alert(2) } [x](javascript:alert(3))'
    ids = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    art = {"encoding": "json"}
    log = tmp_path / "hostile.log"
    log.write_text(
        _record(
            1,
            {"artifact": {"name": "vllm_compilation_config", **art}, **ids},
            json.dumps({"model": hostile, hostile: hostile}),
        )
        + _record(
            2,
            {"artifact": {"name": "vllm_piecewise_compile_start", **art}},
            json.dumps({"piecewise_index": 0, "submod_name": hostile, "is_single_size": True}),
        )
    )
    site = build_site(log, tmp_path / "site")
    markup = (site / "vllm.html").read_text(encoding="utf-8")
    assert "<img" not in markup
    assert not _event_handler_attributes(markup)
    assert 'href="javascript' not in markup
    assert main_text(site / "vllm.html").count('<img src=x onerror="alert(1)">') >= 3

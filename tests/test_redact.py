"""Redaction: the patterns, the stream transform (lines kept, MD5s recomputed) and whole builds.

The end-to-end checks grep every file of a redacted site and every member of its bundle for
the original home path, so an output that bypassed the redacted stream would be caught.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections import Counter
from pathlib import Path

import py7zr
import pytest
from corpus import TLPARSE_INPUTS, TORCH_213, trace_lines

from tlsite.cli import build, main
from tlsite.core import load, load_source, resolve_input, select_log
from tlsite.core.redact import Redactor, drop_source_text, redacted_source

SIMPLE_213 = next(TORCH_213.glob("simple/*.log"))


def redact(text: str, **options: object) -> str:
    redactor = Redactor(home=None, **options)  # type: ignore[arg-type]
    return redactor.redact_bytes(text.encode()).decode()


# -- patterns ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/home/alice/proj/train.py", "~/proj/train.py"),
        ('"/Users/bob"', '"~"'),
        ("cd /root/x && ls /rootfs", "cd ~/x && ls /rootfs"),
        ("/mnt/home/carol/x.py", "/mnt/home/USER/x.py"),
        (r"C:\Users\dave\x.py", r"~\x.py"),
        (r'{"f": "C:\\Users\\dave\\x.py"}', r'{"f": "~\\x.py"}'),
        ("C:/Users/eve/x.py", "~/x.py"),
        ("/tmp/torchinductor_frank/ab/c.py", "/tmp/torchinductor_USER/ab/c.py"),
        ("torchinductor_worker_logpath: ''", "torchinductor_worker_logpath: ''"),
        ("/usr/lib/python3.11/os.py", "/usr/lib/python3.11/os.py"),
    ],
)
def test_home_and_user_prefixes(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_this_machines_home_and_extra_prefixes() -> None:
    redactor = Redactor(home="/data/people/alice", prefixes=["/opt/corp/secret/"])
    text = b"/data/people/alice/x.py /data/people/alice2/y /opt/corp/secret/m.py /opt/corp/secrets"
    assert redactor.redact_bytes(text) == (
        b"~/x.py /data/people/alice2/y REDACTED/m.py /opt/corp/secrets"
    )


def test_code_mode_drops_user_source_but_keeps_library_lines() -> None:
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/home/u/train.py", line 5, in step',
            "    loss = secret_loss(y)",
            "           ^^^^^^^^^^^^^^",
            '  File "/venv/lib/python3.11/site-packages/torch/nn/module.py", line 9, in f',
            "    return forward_call(*args)",
            "        # File: /home/u/model.py:15 in forward, code: x = self.secret(x)",
            "        # File: /venv/site-packages/torch/nn/linear.py:3 in forward, code: F.linear",
        ]
    )
    counts: Counter[str] = Counter()
    raw = drop_source_text(text, counts, escaped=False)
    assert "secret" not in raw
    assert "forward_call(*args)" in raw and "code: F.linear" in raw
    assert raw.count("\n") == text.count("\n"), "raw text keeps its lines"
    escaped = drop_source_text(json.dumps(text), Counter(), escaped=True)
    assert "secret" not in escaped
    assert "forward_call(*args)" in json.loads(escaped)
    assert counts == {"traceback": 1, "graph_code": 1}


# -- the stream ----------------------------------------------------------------------------------
def _redacted(path: Path, redactor: Redactor, chunk: int = 1 << 20) -> bytes:
    def chunks():
        with open(path, "rb") as stream:
            while data := stream.read(chunk):
                yield data

    return b"".join(redactor.redact_chunks(chunks()))


def test_lines_are_kept_and_chunking_does_not_matter() -> None:
    original = SIMPLE_213.read_bytes()
    whole = _redacted(SIMPLE_213, Redactor(mode="code"))
    assert whole.count(b"\n") == original.count(b"\n")
    assert b"/home/user" not in whole
    assert _redacted(SIMPLE_213, Redactor(mode="code"), chunk=997) == whole


@pytest.mark.parametrize(
    "log",
    [SIMPLE_213, TLPARSE_INPUTS / "simple_corrupted_json.log", TLPARSE_INPUTS / "export.log"],
    ids=lambda p: p.name,
)
@pytest.mark.parametrize("mode", ["paths", "code"])
def test_rewritten_payloads_get_their_new_md5(log: Path, mode: str) -> None:
    """No MD5 mismatch is caused by redaction; one that was in the trace stays."""
    original = load(log)
    redactor = Redactor(mode=mode)
    with resolve_input(log) as resolved:
        trace = load_source(redacted_source(select_log(resolved, None, log), redactor))
    assert redactor.stats.total > 0
    assert trace.stats.findings == original.stats.findings
    assert trace.stats.outcomes == original.stats.outcomes
    assert trace.stats.total_lines == original.stats.total_lines
    original.close()
    trace.close()


def test_a_damaged_payload_keeps_its_declared_md5(tmp_path: Path) -> None:
    good = trace_lines({"artifact": {"name": "a", "encoding": "string"}}, "at /home/al/x.py")
    bad = trace_lines(
        {"artifact": {"name": "b", "encoding": "string"}, "has_payload": "0" * 32},
        "at /home/al/y.py",
    )
    log = tmp_path / "t.log"
    log.write_text(good + bad, encoding="utf-8")
    out = _redacted(log, Redactor()).decode()
    assert "/home/al" not in out
    assert hashlib.md5(b"at ~/x.py").hexdigest() in out
    assert '"has_payload": "' + "0" * 32 in out


# -- whole builds --------------------------------------------------------------------------------
def _all_bytes(site: Path) -> list[tuple[str, bytes]]:
    return [(str(p), p.read_bytes()) for p in site.rglob("*") if p.is_file()]


def test_redacted_build_has_no_home_path_anywhere(tmp_path: Path) -> None:
    assert b"/home/user/" in SIMPLE_213.read_bytes()
    out = tmp_path / "site"
    outcome = build(str(SIMPLE_213), out, bundle="zip", redactor=Redactor(mode="paths"))
    files = _all_bytes(out)
    assert len(files) > 20
    leaks = [name for name, data in files if b"/home/user" in data]
    assert leaks == []
    assert outcome.bundle is not None
    with zipfile.ZipFile(outcome.bundle) as archive:
        members = archive.namelist()
        assert any(name.endswith("/raw.log") for name in members)
        leaks = [n for n in members if b"/home/user" in archive.read(n)]
        manifest = json.loads(archive.read("site/manifest.json"))
    assert leaks == []
    assert manifest["redaction"]["mode"] == "paths"
    assert manifest["redaction"]["replacements"]["home"] > 0
    raw_log = (out / "raw.log").read_bytes()
    assert b"~/examples/simple.py" in raw_log
    overview = (out / "index.html").read_text(encoding="utf-8")
    assert "This report was redacted" in overview
    assert "still reveals" in overview
    health = (out / "health.html").read_text(encoding="utf-8")
    assert "every payload matched its MD5" in health  # no mismatch caused by the rewriting


@pytest.mark.slow
def test_redact_code_drops_user_source_lines(tmp_path: Path) -> None:
    user_line = b"x = torch.relu(self.fc1(x))"  # examples/simple.py, quoted in graph comments
    assert user_line in SIMPLE_213.read_bytes()
    out = tmp_path / "site"
    build(str(SIMPLE_213), out, bundle="7z", redactor=Redactor(mode="code"))
    leaks = [name for name, data in _all_bytes(out) if user_line in data or b"/home/user" in data]
    assert leaks == []
    with py7zr.SevenZipFile(out.with_name("site.7z")) as archive:
        archive.extractall(tmp_path / "unpacked")
    assert [n for n, d in _all_bytes(tmp_path / "unpacked") if user_line in d] == []
    graph = b"".join(data for name, data in _all_bytes(out) if "dynamo_output_graph" in name)
    assert b"# File: ~/examples/simple.py:15 in forward\n" in graph
    assert "source text of user code was dropped" in (out / "index.html").read_text("utf-8")


def test_cli_redact_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = TLPARSE_INPUTS / "simple.log"
    out = tmp_path / "site"
    # --redact with no mode before the trace: the trace is not taken for the mode
    code = main(["build", "--redact", str(log), "-o", str(out), "--no-browser", "--quiet"])
    assert code == 0
    assert not [n for n, d in _all_bytes(out) if b"/home/xmfan" in d]
    assert main(["build", str(log), "--redact=everything", "-o", str(out)]) == 2
    assert main(["build", str(log), "--redact-prefix", "/x", "-o", str(out)]) == 2
    assert "needs --redact" in capsys.readouterr().err

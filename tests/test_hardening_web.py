"""Issue #20, points 1, 2 and 5: what a report's files allow, wherever the report is built.

1. Every HTML page of every kind of site tlsite makes or makes possible (a single report, a
   multi-rank landing page and its ranks, an export report, provenance pages, the tlparse-style
   pages, ``404.html``, a report embedded in a user's MkDocs site, and the ``tlsite markdown``
   tree built by plain ``mkdocs build``) carries a Content-Security-Policy whose scripts exclude
   ``'unsafe-inline'``.
2. Trace text never reaches a Markdown extension as syntax: a payload line ``--8<-- "file"``
   does not paste a local file into a ``tlsite markdown`` tree built with ``pymdownx.snippets``.
5. A name from the trace that Windows reserves for a device (``CON``, ``nul.txt``, ``COM1.x``)
   never becomes a file name in the site or its zip.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path, PurePosixPath

from corpus import trace_lines

from tlsite.cli import build

CID = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}


# -- 5. Windows device names --------------------------------------------------------------------
WINDOWS_DEVICE = re.compile(r"(?i)(CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])([. ].*)?")
DEVICE_NAMES = ["CON", "nul.txt", "Com1.tar", "aux.", "LPT9 ", "prn.x.y", "NUL..", "coM0"]


def not_windows_safe(path: str) -> list[str]:
    """The components of ``path`` Windows could not create (device names, trailing dot/space)."""
    return [
        part
        for part in PurePosixPath(path).parts
        if WINDOWS_DEVICE.fullmatch(part) or part.endswith((".", " "))
    ]


def device_name_trace() -> str:
    records = [trace_lines({"dynamo_start": {"stack": []}, **CID})]
    for n, name in enumerate(DEVICE_NAMES):
        records += [
            trace_lines({"artifact": {"name": name, "encoding": "string"}, **CID}, f"art {n}"),
            trace_lines(
                {"artifact": {"name": name, "encoding": "json"}, **CID}, json.dumps({"n": n})
            ),
            trace_lines({"graph_dump": {"name": name}, **CID}, f"graph {n}"),
            trace_lines({"dump_file": {"name": name}, **CID}, f"dump {n}"),
            trace_lines({"optimize_ddp_split_child": {"name": name}, **CID}, f"ddp {n}"),
            trace_lines({name: {}, **CID}, f"event {n}"),
        ]
    return "".join(records)


def test_windows_device_names_from_the_trace_become_no_file(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    log.write_text(device_name_trace(), encoding="utf-8")
    outcome = build(str(log), tmp_path / "site")
    files = [p.relative_to(outcome.site).as_posix() for p in outcome.site.rglob("*")]
    assert [f for f in files if not_windows_safe(f)] == []
    # every name still got its own file (nothing was dropped to avoid the device name)
    unit = outcome.site / "-_0_0_0"
    for n in range(len(DEVICE_NAMES)):
        assert any(
            f"dump {n}" in p.read_text(encoding="utf-8")
            for p in unit.parent.rglob("dump_file/*.html")
        )
        assert any(p.read_text(encoding="utf-8") == f"art {n}" for p in unit.glob("*.txt"))
    assert outcome.bundle is not None
    with zipfile.ZipFile(outcome.bundle) as bundle:
        assert [m for m in bundle.namelist() if not_windows_safe(m)] == []

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

import html as html_lib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import pytest
import yaml
from corpus import PROJECT_ROOT, TLPARSE_INPUTS, trace_lines

from tlsite.cli import build, example_trace
from tlsite.core.render.escape import WORD_JOINER, fence
from tlsite.mkdocs_plugin.csp import inline_scripts, sha256_source

if TYPE_CHECKING:
    from browser import SiteOpener

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


@pytest.mark.slow
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
    assert pages_without_policy(outcome.site) == []  # the dump_file/*.html pages too
    assert outcome.bundle is not None
    with zipfile.ZipFile(outcome.bundle) as bundle:
        assert [m for m in bundle.namelist() if not_windows_safe(m)] == []


# -- 1. a Content-Security-Policy on every page -------------------------------------------------
EMBED_PROJECT = PROJECT_ROOT / "tests" / "fixtures" / "embed_project"
_CSP = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">')


def run(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m <command>``, as a user would run ``mkdocs build`` or ``tlsite markdown``."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", *command], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def script_sources(html: str) -> list[str] | None:
    """The sources scripts may come from under the page's policy (None: the page has none).

    ``default-src`` governs scripts when there is no ``script-src``.
    """
    match = _CSP.search(html)
    if match is None:
        return None
    directives = {
        name: values
        for name, *values in (part.split() for part in match.group(1).split(";") if part.strip())
    }
    return directives.get("script-src", directives.get("default-src", []))


def pages_without_policy(site: Path) -> list[str]:
    """Every HTML file of ``site`` with no CSP, a CSP that allows inline script, or an inline
    script it does not allow (the theme would break); the policy must come before any script.
    """
    bad = []
    pages = sorted(site.rglob("*.html"))
    assert pages, f"no pages in {site}"
    for page in pages:
        html = page.read_text(encoding="utf-8", errors="replace")
        sources = script_sources(html)
        name = page.relative_to(site).as_posix()
        if sources is None:
            bad.append(f"{name}: no policy")
        elif {"'unsafe-inline'", "*", "data:", "'unsafe-eval'"} & set(sources):
            bad.append(f"{name}: {sources}")
        elif "<script" in html[: _CSP.search(html).start()]:
            bad.append(f"{name}: a script before the policy")
        elif any(sha256_source(body) not in sources for body in inline_scripts(html)):
            bad.append(f"{name}: an inline script the policy refuses")
    return bad


@pytest.mark.slow
@pytest.mark.parametrize(
    "trace",
    [
        "comp_metrics.log",  # the tlparse-style pages (compilation_metrics_N.html, ...)
        "multi_rank_logs",  # landing page, 404.html, and every rank's report
        "export.log",
        "inductor_provenance_jit_log.txt",
    ],
)
def test_every_page_of_a_built_site_has_the_policy(trace: str, tmp_path: Path) -> None:
    outcome = build(str(TLPARSE_INPUTS / trace), tmp_path / "site", make_zip=False)
    assert (outcome.site / "404.html").is_file()
    assert pages_without_policy(outcome.site) == []


@pytest.mark.slow
def test_a_report_embedded_in_a_users_site_has_the_policy(tmp_path: Path) -> None:
    """The user's theme has no tlsite override: the plugin still gives the report's pages
    (and the tlparse-style pages) the policy. The user's own pages are theirs."""
    project = tmp_path / "project"
    config = yaml.safe_load((EMBED_PROJECT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["plugins"][1]["tlsite"]["trace"] = str(TLPARSE_INPUTS / "comp_metrics.log")
    project.mkdir()
    (project / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (project / "docs").symlink_to(EMBED_PROJECT / "docs")
    run("mkdocs", "build", "-d", str(tmp_path / "site"), cwd=project)
    report = tmp_path / "site" / "report"
    assert (report / "index.html").is_file()
    assert list(report.rglob("compilation_metrics_*.html"))
    assert pages_without_policy(report) == []


@pytest.mark.slow
def test_the_markdown_tree_built_by_plain_mkdocs_has_the_policy(tmp_path: Path) -> None:
    """No tlsite code runs in ``mkdocs build`` of the tree: its own override carries the
    policy, for pages at every depth and for ``404.html``."""
    out = tmp_path / "md"
    run("tlsite", "markdown", str(example_trace()), "-o", str(out), cwd=tmp_path)
    run("mkdocs", "build", "-f", str(out / "mkdocs.yml"), cwd=tmp_path)
    site = out / "site"
    assert (site / "404.html").is_file() and (site / "-_0_0_0" / "index.html").is_file()
    assert pages_without_policy(site) == []


# -- 2. no Markdown extension syntax from the trace ---------------------------------------------
SECRET = "TLSITE-SECRET-7f3c9a"  # what the local file holds; it must never reach the site
SNIPPET_LINES = [
    '--8<-- "secret.txt"',  # pastes the file
    "--8<--",  # the block form: the lines up to the next marker are files to paste
    "secret.txt",
    "--8<--",
    "keep = 1  # --8<-- [start:cut]",  # a section marker: snippets drops the line
    "{++ inserted ++} {>> a critic comment <<}",  # CriticMarkup
]
PAYLOAD = "\n".join(["before", *SNIPPET_LINES, "after"])
EXTENSIONS = [
    {"pymdownx.snippets": {"base_path": ["SECRETS"], "check_paths": False}},
    "pymdownx.critic",
    "footnotes",
    "abbr",
    "def_list",
    "pymdownx.blocks.admonition",
]


def snippet_trace() -> str:
    """The snippet lines in every place a trace string reaches a tree page: artifact code, a
    graph-break reason, a failure reason (a fence inside an admonition), a metrics value (an
    HTML table) and an artifact's name (inline text)."""
    gb = (
        f"Graph break in user code at /x/m.py:7\nGraph Break Reason: {PAYLOAD}\n"
        "User code traceback:\n  x"
    )
    metrics = {
        "co_name": "f", "co_filename": "/x/m.py", "co_firstlineno": 1,
        "fail_type": "RuntimeError", "fail_reason": PAYLOAD, "restart_reasons": [PAYLOAD],
        "note": PAYLOAD, "dynamo_cumulative_compile_time_us": 10,
    }  # fmt: skip
    return "".join(
        [
            trace_lines({"dynamo_start": {"stack": []}, **CID}),
            trace_lines({"artifact": {"name": "payload", "encoding": "string"}, **CID}, PAYLOAD),
            trace_lines(
                {"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, **CID},
                gb,
            ),
            trace_lines(
                {"artifact": {"name": " ".join(SNIPPET_LINES), "encoding": "string"}, **CID}, "x"
            ),
            trace_lines({"compilation_metrics": metrics, **CID}),
        ]
    )


def shown_text(html: str) -> str:
    """A page's text as a person reads it (tags dropped, entities decoded, no WORD JOINER)."""
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html)).replace("\u2060", "")


def with_extensions(config_file: Path, secrets: Path) -> None:
    """Add :data:`EXTENSIONS` to a MkDocs configuration, snippets reading from ``secrets``."""
    config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    extensions = json.loads(json.dumps(EXTENSIONS).replace("SECRETS", str(secrets)))
    config["markdown_extensions"] = [*(config.get("markdown_extensions") or []), *extensions]
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")


def crafted_inputs(root: Path) -> tuple[Path, Path]:
    """The trace of :func:`snippet_trace` and a folder holding the file it names."""
    secrets = root / "secrets"
    secrets.mkdir()
    (secrets / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    log = root / "trace.log"
    log.write_text(snippet_trace(), encoding="utf-8")
    return log, secrets


@pytest.fixture(scope="module")
def snippet_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tlsite markdown`` of the trace, built by ``mkdocs build`` with the extensions."""
    root = tmp_path_factory.mktemp("snippets")
    log, secrets = crafted_inputs(root)
    out = root / "md"
    run("tlsite", "markdown", str(log), "-o", str(out), cwd=root)
    with_extensions(out / "mkdocs.yml", secrets)
    run("mkdocs", "build", "-f", str(out / "mkdocs.yml"), cwd=root)
    return out / "site"


def assert_no_syntax_reached(site: Path, unit_page: Path) -> None:
    """No file pasted, no CriticMarkup, and every line shown as it was logged."""
    leaked = [p for p in site.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []
    pages = {p: p.read_text(encoding="utf-8") for p in site.rglob("*.html")}
    assert [p for p, html in pages.items() if 'class="critic' in html] == []
    unit = shown_text(pages[unit_page])
    for line in SNIPPET_LINES:
        assert line in unit
    for page in ("graph_breaks.html", "failures.html"):
        assert SNIPPET_LINES[0] in shown_text(pages[unit_page.parent.parent / page]), page


@pytest.mark.slow
def test_trace_text_is_no_markdown_extension_syntax_in_the_tree(snippet_tree: Path) -> None:
    assert_no_syntax_reached(snippet_tree, snippet_tree / "-_0_0_0" / "index.html")


@pytest.mark.slow
def test_trace_text_is_no_markdown_extension_syntax_in_an_embedding_site(tmp_path: Path) -> None:
    """The plugin in a user's site with the extensions: its pages go through them too."""
    log, secrets = crafted_inputs(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    config = yaml.safe_load((EMBED_PROJECT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["plugins"][1]["tlsite"]["trace"] = str(log)
    (project / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with_extensions(project / "mkdocs.yml", secrets)
    (project / "docs").symlink_to(EMBED_PROJECT / "docs")
    run("mkdocs", "build", "-d", str(tmp_path / "site"), cwd=project)
    site = tmp_path / "site"
    assert_no_syntax_reached(site, site / "report" / "-_0_0_0" / "index.html")


@pytest.mark.browser
@pytest.mark.slow
def test_code_copies_as_it_was_logged(snippet_tree: Path, open_site: SiteOpener) -> None:
    """The invisible word joiners stay out of the clipboard (Material's copy button), and
    the theme's scripts run under the tree's own policy (the button is made by script)."""
    page, report = open_site(snippet_tree / "failures.html")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    button = page.locator("button.md-code__button[data-md-type='copy']").first
    button.wait_for(state="visible", timeout=10_000)
    button.click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == PAYLOAD
    assert report.console_errors == [] and report.dialogs == []


#: A line of each syntax a Markdown preprocessor or a page plugin acts on, even in fenced code.
PREPROCESSOR_LINES = {
    "snippet": re.compile(r"^[ \t]*;*-+8<-+([ \t]+[\"'].*[\"'])?$|-+8<-+[ \t]+\[[ \t]*(start|end)"),
    "critic": re.compile(r"\{(\+\+|--|~~|==|>>)"),
    "markdown-include": re.compile(r"\{!.*!\}"),
    "template tag (mkdocs-macros, include-markdown)": re.compile(r"\{[{%#]"),
}
FENCED = [
    '--8<-- "secret.txt"', "  ;--8<-- 'a.md'", "--8<--", "-8<- [start:x]", "x # ---8<--- [end:x]",
    "{++ a ++}", "{--b--}", "{~~a~>b~~}", "{==c==}", "{>>d<<}", "{!../secret.txt!}",
    "{{ config.extra }}", '{% include "secret.txt" %}', "{# x #}", "{{{x}}}", "d = {1: {2: 3}}",
]  # fmt: skip


def test_fenced_trace_text_has_no_preprocessor_syntax() -> None:
    text = "\n".join(FENCED)
    fenced = str(fence(text, "python"))
    found = {
        name: [line for line in fenced.split("\n") if pattern.search(line)]
        for name, pattern in PREPROCESSOR_LINES.items()
    }
    assert found == {name: [] for name in PREPROCESSOR_LINES}
    assert fenced.replace(WORD_JOINER, "") == f"```python\n{text}\n```"  # shown unchanged

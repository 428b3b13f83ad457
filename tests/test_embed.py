"""A report inside someone else's MkDocs site, and the Markdown export.

``tests/fixtures/embed_project`` is the example the README shows: an existing project with its
own pages and nav that adds ``- tlsite: {trace: ..., prefix: report}``. Its ``mkdocs build``
(and ``properdocs build``, the maintained MkDocs 1.6 fork) must hold both its own pages and the
report's, in the site and in the search index, with every local link of the report working.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml
from corpus import PROJECT_ROOT, TLPARSE_INPUTS

from tlsite.cli import example_trace

PROJECT = PROJECT_ROOT / "tests" / "fixtures" / "embed_project"
TIMEOUT_S = 240
_LINK = re.compile(r'(?:href|src)="([^"#?]*)[^"]*"')


def run(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def broken_links(site: Path, page: Path) -> list[str]:
    """Local links and sources of ``page`` that name no file of the built site."""
    broken = []
    for href in _LINK.findall(page.read_text(encoding="utf-8")):
        if not href or re.match(r"^[a-z][a-z0-9+.-]*:", href):
            continue
        target = (page.parent / unquote(href)).resolve()
        if href.endswith("/") or target.is_dir():
            target = target / "index.html"
        if not target.is_file() or site.resolve() not in target.parents:
            broken.append(href)
    return broken


def search_locations(site: Path) -> set[str]:
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    return {doc["location"].split("#")[0] for doc in index["docs"]}


def search_text(site: Path) -> str:
    return (site / "search" / "search_index.json").read_text(encoding="utf-8")


def check_embedded_site(site: Path) -> None:
    """Both the project's pages and the report's, with working links, in site and index."""
    assert (site / "index.html").is_file() and (site / "notes" / "index.html").is_file()
    report = site / "report"
    for name in ("index.html", "graph_breaks.html", "health.html", "-_0_0_0/index.html"):
        assert (report / name).is_file(), name
    # the tlparse-compatible files, under the prefix
    for name in ("raw.jsonl", "raw.log", "compile_directory.json", "chromium_events.json"):
        assert (report / name).stat().st_size > 0, name
    directory = json.loads((report / "compile_directory.json").read_text(encoding="utf-8"))
    for entries in directory.values():
        for artifact in entries["artifacts"]:
            if artifact["url"] and "://" not in artifact["url"]:
                assert (report / artifact["url"]).stat().st_size >= 0
    # the project's own page links into the report
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="report/index.html"' in home and "Trace report" in home
    assert broken_links(site, site / "index.html") == []
    # every local link of every report page (raw-HTML stack-trie links included)
    pages = [p for p in report.rglob("*.html") if p.name != "404.html"]
    assert len(pages) > 10
    broken = {str(p.relative_to(site)): b for p in pages if (b := broken_links(site, p))}
    assert broken == {}
    overview = (report / "index.html").read_text(encoding="utf-8")
    assert 'class="trie' in overview and 'href="-_0_0_0/index.html"' in overview
    assert "assets/tlsite/tlsite.js" in overview
    locations = search_locations(site)
    assert {"", "notes/"} <= locations
    assert {"report/index.html", "report/graph_breaks.html", "report/-_0_0_0/index.html"} <= (
        locations
    )
    text = search_text(site)
    assert "quokka" in text  # the project's own page
    assert "Parse health" in text  # the report's


@pytest.mark.slow
def test_mkdocs_build_of_a_project_with_the_plugin(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = run("mkdocs", "build", "--strict", "-f", str(PROJECT / "mkdocs.yml"), "-d", str(site),
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    check_embedded_site(site)
    # the project's nav first, then one section holding the report's nav
    notes = (site / "notes" / "index.html").read_text(encoding="utf-8")
    assert notes.index("Notes") < notes.index("Trace report")


@pytest.mark.slow
def test_properdocs_build_of_a_project_with_the_plugin(tmp_path: Path) -> None:
    if importlib.util.find_spec("properdocs") is None:
        pytest.skip("properdocs is not installed (pip install properdocs, or the test extra)")
    site = tmp_path / "site"
    done = run("properdocs", "build", "--strict", "-f", str(PROJECT / "mkdocs.yml"),
               "-d", str(site), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    check_embedded_site(site)


@pytest.mark.slow
def test_project_without_a_nav_gets_one_report_section(tmp_path: Path) -> None:
    """MkDocs would list every report page; the plugin lists the report's own nav instead."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT / "docs", project / "docs")
    config = yaml.safe_load((PROJECT / "mkdocs.yml").read_text(encoding="utf-8"))
    del config["nav"]
    config["plugins"][1]["tlsite"].update(trace=str(TLPARSE_INPUTS / "simple.log"), redact="paths")
    config["use_directory_urls"] = False
    (project / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    site = tmp_path / "site"
    done = run("mkdocs", "build", "--strict", "-d", str(site), cwd=project)
    assert done.returncode == 0, done.stderr
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Trace report" in home and 'href="notes.html"' in home
    assert "-_0_0_0/index.html" not in home  # compile-id pages stay out of the nav
    report = site / "report"
    assert (report / "index.html").is_file() and (report / "raw.log").is_file()
    assert [p for p in site.rglob("*") if p.is_file() and b"/home/xmfan" in p.read_bytes()] == []
    assert "This report was redacted" in (report / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_markdown_export_builds_with_mkdocs(tmp_path: Path) -> None:
    out = tmp_path / "md"
    done = run("tlsite", "markdown", str(example_trace()), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    docs = out / "docs"
    unit = (docs / "-_0_0_0" / "index.md").read_text(encoding="utf-8")
    assert "```" in unit and "tlsite-code" not in unit  # code blocks are fences again
    assert (docs / "assets" / "tlsite" / "tlsite.js").is_file()
    assert (docs / "compile_directory.json").is_file() and (docs / "raw.log").is_file()
    config = yaml.safe_load((out / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs" and config["nav"][0] == {"Overview": "index.md"}
    done = run("mkdocs", "build", "--strict", "-f", str(out / "mkdocs.yml"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    site = out / "site"
    assert (site / "-_0_0_0" / "index.html").is_file()
    assert broken_links(site, site / "index.html") == []
    done = run("tlsite", "markdown", str(example_trace()), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 2  # exists, no --overwrite


def test_readme_shows_the_tested_example() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    fixture = (PROJECT / "mkdocs.yml").read_text(encoding="utf-8")
    block = re.search(r"(?s)```yaml\n(# An existing MkDocs project.*?)```", readme)
    assert block is not None, "the README's embedding example is missing"
    assert block.group(1) == fixture
    assert "tlsite markdown" in readme and "tlsite publish" in readme and "tlsite run" in readme

"""What a small build does and does not spend its time on, and that its site stays whole
(issue #19, "typical 1-5 MB traces").

A small build is mostly fixed costs: imports, MkDocs and Material start-up, compiling the
theme's templates, the zip. The cuts here leave the site and bundle a user gets as they were:
every theme file a page loads is copied (and none it never loads), the search is configured
as Material configures English search, the zip holds every file of the site (the copies of
the input included), and the index lists the trace's compile ids. No test measures time
(``bench/ab_build.py`` does); these check what was cut: the job and diff modules are not
imported for one trace, and a later build loads Material's templates compiled.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jinja2
import pytest
from corpus import tlparse_input
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.theme import Theme

from tlsite import cli
from tlsite.mkdocs_plugin.site_config import SEARCH_SEPARATOR, THEME_DIR, unread_theme_files

EXAMPLE = cli.example_trace()
SIMPLE = tlparse_input("simple.log")
PROJECT_PARENT = Path(cli.__file__).resolve().parent.parent
_COMPILE_ID = re.compile(r'"frame_id": (\d+), "frame_compile_id": (\d+), "attempt": (\d+)')


@pytest.fixture(scope="module", params=[EXAMPLE, SIMPLE], ids=["example", "simple"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace's site, built as ``tlsite build`` builds it, with its zip beside it."""
    trace: Path = request.param
    if not trace.is_file():
        pytest.skip(f"{trace} is not there")
    out = tmp_path_factory.mktemp(trace.stem) / "site"
    outcome = cli.build(str(trace), out)
    assert outcome.bundle == out.with_suffix(".zip")
    return out


def _site_files(site: Path) -> set[str]:
    return {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}


def _theme() -> Theme:
    return Theme(name="material", custom_dir=str(THEME_DIR), language="en")


def _mkdocs_theme_files(site: Path) -> set[str]:
    """The theme files MkDocs itself would copy into ``site`` (its own listing and filter,
    a plain Jinja loader), less those a report never loads."""
    theme = _theme()
    config = MkDocsConfig()
    config.load_dict({"site_name": "x", "site_dir": str(site), "theme": {"name": "material"}})
    config["theme"] = theme
    files = Files([])
    files.add_files_from_theme(
        jinja2.Environment(loader=jinja2.FileSystemLoader(theme.dirs)), config
    )
    uris = [f.src_uri for f in files]
    return set(uris) - set(unread_theme_files(uris, ["en"]))


def _every_theme_file() -> set[str]:
    """Every file in the theme's folders, hidden folders included."""
    found = set()
    for root in _theme().dirs:
        for folder, _, names in os.walk(root):
            rel = os.path.relpath(folder, root).replace(os.sep, "/")
            found.update(name if rel == "." else f"{rel}/{name}" for name in names)
    return found


class _Links(HTMLParser):
    """The local files a page loads or links to (``src`` and ``href``)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value:
                parts = urlsplit(value)
                if not parts.scheme and not parts.netloc and parts.path:
                    self.urls.append(unquote(parts.path))


def test_the_site_holds_the_theme_files_mkdocs_copies_less_those_no_page_loads(
    built: Path,
) -> None:
    files = _site_files(built)
    expected = _mkdocs_theme_files(built)
    assert any(name.startswith("assets/javascripts/bundle.") for name in expected)
    assert expected <= files
    # no other file of the theme: not its icons, source maps or lunr's language files
    assert (files & _every_theme_file()) - expected <= {"404.html", "sitemap.xml"}


def test_every_file_a_page_loads_or_links_to_is_in_the_site(built: Path) -> None:
    files = _site_files(built)
    missing = set()
    for page in built.rglob("*.html"):
        links = _Links()
        links.feed(page.read_text(encoding="utf-8"))
        for url in links.urls:
            target = (page.parent / url).resolve()
            if target == built.resolve() or target.is_dir():
                continue
            if target.relative_to(built.resolve()).as_posix() not in files:
                missing.add((page.relative_to(built).as_posix(), url))
    assert missing == set()


def test_search_is_configured_as_materials_english_search(built: Path) -> None:
    """Given explicitly (so the search plugin looks nothing up), the language and pipeline
    are what Material's English translation says."""
    theme = _theme()
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(theme.dirs))
    english = env.get_template("partials/languages/en.html").module
    config = json.loads((built / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert config["config"]["lang"] == [english.t("search.config.lang")]
    assert config["config"]["pipeline"] == [english.t("search.config.pipeline")]
    assert config["config"]["separator"] == SEARCH_SEPARATOR
    assert config["docs"]


def test_the_zip_holds_every_file_of_the_site_the_copies_of_the_input_included(
    built: Path,
) -> None:
    with zipfile.ZipFile(built.with_suffix(".zip")) as bundle:
        zipped = {name.split("/", 1)[1]: bundle.read(name) for name in bundle.namelist()}
    assert set(zipped) == _site_files(built)
    assert {"raw.log", "raw.jsonl", "index.html"} <= set(zipped)
    for name, data in zipped.items():
        assert data == (built / name).read_bytes(), name
    manifest = json.loads(zipped["manifest.json"])
    assert "left_out_of_zip" not in manifest
    assert {entry["path"] for entry in manifest["files"]} == set(zipped) - {"manifest.json"}


def test_the_index_lists_every_compile_id_of_the_trace(built: Path) -> None:
    log = Path((built / "raw.log").resolve())
    ids = {
        f"[{f}/{c}]" if a == "0" else f"[{f}/{c}_{a}]"
        for f, c, a in _COMPILE_ID.findall(log.read_text(encoding="utf-8"))
    }
    assert ids
    text = html.unescape(re.sub(r"<[^>]+>", " ", (built / "index.html").read_text("utf-8")))
    assert {i for i in ids if i not in text} == set()


def _run_build(script: str, trace: Path, out: Path, env: dict[str, str]) -> list[str]:
    """Run ``tlsite build`` in a fresh interpreter after ``script``; its printed lines."""
    code = textwrap.dedent(script) + textwrap.dedent(
        f"""
        from tlsite import cli
        cli.main(["build", {str(trace)!r}, "-o", {str(out)!r}, "--overwrite",
                  "--no-browser", "--quiet", "--no-zip"])
        report()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": str(PROJECT_PARENT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.mark.slow
def test_a_build_of_one_trace_imports_no_job_or_diff_module(tmp_path: Path) -> None:
    lines = _run_build(
        """
        import sys
        def report():
            for name in sorted(sys.modules):
                print(name)
        """,
        EXAMPLE,
        tmp_path / "site",
        dict(os.environ),
    )
    assert "tlsite.mkdocs_plugin.plugin" in lines  # it did build
    unneeded = {
        "tlsite.mkdocs_plugin.multirank_build",
        "tlsite.core.multirank",
        "tlsite.mkdocs_plugin.diff_build",
        "tlsite.core.analysis.diff",
        "tlsite.core.analysis.divergence",
        "webbrowser",
    }
    assert unneeded & set(lines) == set()


@pytest.mark.slow
def test_a_later_build_loads_the_themes_templates_compiled(tmp_path: Path) -> None:
    """Jinja's bytecode cache (a private folder of the temp directory) holds Material's
    compiled templates after the first build, as it holds tlsite's own."""
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    script = """
        import jinja2
        compiled = []
        plain = jinja2.Environment.compile
        def compile(self, source, name=None, *args, **kwargs):
            compiled.append(name)
            return plain(self, source, name, *args, **kwargs)
        jinja2.Environment.compile = compile
        def report():
            for name in compiled:
                print(name)
        """
    first = _run_build(script, EXAMPLE, tmp_path / "first", env)
    later = _run_build(script, EXAMPLE, tmp_path / "later", env)
    assert {"base.html", "main.html", "404.html"} <= set(first)
    # what is left is the few partials the page policy renders on its own (mkdocs_plugin/csp.py)
    assert [name for name in later if not name.startswith("partials/javascripts/")] == []
    pages = ("index.html", "-_0_0_0/index.html")
    for page in pages:
        assert (tmp_path / "first" / page).read_bytes() == (tmp_path / "later" / page).read_bytes()

"""Fixed costs of a small build cut without changing what it writes (issue #19, ``small2``).

MkDocs is handed the configuration as options instead of YAML it parses again, the config
page writes its thousands of setting cells inline instead of through a macro call each, and
the CLI's build runs without garbage collection over what the imports made. Each test checks
that what a user gets is the same: the configuration MkDocs builds with, the config page's
Markdown, and the collector a process that builds again (the tests themselves) is left with.
No test measures time (``bench/ab_build.py`` does).
"""

from __future__ import annotations

import gc
import io
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2
import pytest
import yaml
from corpus import TORCH_213, TRAINING_TRACE_GLOB
from mkdocs.config import load_config
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.theme import Theme

import tlsite.core as core
from tlsite import cli
from tlsite.core.render.pages import ReportRenderer
from tlsite.core.render.templating import macro, render_markdown
from tlsite.mkdocs_plugin import csp, pipeline, site_config

#: Trace text a config value can hold that the cells must show as the macro did.
ODD_VALUES = ["a\r\nb", "{{ x }} {% y %}", "<script>alert(1)</script>", "`x` | *y* & 'z'", ""]


def _training() -> Path:
    found = sorted(TORCH_213.glob(TRAINING_TRACE_GLOB))
    if not found:
        pytest.skip(f"no training trace in {TORCH_213}")
    return found[0]


def _options(cfg: MkDocsConfig) -> dict[str, Any]:
    """What MkDocs builds with, comparable: the theme and plugins by their settings."""
    options = dict(cfg)
    theme = options.pop("theme")
    options["theme"] = (theme.name, list(theme.dirs), dict(theme.items()))
    plugins = options.pop("plugins")
    options["plugins"] = {name: dict(plugin.config) for name, plugin in plugins.items()}
    return options


def test_mkdocs_builds_with_the_configuration_the_same_mapping_gives_as_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build_site`` gives MkDocs the mapping of ``site_config`` as options; every option,
    the theme's and plugins' settings included, is what its ``mkdocs.yml`` would give."""
    docs = tmp_path / "docs"
    docs.mkdir()
    nav = [{"Overview": "index.md"}, {"Rank 0 & <1>": [{"x: y": "rank_0/index.md"}]}]
    name = "tlsite: <b>trace</b> & 'on: yes' #1"
    config = site_config.site_config(
        docs_dir=str(docs), site_dir=str(tmp_path / "site"), site_name=name, nav=nav
    )
    built: list[MkDocsConfig] = []
    monkeypatch.setattr("mkdocs.commands.build.build", built.append)
    site_config.build_site(config, config_dir=str(tmp_path))
    from_yaml = load_config(
        config_file=io.StringIO(yaml.safe_dump(config)),
        config_file_path=str(tmp_path / "mkdocs.yml"),
    )
    given = _options(built[0])
    assert given["site_name"] == name and given["nav"] == nav
    # build_site adds its own plugins after the configuration is read
    assert set(given["plugins"]) - set(_options(from_yaml)["plugins"]) == {"tlsite_site"}
    given["plugins"].pop("tlsite_site")
    assert given == _options(from_yaml)


def _code_cells(markdown: str) -> list[str]:
    return re.findall(r"<tr><td><code>.*?</code></td>\n<td><code>.*?</code></td></tr>", markdown)


def test_the_config_page_shows_each_setting_as_the_code_macro_writes_it() -> None:
    """A real trace's settings, and values holding line breaks, HTML, Jinja and Markdown
    syntax, each in the cells the macro wrote (inline now: thousands of cells)."""
    path = str(_training())
    with core.resolve_input(path) as resolved:
        trace = core.load_source(core.select_log(resolved, None, path))
    renderer = ReportRenderer(trace)
    rows = renderer.config.baseline_rows()
    odd = [(f"odd.{n}", value) for n, value in enumerate(ODD_VALUES)]
    rows.append(("odd", "Odd", odd))
    markdown = render_markdown(
        "config.md",
        config=SimpleNamespace(functorch_from_artifact=False, units_with_config=1),
        rows=rows,
        differing=[],
        differing_count=0,
        unit_path=renderer.unit_path,
        function_of=renderer.function_of,
    )
    code = macro("_macros.md", "code")
    expected = [
        f"<tr><td>{code(key)}</td>\n<td>{code(value)}</td></tr>"
        for _, _, settings in rows
        for key, value in settings
    ]
    assert len(expected) > 100  # the trace's thousands of settings, and the odd ones
    assert _code_cells(markdown) == expected
    assert "&lt;script&gt;" in markdown and "<script>" not in markdown


def test_the_cli_build_leaves_the_garbage_collector_as_it_found_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """During the build the collector runs, with what existed before it frozen; after it
    (a process that builds again, as the tests do), nothing stays frozen, and a collector
    the caller had turned off stays off."""
    seen: list[tuple[bool, int]] = []

    def build(path: str, out: Path, **options: Any) -> str:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return "built"

    monkeypatch.setattr(pipeline, "build", build)
    assert cli.build("trace.log", Path("site")) == "built"
    assert seen[0][0] and seen[0][1] > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        cli.build("trace.log", Path("site"))
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()


def _rendered_scripts(template: jinja2.Template, context: dict[str, Any]) -> list[str]:
    try:
        return csp.inline_scripts(template.render(**context))
    except jinja2.TemplateError:
        return []  # needs more than the context: not trusted


def test_the_theme_scripts_trusted_at_each_depth_are_those_a_fresh_environment_renders() -> None:
    """Material's script partials, loaded once for every base URL, give each depth the inline
    scripts (their storage scope names the base URL) that rendering them anew gives."""
    theme = Theme(name="material", custom_dir=str(site_config.THEME_DIR), language="en")
    dirs = tuple(str(d) for d in theme.dirs)
    features = tuple(site_config.FEATURES)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(list(dirs)))
    names = {path.name for d in dirs for path in (Path(d) / csp._PARTIALS).glob("*.html")}
    partials = [env.get_template(f"{csp._PARTIALS}/{name}") for name in sorted(names)]
    assert len(partials) > 3
    found = []
    for base_url in (".", "..", "../.."):
        context = {"config": {"extra": {}}, "base_url": base_url, "features": features}
        fresh = {script for t in partials for script in _rendered_scripts(t, context)}
        found.append(csp._trusted(dirs, base_url, None, features))
        assert found[-1] == fresh
    assert len(set(found)) == 3  # the scope differs with the depth

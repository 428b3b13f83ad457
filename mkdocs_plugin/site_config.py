"""MkDocs configuration for an offline tlsite report, and an in-process build.

The report must work when opened from ``file://`` with no network, so the configuration only uses
stock Material features that render at build time, turns web fonts off, and vendors the one
script Material would otherwise fetch from a CDN (the Web-Worker shim search needs on file://).
The mapping is plain data, so the same settings can also be written out as ``mkdocs.yml`` and
built by ``mkdocs build`` or a compatible tool.
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import functools
import io
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2

import tlsite.themes

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.plugins import BasePlugin
    from mkdocs.structure.files import Files

#: Material's ``custom_dir`` with tlsite's CSS, JavaScript, shim and template override.
THEME_DIR = Path(tlsite.themes.__file__).resolve().parent / "material"

#: Word separators of the search index (Material's default is ``[\s\-]+``).
SEARCH_SEPARATOR = r"[\s\-\[\]\(\),:;]+"

#: The search plugin's settings (``lang`` and ``pipeline`` are Material's for English).
SEARCH_CONFIG = {"lang": ["en"], "separator": SEARCH_SEPARATOR, "pipeline": ["stopWordFilter"]}

#: Site-relative URLs of the theme assets (MkDocs copies custom_dir files into the site).
ASSET_DIR = "assets/tlsite"
WORKER_SHIM = f"{ASSET_DIR}/iframe-worker-shim.js"
EXTRA_CSS = f"{ASSET_DIR}/tlsite.css"
EXTRA_JS = f"{ASSET_DIR}/tlsite.js"
#: Adds matches in the pages' code (``CODE_INDEX``) to Material's search results; the tlsite
#: plugin adds it to the polyfills of the sites it builds a report into.
SEARCH_CODE_JS = f"{ASSET_DIR}/search-code.js"
#: Paints the page chrome's icons (:data:`CHROME_ICONS`): written into each site of its own.
ICON_CSS = f"{ASSET_DIR}/icons.css"
#: The theme's folder of tlsite's empty ``<svg>`` icons (``THEME_DIR``-relative).
ICON_DIR = ".icons/tlsite"
CODE_INDEX = "search/code_index.js"

#: Material's files that a report never loads: source maps (only a browser's developer tools
#: fetch them, and a report is read, not debugged) and the search's language files (lunr
#: stemmers, ``wordcut.js``, ``tinyseg.js``), which its worker loads only for other languages
#: than English. Site-relative patterns (``fnmatch``).
SOURCE_MAPS = ("assets/javascripts/*.map", "assets/stylesheets/*.map")
SEARCH_LANGUAGE_FILES = ("assets/javascripts/lunr/*",)


def unread_theme_files(uris: Sequence[str], search_languages: Sequence[str]) -> list[str]:
    """The theme files (site-relative URIs) of ``uris`` that a report's pages never load,
    given the languages its search indexes (lunr's files are needed for any but English)."""
    patterns = SOURCE_MAPS
    if list(search_languages) == ["en"]:
        patterns += SEARCH_LANGUAGE_FILES
    return [uri for uri in uris if any(fnmatch.fnmatchcase(uri, p) for p in patterns)]


def drop_unread_theme_files(files: Files, config: MkDocsConfig) -> None:
    """Leave out of a site of its own (a report, a job's landing page, a diff) the theme
    files its pages never load (see :func:`unread_theme_files`): every build copied them and
    every zip carried them. A site that embeds a report keeps its theme whole."""
    search = config.plugins.get("material/search")
    languages = search.config.lang if search is not None else ["en"]
    for uri in unread_theme_files([f.src_uri for f in files], languages or ["en"]):
        files.remove(files.get_file_from_path(uri))


def _tlsite_icon(icon: str) -> str:
    """The name of tlsite's empty ``<svg>`` that shows Material's ``icon`` (``material/x``)."""
    return f"tlsite/{icon.rsplit('/', 1)[1]}"


#: What an icon's SVG keeps unencoded in its data URL (the rest is percent-encoded).
_URL_SAFE = ' "<>=/:;,.-'


@functools.cache  # the same for every site a process builds (a job's ranks)
def icon_stylesheet() -> str:
    """The CSS that paints tlsite's chrome icons: each is Material's SVG file as a mask."""
    from mkdocs.utils import get_theme_dir

    icons = Path(get_theme_dir("material")) / ".icons"
    rules = [
        "/* mkdocs-material's icons of the page chrome, written by tlsite at build time */",
        ".tlsite-icon{background-color:currentcolor;-webkit-mask:no-repeat center/contain;"
        "mask:no-repeat center/contain}",
    ]
    for icon in (*CHROME_ICONS.values(), *TOGGLE_ICONS):
        svg = " ".join((icons / f"{icon}.svg").read_text(encoding="utf-8").split())
        # a quote, backslash, '#' or '%' would end or change the CSS string or the data URL
        url = f"url('data:image/svg+xml;charset=utf-8,{quote(svg, safe=_URL_SAFE)}')"
        name = _tlsite_icon(icon).rsplit("/", 1)[1]
        rules.append(f".tlsite-icon--{name}{{-webkit-mask-image:{url};mask-image:{url}}}")
    return "\n".join(rules) + "\n"


# navigation.prune keeps the nav from being rendered into every page (quadratic size otherwise).
# navigation.instant is left out: it turns itself off on file:// and needs site_url for Pages.
# content.lazy: Material measures each code block it mounts (copy button, scroll overflow), and
# measuring one inside a closed <details> makes Chromium lay the hidden code out; a compile
# page's folded artifacts hold megabytes of code, so blocks are mounted when first seen instead.
FEATURES = [
    "navigation.prune",
    "navigation.sections",
    "navigation.top",
    "navigation.tracking",
    "content.code.copy",
    "content.lazy",
    "search.highlight",
    "search.suggest",
]

# The icons of Material's page chrome (header, search, back-to-top) by theme setting. Material
# writes an icon's SVG path into every page where it shows it, the same in all of them: a
# storm's thousands of compile pages each carried them in the zip. A page shows instead
# tlsite's empty <svg> of the same name (themes/material/.icons/tlsite/), which ICON_CSS
# paints with Material's icon as a CSS mask (as Material draws its admonition icons): the
# paths are in one file a site, read from the installed Material when the site is built.
CHROME_ICONS = {
    "logo": "material/library",
    "menu": "material/menu",
    "search": "material/magnify",
    "previous": "material/arrow-left",
    "close": "material/close",
    "top": "material/arrow-up",
}
#: The palette toggles' icons (light scheme, dark scheme), shown the same way.
TOGGLE_ICONS = ("material/brightness-7", "material/brightness-4")

# A light and a dark scheme with a toggle; the icons are drawn from CSS, so nothing is fetched.
PALETTE = [
    {
        "media": "(prefers-color-scheme: light)",
        "scheme": "default",
        "toggle": {"icon": _tlsite_icon(TOGGLE_ICONS[0]), "name": "Switch to dark mode"},
    },
    {
        "media": "(prefers-color-scheme: dark)",
        "scheme": "slate",
        "toggle": {"icon": _tlsite_icon(TOGGLE_ICONS[1]), "name": "Switch to light mode"},
    },
]

MARKDOWN_EXTENSIONS: list[Any] = [
    "admonition",
    "pymdownx.details",
    "pymdownx.superfences",
    {
        "pymdownx.highlight": {
            # every code line gets id="__codelineno-<block>-<line>", so lines can be linked
            "anchor_linenums": True,
            "line_spans": "__span",
            "pygments_lang_class": True,
            "use_pygments": True,
        }
    },
    "pymdownx.inlinehilite",
    "tables",
    "attr_list",
    "md_in_html",
    {"toc": {"permalink": True}},
    {"pymdownx.tabbed": {"alternate_style": True}},
]

# Generated pages are often reachable only through index tables, not the nav: not an issue.
VALIDATION = {
    "nav": {"omitted_files": "ignore", "not_found": "warn", "absolute_links": "info"},
    "links": {
        "not_found": "warn",
        "anchors": "info",
        "absolute_links": "info",
        "unrecognized_links": "info",
    },
}


def site_config(
    *, docs_dir: str, site_dir: str, site_name: str, nav: list | None = None
) -> dict[str, Any]:
    """Return the MkDocs configuration mapping for an offline report.

    ``docs_dir`` must exist (it may be empty when a plugin generates the pages). With ``nav``
    left as None, MkDocs builds the navigation from the files it finds.
    """
    config: dict[str, Any] = {
        "site_name": site_name,
        "docs_dir": str(Path(docs_dir).resolve()),
        "site_dir": str(Path(site_dir).resolve()),
        # links must name files (page.html), because file:// has no directory index
        "use_directory_urls": False,
        "strict": False,
        "theme": {
            "name": "material",
            "custom_dir": str(THEME_DIR),
            "language": "en",
            "font": False,  # no Google Fonts <link>; system fonts are used instead
            "features": list(FEATURES),
            "palette": [dict(p) for p in PALETTE],
            "icon": {key: _tlsite_icon(icon) for key, icon in CHROME_ICONS.items()},
        },
        # offline writes search/search_index.js so the index loads via <script> on file://
        # compile ids are written "[0/1]": brackets, parentheses, commas and colons separate
        # words, so "0/1" finds them and "file.py:22" or "item()" match their parts
        # lang and pipeline are Material's English defaults: given, the search plugin does not
        # look them up in the theme's translation templates (two more Jinja environments)
        "plugins": [{"search": SEARCH_CONFIG}, "offline"],
        "extra": {
            # the name contains "iframe-worker", so the offline plugin adds no unpkg.com shim
            "polyfills": [WORKER_SHIM],
            "generator": False,  # no "Made with Material" footer link
        },
        "extra_css": [ICON_CSS, EXTRA_CSS],
        "extra_javascript": [EXTRA_JS],
        "markdown_extensions": list(MARKDOWN_EXTENSIONS),
        "validation": VALIDATION,
    }
    if nav is not None:
        config["nav"] = nav
    return config


def build_site(
    config: dict[str, Any],
    *,
    config_dir: str,
    extra_plugins: dict[str, BasePlugin] | None = None,
) -> None:
    """Build the site in this process, as ``mkdocs build`` would.

    ``config_dir`` plays the directory of a (virtual) ``mkdocs.yml``, against which relative
    paths in ``config`` resolve. ``extra_plugins`` maps names to already configured plugin
    instances (the caller has run ``plugin.load_config(...)``), e.g. the page generator. They
    are registered before the build, so their events run like those of configured plugins.
    """
    # Material 9.8 prints an end-of-life banner when its theme module is first imported.
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    # the mapping as options of an empty file: the same configuration as its YAML would give
    # (the plain data of site_config), without writing and parsing it (MkDocs' YAML loader is
    # pure Python); a copy, as YAML gave one, for MkDocs keeps and may change what it is given
    with _themes_listed_once():
        cfg = load_config(
            config_file=io.StringIO("{}"),
            config_file_path=str(Path(config_dir) / "mkdocs.yml"),
            **copy.deepcopy(config),
        )
    for name, plugin in {**(extra_plugins or {}), "tlsite_site": _of_its_own()}.items():
        cfg.plugins[name] = plugin
    # a job builds a site per rank, a few ranks per process: theme work once per process
    cfg.theme.get_env = _theme_env(cfg.theme)  # type: ignore[method-assign]
    # The CLI calls on_startup/on_shutdown around build(); build() itself does not.
    cfg.plugins.on_startup(command="build", dirty=False)
    # MkDocs dates every page with the day of the build, and the sitemap's gzip header carries
    # that date: the same trace built on another day gave another site. A report depends on
    # its trace only (a SOURCE_DATE_EPOCH the user sets still wins).
    pin_date = "SOURCE_DATE_EPOCH" not in os.environ
    if pin_date:
        os.environ["SOURCE_DATE_EPOCH"] = "0"
    try:
        build(cfg)
    finally:
        if pin_date:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        cfg.plugins.on_shutdown()


@functools.cache
def _installed_themes() -> dict[str, Any]:
    """The installed MkDocs themes by name (entry points), as MkDocs lists them."""
    from mkdocs import utils

    return dict(utils.get_themes())


#: Builds in this process now inside :func:`_themes_listed_once` (threads may build at once:
#: the first one in puts the list in MkDocs' place, the last one out puts MkDocs' back).
_THEMES_LISTED = {"builds": 0, "mkdocs": None}
_THEMES_LOCK = threading.Lock()


@contextlib.contextmanager
def _themes_listed_once() -> Iterator[None]:
    """Within: MkDocs finds the installed themes in a list made once per process.

    MkDocs lists them from every installed package's entry points and forgets the list each
    time it loads a theme (``Theme._load_theme_config``), so every site's configuration
    scanned the packages again: a job builds a site per rank and per comparison.
    """
    from mkdocs import utils

    installed = _installed_themes()

    def get_themes() -> dict[str, Any]:
        return dict(installed)

    get_themes.cache_clear = lambda: None  # type: ignore[attr-defined]
    with _THEMES_LOCK:
        if _THEMES_LISTED["builds"] == 0:
            _THEMES_LISTED["mkdocs"] = utils.get_themes
            utils.get_themes = get_themes  # type: ignore[assignment]
        _THEMES_LISTED["builds"] += 1
    try:
        yield
    finally:
        with _THEMES_LOCK:
            _THEMES_LISTED["builds"] -= 1
            if _THEMES_LISTED["builds"] == 0:
                utils.get_themes = _THEMES_LISTED["mkdocs"]  # type: ignore[assignment]


class _ThemeLoader(jinja2.FileSystemLoader):
    """The theme's templates, listed without the files in hidden folders, and each read and
    compiled once per process.

    MkDocs lists every file of the theme to copy the static ones into the site, and leaves
    out those in hidden folders by matching each name against its patterns; Material's
    ``.icons`` folder holds some 14,000 SVG files, which it walked and matched on every build.

    Every build makes a new environment, whose templates (Material's page template and its
    thirty-odd partials) were each found, read, hashed and unmarshalled from the bytecode
    cache again: a job builds a site per rank, several in one process. The compiled code is
    kept by template name for the theme's folders (templates do not change during a build:
    the environments do not reload them), as Jinja's bytecode cache keeps it by name and
    source; each environment still makes its own template objects from it.
    """

    def load(
        self, environment: jinja2.Environment, name: str, globals: Any = None
    ) -> jinja2.Template:
        key = (tuple(self.searchpath), name)
        found = _COMPILED.get(key)
        if found is None:
            source, filename, uptodate = self.get_source(environment, name)
            cache = environment.bytecode_cache
            bucket = cache.get_bucket(environment, name, filename, source) if cache else None
            code = bucket.code if bucket is not None else None
            if code is None:
                code = environment.compile(source, name, filename)
                if cache is not None and bucket is not None:
                    bucket.code = code
                    cache.set_bucket(bucket)
            found = _COMPILED[key] = (code, uptodate)
        code, uptodate = found
        if globals is None:
            globals = {}
        return environment.template_class.from_code(environment, code, globals, uptodate)

    def list_templates(self) -> list[str]:
        found = set()
        for root in self.searchpath:
            for folder, subfolders, files in os.walk(root, followlinks=self.followlinks):
                subfolders[:] = [name for name in subfolders if not name.startswith(".")]
                prefix = os.path.relpath(folder, root).replace(os.sep, "/")
                found.update(name if prefix == "." else f"{prefix}/{name}" for name in files)
        return sorted(found)


#: The theme's compiled templates per (theme folders, name): see :class:`_ThemeLoader`.
_COMPILED: dict[tuple[tuple[str, ...], str], tuple[Any, Any]] = {}
#: The theme's static files per (theme folders, static templates): MkDocs lists them by walking
#: Material's folders (its 14,000 icon files included) in every build.
_THEME_FILES: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
#: The filter ``Files.add_files_from_theme`` lists them with (it depends on the theme only).
_THEME_FILTER = "Files.add_files_from_theme.<locals>.filter"


def _theme_env(theme: Any) -> Any:
    """``theme.get_env`` whose environments list the theme's static files once per process,
    without its hidden folders (:class:`_ThemeLoader`), and load every template compiled
    (:func:`~tlsite.core.render.templating.bytecode_cache`, as tlsite's own templates are;
    Material's search plugin makes an environment of its own to translate two strings)."""
    from tlsite.core.render.templating import bytecode_cache

    make_env = theme.get_env

    def get_env() -> jinja2.Environment:
        env = make_env()
        env.loader = _ThemeLoader(theme.dirs)
        env.bytecode_cache = bytecode_cache()
        key = (tuple(theme.dirs), tuple(sorted(theme.static_templates)))
        list_templates = env.list_templates

        def listing(extensions: Any = None, filter_func: Any = None) -> list[str]:
            if extensions is not None or getattr(filter_func, "__qualname__", "") != _THEME_FILTER:
                return list_templates(extensions, filter_func)
            if key not in _THEME_FILES:
                _THEME_FILES[key] = list_templates(extensions, filter_func)
            return list(_THEME_FILES[key])

        env.list_templates = listing  # type: ignore[method-assign]
        return env

    return get_env


@functools.cache
def _of_its_own() -> BasePlugin:
    """The plugin of every site :func:`build_site` builds: it leaves out the theme files the
    pages never load (the theme's environment is :func:`_theme_env`'s)."""
    from mkdocs.plugins import BasePlugin, event_priority
    from mkdocs.structure.files import File

    class SiteOfItsOwn(BasePlugin):
        # before the other plugins: a site in a job's folder leaves out its theme files (and
        # this one) for the job root's
        @event_priority(50)
        def on_files(self, files: Files, /, *, config: MkDocsConfig) -> Files:
            drop_unread_theme_files(files, config)
            if ICON_CSS in config.extra_css and files.get_file_from_path(ICON_CSS) is None:
                files.append(File.generated(config, ICON_CSS, content=icon_stylesheet()))
            return files

    return SiteOfItsOwn()

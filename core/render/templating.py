"""The Jinja2 environments for every template tlsite renders.

HTML templates are HTML-autoescaped. Markdown templates are *Markdown*-autoescaped: every
``{{ value }}`` that is not marked safe goes through :func:`~tlsite.core.render.escape.md_text`,
so a forgotten filter cannot let trace text become a link, an attribute or raw HTML.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup

from .. import limits as limits_mod
from ..handlers import SYMBOLIC_TYPES
from . import escape, long_tables


def _md_finalize(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (Markup, int, float)):
        return value
    return escape.md_text(value)


@cache
def bytecode_cache() -> jinja2.BytecodeCache:
    """Compiled templates kept between runs (Jinja's per-user folder in the temp directory,
    which it creates private and checks the owner of; entries are keyed by the template's
    source, so an edited template is compiled again): compiling every template a build uses,
    Material's included, is a noticeable part of a small build."""
    return jinja2.FileSystemBytecodeCache()


#: What ``getattr`` finds on a plain dict: every other name is one of its keys or nothing.
_DICT_ATTRIBUTES = frozenset(dir(dict))


class _Environment(jinja2.Environment):
    """Jinja's environment, with ``row.name`` on a plain dict looked up as the key at once.

    Jinja tries ``getattr`` first and the key after its ``AttributeError``; templates read
    most of their values from dicts, and the exception was most of the lookup's cost on a
    page of thousands of rows. A dict's own attributes (``row.items``) still come first.
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


def _environment(**escaping: Any) -> jinja2.Environment:
    """The settings both environments share; ``escaping`` is what sets them apart."""
    env = _Environment(
        loader=jinja2.PackageLoader("tlsite.core.render", "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        bytecode_cache=bytecode_cache(),
        auto_reload=False,  # templates do not change during a build: no stat per use
        **escaping,
    )
    env.globals.update(limits=limits_mod, symbolic_types=SYMBOLIC_TYPES, pieces=long_tables)
    return env


@cache
def environment() -> jinja2.Environment:
    """HTML templates (``*.html``): standard HTML autoescaping."""
    return _environment(autoescape=jinja2.select_autoescape(["html"], default_for_string=False))


@cache
def markdown_environment() -> jinja2.Environment:
    """Markdown templates (``*.md``): values are Markdown-escaped unless marked safe."""
    env = _environment(autoescape=False, finalize=_md_finalize)
    env.filters.update(
        md=escape.md_text,
        code=escape.md_code,
        reason=escape.md_reason,
        reason_html=escape.html_reason,
        words=escape.md_words,
        words_html=escape.html_words,
        h=escape.h,
        fence=escape.fence,
        link=escape.external_link,
        link_html=escape.html_link,
        anchor=escape.anchor_safe,
        url=escape.url_path,
        page_html=_page_html,
        yq=escape.yaml_string,
    )
    return env


def render(template: str, **context: object) -> str:
    return long_tables.cut_long_tables(environment().get_template(template).render(**context))


def render_markdown(template: str, **context: object) -> str:
    return long_tables.cut_long_tables(
        markdown_environment().get_template(template).render(**context)
    )


def macro(template: str, name: str) -> Callable[..., str]:
    """A macro of a Markdown template, to call from Python."""
    return getattr(markdown_environment().get_template(template).module, name)


def html_macro(template: str, name: str) -> Callable[..., str]:
    """A macro of an HTML template, to call from Python (its HTML is marked safe)."""
    return getattr(environment().get_template(template).module, name)


def _page_html(href: str) -> str:
    """The written page of a link to a Markdown page (``x/index.md#a`` → ``x/index.html#a``),
    for links in raw HTML, which MkDocs does not resolve."""
    path, hash_, fragment = href.partition("#")
    if path.endswith(".md"):
        path = path.removesuffix(".md") + ".html"
    return path + hash_ + fragment

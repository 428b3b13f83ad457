"""Escaping for everything taken from a trace, in one place.

Trace text is untrusted: it may carry HTML, script, Markdown links with ``javascript:``,
attribute lists (``{ onclick=... }``), fence-breaking backticks or template syntax. Markdown
templates get these helpers as Jinja filters, and every ``{{ value }}`` that is not already
marked safe goes through :func:`md_text` (see :mod:`tlsite.core.render.templating`).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from urllib.parse import quote, urlsplit

from markupsafe import Markup

# Characters Python-Markdown can backslash-escape (its ESCAPED_CHARS, which include '{' '}'
# for attr_list), plus '|' (tables), and '<' '>' '&' (HTML), which become entities.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>&])")
_BACKTICK_RUN = re.compile(r"`+")
_TILDE_RUN = re.compile(r"~+")
# Syntax that Markdown preprocessors and page plugins find on any line, inside fenced code
# too: a snippet marker (pymdownx.snippets: ``--8<-- "file"`` pastes a local file, and
# ``--8<-- [start:x]`` drops the line), CriticMarkup openers (pymdownx.critic: ``{++``,
# ``{--``, ``{~~``, ``{==``, ``{>>``), markdown-include's ``{!file!}`` and the template tags
# of mkdocs-macros or include-markdown (``{{``, ``{%``, ``{#``). An invisible WORD JOINER
# splits each, so the line shows unchanged (tlsite.js leaves it out of copied text).
_PREPROCESSOR_SYNTAX = re.compile(r"-8(?=<-)|\{(?=\+\+|--|~~|==|>>|[{%#!])")
WORD_JOINER = "\u2060"


def md_text(value: object) -> Markup:
    """Inline text: shown literally, never parsed as Markdown or HTML, on one line."""
    text = str(value).replace("\r", " ").replace("\n", " ")
    escaped = []
    for part in _MD_SPECIAL.split(text):
        if len(part) == 1 and _MD_SPECIAL.fullmatch(part):
            if part == "<":
                escaped.append("&lt;")
            elif part == ">":
                escaped.append("&gt;")
            elif part == "&":
                escaped.append("&amp;")
            elif part == "|":
                escaped.append("&#124;")
            else:
                escaped.append("\\" + part)
        else:
            escaped.append(html.escape(part, quote=False))
    return Markup("".join(escaped))


def md_code(value: object) -> Markup:
    """Inline code-looking text (monospace), escaped like :func:`md_text`."""
    return Markup(f"<code>{md_text(value)}</code>")


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def md_reason(value: object) -> Markup:
    """Prose from torch (a graph-break reason, a failure message), which marks names with
    Markdown-style backtick pairs: each pair becomes inline code, the rest is :func:`md_text`."""
    text = str(value)
    parts, start = [], 0
    for match in _CODE_SPAN.finditer(text):
        parts += [md_text(text[start : match.start()]), md_code(match.group(1))]
        start = match.end()
    parts.append(md_text(text[start:]))
    return Markup("".join(parts))


_WORD_JOIN = re.compile(r"(?<=[a-z])(?=[A-Z])")


def md_words(value: object, escape: Callable[[object], Markup] = md_text) -> Markup:
    """A CamelCase name (``BackendCompilerFailed``) that may wrap between its words on a narrow
    screen, never inside one; each word escaped like :func:`md_text` (or by ``escape``)."""
    joined = "<wbr>".join(escape(part) for part in _WORD_JOIN.split(str(value)))
    return Markup(f'<span class="tlsite-words">{joined}</span>')


def html_words(value: object) -> Markup:
    """:func:`md_words` for a raw HTML block."""
    return md_words(value, h)


def h(value: object) -> Markup:
    """HTML-escape for raw HTML blocks (Markdown leaves their content alone, but
    preprocessors do not: braces become entities, for CriticMarkup and template plugins)."""
    escaped = html.escape(str(value), quote=True)
    return Markup(escaped.replace("{", "&#123;").replace("}", "&#125;"))


def html_reason(value: object) -> Markup:
    """:func:`md_reason` for a raw HTML block: each backtick pair as inline code, the rest
    escaped by :func:`h`, all on one line."""
    text = str(value).replace("\r", " ").replace("\n", " ")
    parts, start = [], 0
    for match in _CODE_SPAN.finditer(text):
        parts += [h(text[start : match.start()]), f"<code>{h(match.group(1))}</code>"]
        start = match.end()
    parts.append(h(text[start:]))
    return Markup("".join(parts))


def html_link(text: object, url: object) -> Markup:
    """:func:`external_link` for a raw HTML block."""
    target = safe_url(url)
    if target is None:
        return Markup(f"{h(text)} (<code>{h(url)}</code>)")
    return Markup(f'<a href="{h(target)}" rel="noopener noreferrer">{h(text)}</a>')


def inert_html(markup: str) -> str:
    """HTML made for the site (inserted after Markdown) put into a Markdown page instead: the
    preprocessors of a user's site must not act on it either (see ``_PREPROCESSOR_SYNTAX``).
    Its text is HTML-escaped (a snippet marker's ``<`` is ``&lt;``); braces become entities,
    which HTML reads as braces in text and attributes alike. (``str`` first: ``Markup``'s
    ``replace`` would escape the entities again.)"""
    return str(markup).replace("{", "&#123;").replace("}", "&#125;")


def fence(text: str, lang: str = "text", *, attrs: str = "") -> Markup:
    """A fenced code block that the content cannot close early, nor turn into a
    preprocessor's syntax (see ``_PREPROCESSOR_SYNTAX``)."""
    text = _PREPROCESSOR_SYNTAX.sub(f"\\g<0>{WORD_JOINER}", text)
    longest = max((len(m) for m in _BACKTICK_RUN.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    lang = re.sub(r"[^A-Za-z0-9_+-]", "", lang) or "text"
    extra = f" {attrs}" if attrs else ""
    head = f"{ticks} {{ .{lang}{extra} }}" if extra else f"{ticks}{lang}"
    return Markup(f"{head}\n{text}\n{ticks}")


def safe_url(url: object) -> str | None:
    """The URL if it is http(s), else None: links from a trace are never script."""
    text = str(url).strip()
    try:
        scheme = urlsplit(text).scheme.lower()
    except ValueError:
        return None
    if scheme in ("http", "https") and not any(c in text for c in "\"'<>\n\r\t "):
        return text
    return None


def external_link(text: object, url: object) -> Markup:
    """A link out of the report for http(s) URLs; other URLs are shown as plain text."""
    target = safe_url(url)
    if target is None:
        return Markup(f"{md_text(text)} ({md_code(url)})")
    return Markup(
        f'<a href="{html.escape(target, quote=True)}" rel="noopener noreferrer">{md_text(text)}</a>'
    )


def anchor_safe(value: object) -> Markup:
    """An id fragment made only of safe characters."""
    return Markup(re.sub(r"[^A-Za-z0-9_-]", "-", str(value)))


def url_path(value: object) -> Markup:
    """A relative link target built by tlsite, percent-encoded where needed."""
    return Markup(quote(str(value), safe="/#._-~+=@,"))


def yaml_string(value: object) -> Markup:
    """A front-matter title: HTML-escaped, as a double-quoted YAML scalar (JSON is valid YAML).

    MkDocs themes print ``page.title`` without escaping (``<title>``, the header, search
    results), so a title built from trace text must already be HTML-safe.
    """
    text = html.escape(str(value).replace("\r", " ").replace("\n", " "), quote=True)
    return Markup(json.dumps(text, ensure_ascii=False))

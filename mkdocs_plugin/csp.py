"""A Content-Security-Policy for every report page, so that no script from a trace can run.

Trace text is escaped before it reaches a page, but a report is opened by people who did not
write the trace, so a second line of defence is worth having: a policy that lets the browser run
only the theme's own scripts. Inline event handlers (``onerror=``), ``javascript:`` URLs and any
``<script>`` that escaping let through are refused by the browser.

MkDocs pages are static, so the policy is a ``<meta http-equiv>`` tag with the SHA-256 of each
*trusted* inline script. Hashing every inline script of the finished page would also trust one
injected from a trace, so the trusted scripts are found independently of the page: they are the
ones Material renders from its ``partials/javascripts/*.html`` templates, rendered again here
with the page's ``base_url``. A script on the page whose text is not one of those gets no hash.

The theme override (``themes/material/main.html``) puts :data:`MARKER` first in ``<head>``,
before any script; :func:`add_csp` replaces it. A report embedded in another site is rendered
by that site's theme, without the marker: its pages get the policy right after ``<head>``.
Other pages without the marker are left unchanged.

Where the plugin does not run (a ``tlsite markdown`` tree built by plain ``mkdocs build``),
:func:`static_policy` is written into the tree's own template override instead.

``'self'`` covers the site's own script files; Chromium matches it for ``file:`` pages too, so
the report still works when opened from disk (the browser tests check this).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mkdocs.utils import get_relative_url, is_error_template

#: What ``main.html`` writes where the policy goes (first in ``<head>``, before any script).
MARKER = "<!--tlsite:csp-->"

#: The parts of the policy that do not depend on the page. Styles stay inline-capable: Material
#: and the report's charts use style attributes, and styles cannot run script.
BASE_POLICY = (
    "default-src 'self'",
    "img-src 'self' data:",
    "style-src 'self' 'unsafe-inline'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
)

_HEAD = re.compile(r"<head\b[^>]*>", re.IGNORECASE)

# Script elements as the HTML parser sees them: the content ends at the first "</script".
_SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.IGNORECASE | re.DOTALL)
_SRC_ATTR = re.compile(r"\ssrc\s*=", re.IGNORECASE)
_TYPE_ATTR = re.compile(r"""\stype\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_SCRIPT_TYPES = ("", "text/javascript", "application/javascript", "module")
_PARTIALS = "partials/javascripts"


def sha256_source(script: str) -> str:
    """The CSP hash source of an inline script's text, e.g. ``'sha256-…='``."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def inline_scripts(html: str) -> list[str]:
    """The text of every inline script the browser would run (no ``src``, a script type)."""
    found = []
    for match in _SCRIPT.finditer(html):
        attrs, body = match.group(1), match.group(2)
        if _SRC_ATTR.search(attrs):
            continue
        kind = _TYPE_ATTR.search(attrs)
        if kind is not None and kind.group(1).lower() not in _SCRIPT_TYPES:
            continue  # data blocks such as <script type="application/json"> never run
        found.append(body)
    return found


#: Material's web fonts, for a site whose theme turns them on (tlsite's own configuration does
#: not): an embedding site's report pages then look like its other pages.
FONT_STYLES = "https://fonts.googleapis.com"
FONT_FILES = "font-src 'self' https://fonts.gstatic.com"


def policy(script_hashes: list[str], *, web_fonts: bool = False) -> str:
    """The full policy: the base directives and ``script-src 'self'`` plus the given hashes
    (with ``web_fonts``, Material's Google Fonts may load too; scripts are unaffected)."""
    script_src = " ".join(["script-src 'self'", *sorted(set(script_hashes))])
    directives = [BASE_POLICY[0], script_src, *BASE_POLICY[1:]]
    if web_fonts:
        directives = [
            f"{d} {FONT_STYLES}" if d.startswith("style-src ") else d for d in directives
        ] + [FONT_FILES]
    return "; ".join(directives)


@functools.cache
def _partials(dirs: tuple[str, ...]) -> list[Any]:
    """Material's ``partials/javascripts`` templates in ``dirs``, loaded once per process
    (compiled, from the cache tlsite's and the theme's templates share) for every
    ``base_url`` they are rendered for; those that do not load are left out."""
    import jinja2

    from tlsite.core.render.templating import bytecode_cache

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(list(dirs)),
        auto_reload=False,
        bytecode_cache=bytecode_cache(),
    )
    names = sorted(
        {
            f"{_PARTIALS}/{path.name}"
            for folder in dirs
            for path in (Path(folder) / _PARTIALS).glob("*.html")
        }
    )
    templates = []
    for name in names:
        try:
            templates.append(env.get_template(name))
        except jinja2.TemplateError:
            continue  # a partial that does not compile is not trusted
    return templates


@functools.lru_cache(maxsize=64)
def _trusted(dirs: tuple[str, ...], base_url: str, scope: str | None, features: tuple) -> frozenset:
    """The inline scripts Material's ``partials/javascripts`` render to for this ``base_url``."""
    import jinja2

    extra = {} if scope is None else {"scope": scope}  # `d(base_url)` needs it undefined
    context = {"config": {"extra": extra}, "base_url": base_url, "features": features}
    bodies: set[str] = set()
    for template in _partials(dirs):
        try:
            rendered = template.render(**context)
        except jinja2.TemplateError:
            continue  # a partial that needs more context than ours is not trusted
        bodies.update(inline_scripts(rendered))
    return frozenset(bodies)


def trusted_scripts(base_url: str, config: Any) -> frozenset:
    """The theme's own inline scripts for a page whose ``base_url`` (in MkDocs' sense) is given."""
    extra = config.get("extra") or {}
    theme = config["theme"]
    return _trusted(
        tuple(str(d) for d in theme.dirs),
        base_url,
        extra.get("scope"),
        tuple(theme.get("features") or ()),
    )


def add_csp(html: str, *, page: Any, config: Any, head: bool = False) -> str:
    """Replace :data:`MARKER` with the page's policy; with ``head``, a page without the marker
    gets it first in ``<head>`` (others are unchanged).

    Only inline scripts that are also rendered by the theme's own templates get a hash.
    """
    return _with_policy(html, get_relative_url(".", page.url), config, head=head)


def add_csp_to_template(html: str, *, template_name: str, config: Any) -> str:
    """:func:`add_csp` for a theme template rendered as a page of its own (``404.html``).

    ``base_url`` is the one the template renders with: for ``404.html``, the site_url's path,
    or ``"."`` without one (tlsite's 404.html makes its links relative then).
    """
    if is_error_template(template_name):
        site_url = config.get("site_url")
        base_url = urlsplit(site_url).path if site_url else "."
    else:
        base_url = get_relative_url(".", template_name)
    return _with_policy(html, base_url, config)


def meta_tag(script_hashes: list[str], *, web_fonts: bool = False) -> str:
    """The ``<meta http-equiv>`` element carrying :func:`policy`."""
    content = policy(script_hashes, web_fonts=web_fonts)
    return f'<meta http-equiv="Content-Security-Policy" content="{content}">'


def static_policy(base_urls: set[str], dirs: tuple[str, ...], features: tuple) -> str:
    """One policy for every page of a site built without tlsite's plugin.

    It trusts the theme's own inline scripts as rendered for each of the pages' ``base_url``
    values (the script that sets Material's storage scope names it), so the same tag can be
    written once into the template override. Trusting the theme's scripts on any page of the
    site lets no trace text run: a trace cannot choose what a hash matches.
    """
    bodies = set().union(*(_trusted(dirs, url, None, features) for url in sorted(base_urls)))
    return meta_tag([sha256_source(body) for body in bodies])


def _with_policy(html: str, base_url: str, config: Any, *, head: bool = False) -> str:
    at, end = html.find(MARKER), 0
    if at >= 0:
        end = at + len(MARKER)
    elif head and (tag := _HEAD.search(html)) is not None:
        at = end = tag.end()
    else:
        return html
    trusted = trusted_scripts(base_url, config)
    hashes = [sha256_source(body) for body in inline_scripts(html) if body in trusted]
    web_fonts = bool(config["theme"].get("font"))
    return html[:at] + meta_tag(hashes, web_fonts=web_fonts) + html[end:]

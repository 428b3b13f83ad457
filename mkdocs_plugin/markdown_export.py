"""``tlsite markdown``: the report as plain files, for people who want the Markdown itself.

The output folder is a ready MkDocs project::

    DIR/mkdocs.yml      the offline configuration tlsite builds with (explicit nav)
    DIR/overrides/      tlsite's template override for Material, with the pages'
                        Content-Security-Policy written in (no tlsite code runs there)
    DIR/docs/           every page as Markdown (code as fenced blocks), the theme's assets
                        under assets/tlsite/, and the tlparse-compatible files (raw artifacts,
                        payloads/, raw.jsonl, ...) the pages link to

so ``mkdocs build -f DIR/mkdocs.yml`` (or ``properdocs build``) builds the same report without
tlsite, and ``DIR/docs`` can be copied into another site's docs folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import version
from pathlib import Path

import yaml
from mkdocs.theme import Theme
from mkdocs.utils import get_relative_url

from tlsite.core import InputError, read_log, resolve_input
from tlsite.core.model import Trace
from tlsite.core.output import MARKDOWN_HEADER, check_replaceable, staging_for, swap_into_place
from tlsite.core.redact import Redactor
from tlsite.core.render.compat import CompatWriter
from tlsite.core.render.pages import render_tree

from .csp import MARKER, static_policy
from .site_config import (
    ASSET_DIR,
    FEATURES,
    ICON_CSS,
    ICON_DIR,
    THEME_DIR,
    icon_stylesheet,
    site_config,
)

DOCS = "docs"
OVERRIDES = "overrides"


def write_markdown_tree(
    trace: Trace,
    out: Path,
    *,
    raw_log: Callable[[], Iterator[bytes]] | None = None,
    site_name: str | None = None,
    inputs: Iterable[str] = (),
) -> list[str]:
    """Write the project for ``trace`` into ``out`` (built in a staging folder, then swapped).

    An existing ``out`` is replaced only when :func:`tlsite.core.output.refusal` allows it
    (``inputs``: the paths the trace was read from). Returns the Markdown pages written,
    relative to ``out/docs``.
    """
    out = out.resolve()
    with staging_for(out, inputs=inputs) as staging:
        built = staging / out.name
        pages = _write(trace, built, raw_log=raw_log, site_name=site_name)
        swap_into_place(built, out)
    return pages


def _write(
    trace: Trace,
    root: Path,
    *,
    raw_log: Callable[[], Iterator[bytes]] | None,
    site_name: str | None,
) -> list[str]:
    docs = root / DOCS
    tree = render_tree(trace)
    trace.store.flush()  # the pages' HTML and code blocks are read back from the store's pack
    written = []
    for page in tree.pages:
        dest = docs / page.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(page.standalone_markdown(), encoding="utf-8")
        written.append(page.path)
    # the pages refer to the theme's scripts and styles at assets/tlsite/ from the docs root
    shutil.copytree(THEME_DIR / ASSET_DIR, docs / ASSET_DIR)
    (docs / ICON_CSS).write_text(icon_stylesheet(), encoding="utf-8")
    overrides = root / OVERRIDES
    overrides.mkdir()
    for template in THEME_DIR.glob("*.html"):
        shutil.copy2(template, overrides / template.name)
    shutil.copytree(THEME_DIR / ICON_DIR, overrides / ICON_DIR)  # the chrome's icons
    _write_policy(overrides / "main.html", [page.path for page in tree.pages])
    CompatWriter(trace, docs, raw_log=raw_log).write_all()
    config = site_config(
        docs_dir=str(docs),
        site_dir=str(root / "site"),
        site_name=site_name or f"tlsite: {trace.source}",
        nav=tree.nav,
    )
    # portable: paths relative to mkdocs.yml, the template override copied beside it
    config["docs_dir"] = DOCS
    config["site_dir"] = "site"
    config["theme"]["custom_dir"] = OVERRIDES
    header = MARKDOWN_HEADER + (
        "# overrides/main.html holds the pages' Content-Security-Policy: it lets only the\n"
        f"# inline scripts of mkdocs-material {version('mkdocs-material')} with these theme "
        "settings run;\n# after changing either, write the tree again.\n"
    )
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
    (root / "mkdocs.yml").write_text(header + text, encoding="utf-8")
    return written


def _write_policy(main: Path, pages: list[str]) -> None:
    """Put the Content-Security-Policy into the tree's own ``main.html`` where the plugin would.

    ``mkdocs build`` of the tree runs no tlsite code, so the tag is written once for every
    page: it trusts the theme's inline scripts as rendered at each page's depth (and at the
    root, for ``404.html``).
    """
    base_urls = {get_relative_url(".", str(Path(path).with_suffix(".html"))) for path in pages}
    base_urls.add(".")
    dirs = tuple(Theme(name="material", custom_dir=str(THEME_DIR)).dirs)
    tag = static_policy(base_urls, dirs, tuple(FEATURES))
    text = main.read_text(encoding="utf-8")
    assert MARKER in text, "the template override lost the policy's place"
    main.write_text(text.replace(MARKER, tag, 1), encoding="utf-8")


def export_markdown(
    path: str,
    out: Path,
    *,
    latest: bool = False,
    rank: int | None = None,
    export_mode: bool | None = None,
    redactor: Redactor | None = None,
) -> list[str]:
    """Read the trace at ``path`` (redacted as it is read with ``redactor``) and write it out.

    Raises :class:`InputError` when no record of it could be read (it is not a trace)."""
    check_replaceable(out, inputs=[path])
    with resolve_input(path, latest=latest) as resolved:
        trace, log = read_log(resolved, path, rank=rank, export_mode=export_mode, redactor=redactor)
        try:
            why = trace.stats.not_a_trace()
            if why is not None:
                raise InputError(f"{path}: {why}")
            return write_markdown_tree(trace, out, raw_log=log.chunks, inputs=[path])
        finally:
            trace.close()

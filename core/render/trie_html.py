"""Render a stack trie as nested lists (the theme's JavaScript makes them collapsible)."""

from __future__ import annotations

from collections.abc import Callable

from markupsafe import Markup

from ..analysis.stack_trie import TrieNode
from ..model import CompileUnit
from .templating import render

#: Compile-id links shown at one trie node before "and N more".
MAX_LINKS_PER_NODE = 40


def trie_html(
    root: TrieNode,
    *,
    status_of: Callable[[CompileUnit], str],
    href_of: Callable[[CompileUnit], str],
) -> Markup:
    """The trie as one raw-HTML block for a Markdown page (no blank lines inside)."""
    html = render(
        "stack_trie.html",
        root=root,
        status_of=status_of,
        href_of=href_of,
        max_links=MAX_LINKS_PER_NODE,
    )
    return Markup("".join(line.strip() for line in html.splitlines()))

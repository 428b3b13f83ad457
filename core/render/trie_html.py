"""Render a stack trie as nested lists (the theme's JavaScript makes them collapsible)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from markupsafe import Markup

from ..analysis.stack_trie import TrieNode
from ..model import CompileUnit
from .templating import render

#: Compile-id links shown at one trie node before "and N more".
MAX_LINKS_PER_NODE = 200

#: Trie levels shown as nested lists (real stacks are a few dozen frames). Browsers stop
#: nesting elements a few hundred levels deep (Chromium's parser at 512), and nobody reads a
#: tree that deep: a node at this depth lists the compile ids of every stack that goes on
#: below it, with a note.
MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class TrieItem:
    """One node to show, or (``node`` None) the end of the list of children it opened."""

    node: TrieNode | None
    units: list[CompileUnit]
    terminals: int = 0
    deeper: int = 0  # frames below this node not shown (the stack went on past MAX_DEPTH)
    opens: bool = False  # its children follow, as a nested list


def trie_items(root: TrieNode, max_depth: int = MAX_DEPTH) -> Iterator[TrieItem]:
    """The trie in document order, without recursion (stacks can be thousands of frames deep
    in a hostile trace): each node, then its children's items, then a closing item."""
    todo: list[tuple[TrieNode | None, int]] = [(c, 1) for c in reversed(root.children.values())]
    while todo:
        node, depth = todo.pop()
        if node is None:
            yield TrieItem(None, [])
            continue
        if node.children and depth >= max_depth:
            units, terminals, deeper = _below(node)
            yield TrieItem(node, units, terminals, deeper)
            continue
        yield TrieItem(node, node.units, node.terminals, opens=bool(node.children))
        if node.children:
            todo.append((None, depth))
            todo.extend((c, depth + 1) for c in reversed(node.children.values()))


def _below(node: TrieNode) -> tuple[list[CompileUnit], int, int]:
    """Compile ids and unknown stacks at ``node`` and below it, and how many levels go on."""
    units: list[CompileUnit] = []
    terminals = deeper = 0
    todo = [(node, 0)]
    while todo:
        current, depth = todo.pop()
        units.extend(current.units)
        terminals += current.terminals
        deeper = max(deeper, depth)
        todo.extend((c, depth + 1) for c in current.children.values())
    return units, terminals, deeper


def trie_html(
    root: TrieNode,
    *,
    status_of: Callable[[CompileUnit], str],
    href_of: Callable[[CompileUnit], str],
    stand_ins: Mapping[int, CompileUnit] | None = None,
) -> Markup:
    """The trie as one raw-HTML block for a Markdown page (no blank lines inside).
    ``stand_ins`` (by ``id(unit)``): whose stack a compile with no stack of its own hangs at."""
    html = render(
        "stack_trie.html",
        items=trie_items(root),
        status_of=status_of,
        href_of=href_of,
        stand_in_of=lambda unit: (stand_ins or {}).get(id(unit)),
        max_links=MAX_LINKS_PER_NODE,
        max_depth=MAX_DEPTH,
    )
    return Markup("".join(line.strip() for line in html.splitlines()))

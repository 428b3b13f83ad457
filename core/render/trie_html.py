"""Render a stack trie as nested lists (the theme's JavaScript makes them collapsible).

A graph-break storm's trie has a level of thousands of nodes (one call site compiling a
thousand functions). While the overview loads, Material's scripts make the browser recompute
the styles of the whole page several times, each time over every node. A level of more than
:data:`PIECE_NODES` nodes is therefore written as lists of :data:`PIECE_NODES` nodes: the
first as before, each further one with ``content-visibility: auto`` (``tlsite.css``), which
the browser skips until it nears the screen. Every node stays in the page, in order, for find
in page and the site search; the +/- toggle of a node hides and shows all of its lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from markupsafe import Markup

from ..analysis.stack_trie import TrieNode, children_first
from ..model import CompileUnit
from .long_tables import LINE_PX
from .templating import render

#: Compile-id links shown at one trie node before "and N more".
MAX_LINKS_PER_NODE = 200

#: Trie levels shown as nested lists (real stacks are a few dozen frames). Browsers stop
#: nesting elements a few hundred levels deep (Chromium's parser at 512), and nobody reads a
#: tree that deep: a node at this depth lists the compile ids of every stack that goes on
#: below it, with a note.
MAX_DEPTH = 64

#: Nodes of each list of a trie level; a level of at most this many nodes is one list.
PIECE_NODES = 100


@dataclass(frozen=True, slots=True)
class TrieItem:
    """One node to show, or (``node`` None) the end of the list of children it opened, or
    (``node`` None, ``piece_px``) the end of a piece of a long level: its next nodes follow
    in a further list."""

    node: TrieNode | None
    units: list[CompileUnit]
    terminals: int = 0
    deeper: int = 0  # frames below this node not shown (the stack went on past MAX_DEPTH)
    opens: bool = False  # its children follow, as a nested list
    piece_px: int = 0  # the next piece's guessed height, until the browser lays it out


def trie_items(root: TrieNode, max_depth: int = MAX_DEPTH) -> Iterator[TrieItem]:
    """The trie in document order, without recursion (stacks can be thousands of frames deep
    in a hostile trace): each node, then its children's items, then a closing item; a level
    of more than :data:`PIECE_NODES` nodes has a piece item before each further piece."""
    lines: dict[int, int] = {}  # id(node) -> lines its subtree takes, once a level is cut
    todo: list[tuple[TrieNode | None, int, int]] = []  # node or None (an end), depth, px

    def push_level(parent: TrieNode, depth: int) -> None:
        children = list(parent.children.values())
        for start in range(len(children) - 1, -1, -1):
            todo.append((children[start], depth, 0))
            if start and start % PIECE_NODES == 0:
                if not lines:
                    lines.update(_subtree_lines(root))
                piece = children[start : start + PIECE_NODES]
                todo.append((None, depth, LINE_PX * sum(lines[id(c)] for c in piece)))

    push_level(root, 1)
    while todo:
        node, depth, piece_px = todo.pop()
        if node is None:
            yield TrieItem(None, [], piece_px=piece_px)
            continue
        if node.children and depth >= max_depth:
            units, terminals, deeper = _below(node)
            yield TrieItem(node, units, terminals, deeper)
            continue
        yield TrieItem(node, node.units, node.terminals, opens=bool(node.children))
        if node.children:
            todo.append((None, depth, 0))
            push_level(node, depth + 1)


def _subtree_lines(root: TrieNode) -> dict[int, int]:
    """Lines each node's subtree takes on the page (by ``id``): a line per node and per
    source line shown under it; a guess, for the height of a piece not yet laid out."""
    lines: dict[int, int] = {}
    for node in children_first(root):
        own = 1 + (node.frame is not None and bool(node.frame.loc))
        lines[id(node)] = own + sum(lines[id(c)] for c in node.children.values())
    return lines


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

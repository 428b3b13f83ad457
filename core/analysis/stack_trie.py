"""The stack trie: where in user code each compile was triggered.

Stacks of ``dynamo_start`` records share prefixes; the trie shows each shared prefix once,
with compile ids at the node where their stack ends (tlparse's "Stack trie").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..frames import Frame
from ..model import CompileUnit


@dataclass
class TrieNode:
    frame: Frame | None
    children: dict[Frame, TrieNode] = field(default_factory=dict)
    units: list[CompileUnit] = field(default_factory=list)
    terminals: int = 0  # stacks ending here without a compile id (unknown stacks)
    compiles: int = 0  # compile-id links at this node and below (what a collapsed node holds)
    stacks: int = 0  # unknown stacks ending at this node and below

    def child(self, frame: Frame) -> TrieNode:
        node = self.children.get(frame)
        if node is None:
            node = self.children[frame] = TrieNode(frame)
        return node


def build_trie(stacks: list[tuple[list[Frame], CompileUnit | None]]) -> TrieNode:
    """Insert each stack (outermost frame first); mark where it ends."""
    root = TrieNode(None)
    for frames, unit in stacks:
        node = root
        for frame in frames:
            node = node.child(frame)
        if unit is None:
            node.terminals += 1
        else:
            node.units.append(unit)
    _count(root)
    return root


def _count(root: TrieNode) -> None:
    """Fill in ``compiles`` and ``stacks`` of every node (children before parents; a loop,
    not recursion: stacks can be deeper than Python's recursion limit)."""
    order: list[TrieNode] = []
    todo = [root]
    while todo:
        node = todo.pop()
        order.append(node)
        todo.extend(node.children.values())
    for node in reversed(order):
        node.compiles = len(node.units) + sum(c.compiles for c in node.children.values())
        node.stacks = node.terminals + sum(c.stacks for c in node.children.values())


def compile_trie(units: list[CompileUnit]) -> TrieNode:
    return build_trie([(stack, unit) for unit in units for stack in unit.stacks])


def unknown_trie(stacks: Mapping[tuple[Frame, ...], int]) -> TrieNode:
    """The trie of distinct stacks, each ending where ``stacks`` says how often it came."""
    root = TrieNode(None)
    for frames, count in stacks.items():
        node = root
        for frame in frames:
            node = node.child(frame)
        node.terminals += count
    _count(root)
    return root

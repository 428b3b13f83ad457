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


def children_first(root: TrieNode) -> list[TrieNode]:
    """Every node of ``root``'s trie, each after its children (a loop, not recursion: stacks
    can be deeper than Python's recursion limit)."""
    order: list[TrieNode] = []
    todo = [root]
    while todo:
        node = todo.pop()
        order.append(node)
        todo.extend(node.children.values())
    order.reverse()
    return order


def _count(root: TrieNode) -> None:
    """Fill in ``compiles`` and ``stacks`` of every node, children before parents."""
    for node in children_first(root):
        node.compiles = len(node.units) + sum(c.compiles for c in node.children.values())
        node.stacks = node.terminals + sum(c.stacks for c in node.children.values())


@dataclass
class CompileTrie:
    """The trie of compile stacks, and where the compile ids without a stack of their own went."""

    root: TrieNode
    #: ``id(unit)`` of a compile with no stack logged (no ``dynamo_start``: a restart, or the
    #: compile that hit the recompile limit) -> the compile of its frame whose stack it hangs at
    stand_ins: dict[int, CompileUnit]
    #: compiles with no stack whose frame logged none either (shown in a line under the trie)
    unplaced: list[CompileUnit]


def compile_trie(
    units: list[CompileUnit], calls: Mapping[int, list[Frame]] | None = None
) -> CompileTrie:
    """Every compile id with a frame lands in the trie: one without a stack hangs where the
    nearest compile of the same frame does (a frame's compiles start from the same code), or,
    for a ``torch.export`` call, under the user's stack that called it (``calls``: id(unit)
    → those frames)."""
    by_frame: dict[int, list[CompileUnit]] = {}
    for unit in units:
        if unit.stacks and unit.id is not None and unit.id.frame_id is not None:
            by_frame.setdefault(unit.id.frame_id, []).append(unit)
    stacks: list[tuple[list[Frame], CompileUnit | None]] = []
    stand_ins: dict[int, CompileUnit] = {}
    unplaced: list[CompileUnit] = []
    for unit in units:
        stacks += [(stack, unit) for stack in unit.stacks]
        if unit.stacks or unit.id is None or unit.id.frame_id is None:
            continue
        if calls and calls.get(id(unit)):
            stacks.append((calls[id(unit)], unit))
            continue
        donor = _nearest(unit, by_frame.get(unit.id.frame_id, []))
        if donor is None:
            unplaced.append(unit)
        else:
            stand_ins[id(unit)] = donor
            stacks.append((donor.stack, unit))
    return CompileTrie(build_trie(stacks), stand_ins, unplaced)


def _nearest(unit: CompileUnit, others: list[CompileUnit]) -> CompileUnit | None:
    """The compile of the same frame closest in recompile count (an earlier one on a tie)."""
    mine = (unit.id.frame_compile_id or 0, unit.id.attempt or 0) if unit.id else (0, 0)

    def distance(other: CompileUnit) -> tuple[int, bool, int]:
        theirs = (other.id.frame_compile_id or 0, other.id.attempt or 0) if other.id else (0, 0)
        return abs(theirs[0] - mine[0]), theirs[0] > mine[0], abs(theirs[1] - mine[1])

    return min(others, key=distance, default=None)


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

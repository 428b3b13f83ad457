"""The stack trie: where in user code each compile was triggered.

Stacks of ``dynamo_start`` records share prefixes; the trie shows each shared prefix once,
with compile ids at the node where their stack ends (tlparse's "Stack trie").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..frames import Frame
from ..model import CompileUnit


@dataclass
class TrieNode:
    frame: Frame | None
    children: dict[Frame, TrieNode] = field(default_factory=dict)
    units: list[CompileUnit] = field(default_factory=list)
    terminals: int = 0  # stacks ending here without a compile id (unknown stacks)

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
    return root


def compile_trie(units: list[CompileUnit]) -> TrieNode:
    return build_trie([(stack, unit) for unit in units for stack in unit.stacks])


def unknown_trie(stacks: list[list[Frame]]) -> TrieNode:
    return build_trie([(stack, None) for stack in stacks])

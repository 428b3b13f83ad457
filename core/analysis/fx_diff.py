"""Graph and code diffs for ``tlsite diff``: FX graphs compared node by node, code as text.

An FX graph's printed form names every node (``relu_1 = torch.relu(mul)``); names are
renumbered whenever a node is added above, so comparing lines would call every node after the
first change different. The graphs are compared by the sequence of their nodes' *targets*
(``torch.relu``, ``aten.mm.default``, ``@``) instead: an inserted target is a node added, a
deleted one a node removed, and a replaced one a changed target.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field

#: ``name: "f32[4, 8]" = target(args)`` or ``name = a @ b`` (one statement of a printed graph)
_NODE = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?::\s*\"[^\"]*\"\s*)?=\s*(?P<expr>.+)$")
_CALL = re.compile(r"^(?P<target>[A-Za-z_][\w.]*)\s*\(")
_BINARY = re.compile(r"^[\w.\[\]']+\s*(?P<op>\*\*|//|[-+*/@%&|^<>]=?|==|!=)\s*[\w.\[\]']+$")
#: Lines that differ between two runs of the same program without a change in it: object ids,
#: random cache-folder and kernel file names, timestamps.
_VOLATILE = (
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x…"),
    (re.compile(r"\b\d{10,}\b"), "N"),
    (re.compile(r"/tmp/[^\s'\"]*"), "/tmp/…"),
)
#: Lines of a unified code diff shown on a page (the rest is counted).
MAX_CODE_DIFF_LINES = 400


@dataclass(frozen=True)
class Node:
    name: str
    target: str


@dataclass
class GraphDiff:
    """How the AFTER graph differs from the BEFORE graph of the same name."""

    name: str
    nodes_before: int
    nodes_after: int
    added: list[Node] = field(default_factory=list)
    removed: list[Node] = field(default_factory=list)
    changed: list[tuple[Node, Node]] = field(default_factory=list)  # before → after
    op_counts: list[tuple[str, int, int]] = field(default_factory=list)  # only those changed

    @property
    def same(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def as_json(self) -> dict[str, object]:
        return {
            "graph": self.name,
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "added": [f"{n.name} = {n.target}" for n in self.added],
            "removed": [f"{n.name} = {n.target}" for n in self.removed],
            "changed_targets": [
                {"before": f"{a.name} = {a.target}", "after": f"{b.name} = {b.target}"}
                for a, b in self.changed
            ],
            "op_counts": [{"op": op, "before": x, "after": y} for op, x, y in self.op_counts],
        }


def graph_nodes(text: str) -> list[Node]:
    """The call nodes of a printed FX graph, in order (placeholders, aliases and the
    ``x = None`` deletions torch appends after ``;`` are not nodes)."""
    nodes = []
    for line in text.split("\n"):
        statement = line.split(";", 1)[0].strip()
        if not statement or statement.startswith(("#", "def ", "class ", "return")):
            continue
        match = _NODE.match(statement)
        if match is None:
            continue
        expr = match["expr"].strip()
        call = _CALL.match(expr)
        if call:
            nodes.append(Node(match["name"], call["target"]))
            continue
        binary = _BINARY.match(expr)
        if binary:
            nodes.append(Node(match["name"], binary["op"]))
    return nodes


def graph_diff(name: str, before: str, after: str) -> GraphDiff:
    """Compare two printed FX graphs by their sequences of targets."""
    old, new = graph_nodes(before), graph_nodes(after)
    result = GraphDiff(name, len(old), len(new))
    matcher = difflib.SequenceMatcher(
        None, [n.target for n in old], [n.target for n in new], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace":
            pairs = min(i2 - i1, j2 - j1)
            result.changed.extend(zip(old[i1 : i1 + pairs], new[j1 : j1 + pairs], strict=True))
            i1, j1 = i1 + pairs, j1 + pairs
        result.removed.extend(old[i1:i2])
        result.added.extend(new[j1:j2])
    counts_old = Counter(n.target for n in old)
    counts_new = Counter(n.target for n in new)
    result.op_counts = sorted(
        (op, counts_old[op], counts_new[op])
        for op in counts_old.keys() | counts_new.keys()
        if counts_old[op] != counts_new[op]
    )
    return result


def normalise(text: str) -> str:
    """The text with run-to-run noise (object ids, temporary paths) replaced."""
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def code_diff(before: str, after: str, *, label: str = "") -> tuple[list[str], int]:
    """A unified diff of two generated-code texts (noise normalised), at most
    :data:`MAX_CODE_DIFF_LINES` lines, and how many lines were left out."""
    lines = list(
        difflib.unified_diff(
            normalise(before).split("\n"),
            normalise(after).split("\n"),
            f"before/{label}",
            f"after/{label}",
            n=2,
            lineterm="",
        )
    )
    if len(lines) <= MAX_CODE_DIFF_LINES:
        return lines, 0
    return lines[:MAX_CODE_DIFF_LINES], len(lines) - MAX_CODE_DIFF_LINES

"""How big a logged FX graph is, read from its printed text (no parsing into a graph).

``GraphModule.print_readable`` prints one line per node: the placeholders are the arguments
of ``forward``, every other node but the output is an assignment (``add = ...``, an in-place
``x += 1``), and the output is the ``return``. Dynamo's graphs rename each placeholder in a
first line (``l_x_ = L_x_``); that line is the placeholder again, not a node of its own.
AOT joint graphs unpack their placeholders from ``(primals, tangents)`` in one line.
Subgraphs (``class submod_0``) are counted too.
"""

from __future__ import annotations

import re

# The line patterns start with the newline before the line (the text is scanned with one put
# in front): a pattern that starts with a literal is searched for at memchr speed, one that
# starts with ``^`` is tried at every character.
#: ``def forward(self, a: "f32[4]", b)`` on one line or over many (AOT graphs).
_FORWARD = re.compile(r"\n[ \t]*def forward\(\s*self,?(.*?)\)(?: -> [^\n]*)?:[ \t]*(?=\n|\Z)", re.S)
_STRING = re.compile(r'"[^"\n]*"')
_COMMENT = re.compile(r"#[^\n]*")
_NAME = re.compile(r"\s*\**([A-Za-z_]\w*)")
#: A node line: ``name = ...``, ``name: "f32[4]" = ...`` or ``name += ...`` (in place), with
#: the name assigned when it is all the line (or its first statement) says: ``l_x_ = L_x_``.
_NODE = re.compile(
    r'\n[ \t]+[A-Za-z_]\w*(?:: "[^"\n]*")? (?:[-+*/%@&|^]|//|\*\*|<<|>>)?= '
    r"(?:([A-Za-z_]\w*+)(?=[\n;]|\Z))?"
)
_RETURN = re.compile(r"\n[ \t]+return\b")
#: AOT joint graphs take ``(self, primals, tangents)`` and unpack the placeholders in a line.
_FLATTEN = re.compile(r"\n[ \t]+(\w+(?:, *\w+)*),? = fx_pytree\.tree_flatten_spec\(")


def fx_node_count(text: str) -> int | None:
    """The number of FX nodes in a printed graph, or ``None`` when ``text`` is not one."""
    text = "\n" + text  # every line, the first too, follows a newline (see the patterns)
    signatures = list(_FORWARD.finditer(text))
    if not signatures:
        return None
    placeholders: set[str] = set()
    count = 0
    for match in signatures:
        args = _COMMENT.sub("", _STRING.sub('""', match.group(1)))
        names = [m.group(1) for part in args.split(",") if (m := _NAME.match(part))]
        placeholders.update(names)
        count += len(names)
    flattened = []
    if "tree_flatten_spec(" in text:  # only AOT joint graphs; the pattern is slow to scan
        flattened = [m.group(1).replace(" ", "").split(",") for m in _FLATTEN.finditer(text)]
    if flattened:  # the placeholders are the unpacked names, not the pytree arguments
        placeholders = {name for names in flattened for name in names}
        count = len(placeholders)
    # one string per node ("" for most: a list of them costs less than a match object each)
    values = _NODE.findall(text)
    renamed = sum(value in placeholders for value in filter(None, values))  # ``l_x_ = L_x_``
    return count + len(values) - renamed + len(_RETURN.findall(text))

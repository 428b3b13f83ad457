"""The words of each artifact's code that search finds: ops, kernels, graph nodes, guards.

A report's code blocks are put into its pages after the search plugin has indexed them
(indexing megabytes of code would make the index too big to load), so without these an op
such as ``aten.mm`` or a kernel name found no page. Each artifact contributes a short sorted
list of distinct terms taken from the text the page renders anyway, by regular expressions:

* ops: ``aten.mm.default`` (``torch.ops.<ns>.<op>[.<overload>]``, and ``aten.x`` / ``prims.x``
  in generated code's comments), ``torch.nn.functional.layer_norm`` (calls in Dynamo graphs),
  ``extern_kernels.mm``;
* kernel names in generated code: ``triton_poi_fused_...``, ``cpp_fused_...``;
* graph node names (without their ``_<n>`` suffix: ``view_12`` is ``view``);
* guard kinds (``TENSOR_MATCH``), guard functions (``___check_obj_id``) and the variables
  guarded (``L['x']``, ``G['torch']``), with the attributes and items guarded through them
  (``L['self']._modules['attn'].training``);
* the field names of compilation metrics.

:class:`CodeIndex` keeps each distinct list once (a recompile storm repeats the same code
thousands of times) and is written as ``search/code_index.js``, which the theme's
``search-code.js`` loads when search is opened and matches against what the user types.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# Each pattern starts with a literal, which the regex engine finds at memchr speed: a leading
# \b or alternation made the scan of a 128 MB trace's code several times slower.
_NAMESPACED_OP = re.compile(r"torch\.ops\.(\w+\.\w+(?:\.\w+)?)")
_ATEN_OP = re.compile(r"aten\.\w+(?:\.\w+)?")  # generated code's comments: "Original ATen: ..."
_PRIMS_OP = re.compile(r"prims\.\w+(?:\.\w+)?")
_TORCH_CALL = re.compile(r"torch\.(?!ops\.)\w+(?:\.\w+)*(?=\()")
_EXTERN = re.compile(r"extern_kernels\.\w+")
_KERNELS = (re.compile(r"triton_(?:poi|red|per|tem|for|mm)_\w+"), re.compile(r"cpp_fused_\w+"))
# a node of a printed FX graph: "    mm: "f32[8, 8][8, 1]cpu" = ..." or "    mm = ..."
_NODE = re.compile(r"\n {4,}(\w+)(?:: \"[^\"\n]*\")? = ")
_NUMBERED = re.compile(r"_\d+$")
_GUARD_KIND = re.compile(r"\+- ([A-Z][A-Z0-9_]+):")
_GUARD_CALL = re.compile(r": (___\w+)\(")  # "+- ID_MATCH: ___check_obj_id(...)"
# a guarded variable with the attributes and items reached through it, as guards print it:
# "L['self']._modules['attn'].training" (its root "L['self']" is a term too)
_GUARDED = tuple(
    re.compile(prefix + r"\['[^'\n\]]{1,120}'\](?:\.\w+|\['[^'\n\]]{1,120}'\])*")
    for prefix in ("L", "G")
)
_SPACE = re.compile(r"\s")  # the characters str.isspace() is true of
#: At most this many terms per artifact: the index stays small on graphs of thousands of nodes.
MAX_TERMS = 400
#: Terms longer than this are left out (generated names of hundreds of characters).
MAX_TERM_LENGTH = 160


def code_terms(name: str, text: str) -> list[str]:
    """The distinct search terms of one artifact's code (``name`` is the artifact's name),
    sorted; node names only as far as :data:`MAX_TERMS` leaves room for them."""
    terms: set[str] = set()
    nodes: set[str] = set()
    if "guard" in name:
        terms.update(_GUARD_KIND.findall(text))
        terms.update(_GUARD_CALL.findall(text))
        if "check_tensor(" in text:
            terms.add("check_tensor")
        for pattern in _GUARDED:
            for chain in pattern.findall(text):
                terms.add(chain)
                terms.add(chain[: chain.index("']") + 2])
    else:
        terms.update(_NAMESPACED_OP.findall(text))
        if "inductor_output_code" in name or "async_compile" in text:  # generated code
            terms.update(kernel_names(text))
            terms.update(_EXTERN.findall(text))
            terms.update(_ATEN_OP.findall(text))
            terms.update(_PRIMS_OP.findall(text))
        elif "def forward" in text:  # a graph
            terms.update(_TORCH_CALL.findall(text))
            nodes.update(_NUMBERED.sub("", node) for node in _NODE.findall(text))
    kept = _usable(terms)[:MAX_TERMS]
    kept += _usable(nodes - terms)[: MAX_TERMS - len(kept)]
    return sorted(kept)


def kernel_names(text: str) -> set[str]:
    """The Triton and C++ kernels that generated code names."""
    return {name for pattern in _KERNELS for name in pattern.findall(text)}


def metric_terms(keys: Iterable[str]) -> list[str]:
    """The search terms of a compilation-metrics table: its field names."""
    return sorted(_usable(keys)[:MAX_TERMS])


def _usable(terms: Iterable[str]) -> list[str]:
    """The terms without whitespace or over-long ones, shortest first."""
    return sorted(
        {t for t in terms if t and len(t) <= MAX_TERM_LENGTH and not _SPACE.search(t)},
        key=lambda t: (len(t), t),
    )


@dataclass(frozen=True, slots=True)
class CodeSection:
    """The terms of one part of a page: an artifact, or a section with a heading of its own."""

    heading: int | str  # an artifact's number (its heading is #artifact-N), or a heading's id
    title: str  # as the search result shows it; an artifact's gets " (N)" there
    terms: tuple[str, ...]


@dataclass
class CodeIndex:
    """The code terms of every page, each distinct list of terms and title stored once.

    Written as JavaScript (``var __tlsite_code = {...}``) so that it loads with a
    ``<script>`` from ``file://``. ``pages`` holds ``[location, title, [heading, title index,
    terms index, ...]]`` per page (see :class:`CodeSection`); ``terms`` are space-separated.
    """

    titles: list[str] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    pages: list[list[object]] = field(default_factory=list)
    #: sections the search index holds once for many pages: ``{indexed location: [page
    #: index or [page index, anchor, title], ...]}`` over ``shared_pages`` (``[url, title]``)
    shared: dict[str, list[object]] = field(default_factory=dict)
    shared_pages: list[list[str]] = field(default_factory=list)
    _title_ids: dict[str, int] = field(default_factory=dict, repr=False)
    _term_ids: dict[str, int] = field(default_factory=dict, repr=False)

    def add_page(self, location: str, title: str, sections: Iterable[CodeSection]) -> None:
        """Add the sections of the page at ``location`` (site-relative, e.g.
        ``-_0_0_0/index.html``), those without terms too: search finds a section by its
        title here (see :meth:`anchors`)."""
        entries: list[object] = []
        for section in sections:
            entries += [
                section.heading,
                _intern(section.title, self.titles, self._title_ids),
                _intern(" ".join(section.terms), self.terms, self._term_ids),
            ]
        if entries:
            self.pages.append([location, title, entries])

    def __bool__(self) -> bool:
        return bool(self.pages or self.shared)

    def anchors(self) -> set[str]:
        """``location#anchor`` of every section listed: ``search-code.js`` finds them by
        their title and their code, so Material's index needs no entry for those that have
        no text of their own (a storm's thousands of artifact headings)."""
        return {
            f"{location}#{f'artifact-{heading}' if isinstance(heading, int) else heading}"
            for location, _title, entries in self.pages
            for heading in entries[::3]  # type: ignore[index]
        }

    def javascript(self) -> str:
        """The index as the script ``search-code.js`` loads."""
        data: dict[str, object] = {"titles": self.titles, "terms": self.terms, "pages": self.pages}
        if self.shared:
            data.update(shared=self.shared, sharedPages=self.shared_pages)
        return f"var __tlsite_code = {json.dumps(data, separators=(',', ':'))};\n"


def _intern(value: str, values: list[str], ids: dict[str, int]) -> int:
    index = ids.get(value)
    if index is None:
        index = ids[value] = len(values)
        values.append(value)
    return index

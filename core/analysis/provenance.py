"""Inductor provenance: which pre-grad node became which post-grad node and which kernel launch.

Inductor logs a node-mapping artifact (node names and kernel names); users want *lines*: hover
a line of the pre-grad graph and see the post-grad lines and generated-code lines it became.
This module turns the mapping into the six line maps tlparse 0.4.3 embeds in its provenance
page (spec §6), with the same inputs and the same line-number rules, so the numbers match
its tests exactly (spec Appendix A).

Which artifacts are read: tlparse searches its output paths for ``<D>/<pattern>``, where ``D``
is the folder name of the compile-id entry (the normalised key, e.g. ``-_0_0_0``) and the last
match wins. Records logged without an attempt keep their raw folder (``-_0_0_-``), so tlparse
never finds them although they are listed under ``[0/0]``. By default we do the same: we look
at the unit's artifacts whose folder is exactly ``D``. ``any_folder=True`` also takes the unit's
artifacts from other raw folders (a deliberate fix, spec §9). tlparse's substring search can
also pick up another entry's files (``10_1_0_0/`` contains ``0_1_0_0/``); we do not copy that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from itertools import dropwhile
from typing import Any

from ..model import Artifact, CompileUnit, Trace
from ..records import loads_bounded

#: Artifact name prefixes tlparse tries for each input, preferred first (spec §6.1).
PRE_GRAD = ("before_pre_grad_graph", "inductor_pre_grad_graph")
POST_GRAD = ("after_post_grad_graph", "inductor_post_grad_graph")
PY_CODE = ("inductor_output_code",)
CPP_CODE = ("inductor_aot_wrapper_code",)
NODE_MAPPINGS = ("inductor_provenance_tracking_node_mappings",)
KERNEL_STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"

#: The six line maps, in the order tlparse builds them.
MAP_NAMES = (
    "preToPost",
    "postToPre",
    "pyCodeToPost",
    "postToPyCode",
    "cppCodeToPost",
    "postToCppCode",
)

#: Rust's ``char::is_whitespace`` (Python's ``str.strip`` also strips U+001C..U+001F).
_RUST_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
_RUST_WS += "\u2028\u2029\u202f\u205f\u3000"
#: C++ ``int64_t x_xnumel_1 = …;`` declarations name the kernel but are not its launch (#151).
_XNUMEL_DECL = re.compile(r"^\s*\w+\s+.*_xnumel(?:_\d+)?\s*=")

LineMap = dict[str, list[int]]


@dataclass
class ProvenanceInputs:
    """The artifacts the page is built from (None when the unit has no such artifact)."""

    pre_grad: Artifact | None = None
    post_grad: Artifact | None = None
    py_code: Artifact | None = None
    cpp_code: Artifact | None = None
    node_mappings: Artifact | None = None


@dataclass
class Provenance:
    """The three panes' texts and the line maps linking them (keys are 1-based line strings)."""

    pre_text: str
    post_text: str
    py_code: str
    cpp_code: str
    mappings: dict[str, LineMap]  # ``{}`` when the mapping artifact is not valid JSON
    inputs: ProvenanceInputs = field(default_factory=ProvenanceInputs)

    @property
    def code(self) -> str:
        """The generated code pane: C++ for AOTInductor, else the Python wrapper."""
        return self.cpp_code or self.py_code

    @property
    def is_cpp(self) -> bool:
        return bool(self.cpp_code)


@dataclass
class KernelTraces:
    """The user stack traces that led to one generated kernel."""

    kernel: str
    traces: list[str]


# -- finding the inputs ------------------------------------------------------------------------
def find_input(
    unit: CompileUnit,
    patterns: Iterable[str],
    *,
    any_folder: bool = False,
    after: int | None = None,
    before: int | None = None,
) -> Artifact | None:
    """The last artifact of the unit for the first pattern that matches (tlparse's rule).

    ``after``/``before`` only consider artifacts numbered strictly between them.
    """
    for pattern in patterns:
        found = None
        for artifact in unit.artifacts:
            if after is not None and artifact.number <= after:
                continue
            if before is not None and artifact.number >= before:
                break
            if artifact.path and _matches(artifact.path, unit, pattern, any_folder):
                found = artifact
        if found is not None:
            return found
    return None


def _matches(path: str, unit: CompileUnit, pattern: str, any_folder: bool) -> bool:
    folder, _, filename = path.rpartition("/")
    if any_folder:
        return bool(folder) and folder != "dump_file" and filename.startswith(pattern)
    # tlparse: "(unknown)" entries never match; otherwise ``<D>/<pattern>`` in the path
    return unit.id is not None and folder == unit.dirname and filename.startswith(pattern)


def provenance_inputs(unit: CompileUnit, *, any_folder: bool = False) -> ProvenanceInputs:
    """The five provenance inputs of a unit, as tlparse picks them."""
    return ProvenanceInputs(
        *(find_input(unit, patterns, any_folder=any_folder) for patterns in _INPUTS)
    )


_INPUTS = (PRE_GRAD, POST_GRAD, PY_CODE, CPP_CODE, NODE_MAPPINGS)


def provenance(trace: Trace, unit: CompileUnit, *, any_folder: bool = False) -> Provenance | None:
    """The provenance panes and line maps of a unit, exactly as tlparse builds its page.

    None when the unit has no node-mapping artifact (tlparse then shows empty panes).
    The last artifact of each kind wins, so when a unit compiled a forward and a backward
    graph only the backward is shown, and its mapping may be empty (torch logs
    ``{"version": 2.0}`` for a graph without kernels); see :func:`provenances`.
    """
    return _build(trace, provenance_inputs(unit, any_folder=any_folder))


def provenances(trace: Trace, unit: CompileUnit, *, any_folder: bool = False) -> list[Provenance]:
    """One provenance view per node-mapping artifact of the unit (forward, backward, ...).

    tlparse shows only the last mapping (see :func:`provenance`). Here each mapping gets the
    last input of each kind logged between the previous mapping and itself; failing that,
    between itself and the next mapping (old AOT logs write the C++ wrapper after the
    mapping); failing that, any earlier one (one pre-grad graph serves forward and backward).
    """
    views = (_build(trace, inputs) for inputs in provenance_input_sets(unit, any_folder=any_folder))
    return [v for v in views if v is not None]


def provenance_input_sets(unit: CompileUnit, *, any_folder: bool = False) -> list[ProvenanceInputs]:
    """The inputs of each view :func:`provenances` builds, without reading any payload."""
    mappings = [
        a for a in unit.artifacts if a.path and _matches(a.path, unit, NODE_MAPPINGS[0], any_folder)
    ]
    numbers: list[int | None] = [None, *(m.number for m in mappings), None]
    sets = []
    for index, mapping in enumerate(mappings):
        window = (numbers[index], mapping.number, numbers[index + 2])
        inputs = [_paired(unit, patterns, window, any_folder) for patterns in _INPUTS[:-1]]
        sets.append(ProvenanceInputs(*inputs, node_mappings=mapping))
    return sets


def _paired(
    unit: CompileUnit,
    patterns: tuple[str, ...],
    window: tuple[int | None, int, int | None],
    any_folder: bool,
) -> Artifact | None:
    previous, this, following = window
    return (
        find_input(unit, patterns, any_folder=any_folder, after=previous, before=this)
        or find_input(unit, patterns, any_folder=any_folder, after=this, before=following)
        or find_input(unit, patterns, any_folder=any_folder, before=this)
    )


def _build(trace: Trace, inputs: ProvenanceInputs) -> Provenance | None:
    if inputs.node_mappings is None:
        return None
    pre, post, py, cpp, mapping = (_text(trace, getattr(inputs, f.name)) for f in fields(inputs))
    return Provenance(pre, post, py, cpp, line_mappings(mapping, pre, post, py, cpp), inputs)


def _text(trace: Trace, artifact: Artifact | None) -> str:
    if artifact is None or artifact.payload is None:
        return ""
    return trace.read_payload(artifact.payload)


# -- compiles that logged the same provenance -----------------------------------------------------
def fingerprint(unit: CompileUnit, *, any_folder: bool = False) -> tuple[Any, ...] | None:
    """What the unit's provenance and kernel-trace pages are made of, as payload digests.

    Two units with equal fingerprints logged byte-identical graphs, code, node mappings and
    kernel stack traces (an FX graph cache hit logs what the cached compile stored), so their
    pages would differ only in the compile id. None when the unit has no node mapping.
    """
    sets = provenance_input_sets(unit, any_folder=any_folder)
    if not sets:
        return None
    views = tuple(tuple(_digest(getattr(s, f.name)) for f in fields(s)) for s in sets)
    traces = tuple(
        _digest(a)
        for a in unit.artifacts
        if a.kind == "artifact" and a.name.startswith(KERNEL_STACK_TRACES)
    )
    return views, traces


def _digest(artifact: Artifact | None) -> str | None:
    if artifact is None:
        return None
    return artifact.payload.md5 if artifact.payload is not None else ""


def shared_provenance(trace: Trace, *, any_folder: bool = False) -> dict[int, CompileUnit]:
    """Units whose provenance pages would repeat an earlier unit's: ``id(unit)`` → that unit.

    A recompile storm that hits the FX graph cache logs the cached compile's provenance
    again and again; one page serves them all.
    """
    first: dict[tuple[Any, ...], CompileUnit] = {}
    same: dict[int, CompileUnit] = {}
    for unit in trace.units.values():
        key = fingerprint(unit, any_folder=any_folder)
        if key is not None:
            earlier = first.setdefault(key, unit)
            if earlier is not unit:
                same[id(unit)] = earlier
    return same


_CACHE_KEY = re.compile(r'"key":\s*"(\w+)"')


def fx_cache_hit_key(trace: Trace, unit: CompileUnit) -> str | None:
    """The FX graph cache key of the unit's last ``fx_graph_cache_hit`` (None if it has none)."""
    hits = [a for a in unit.artifacts if a.name == "fx_graph_cache_hit" and a.payload is not None]
    if not hits:
        return None
    match = _CACHE_KEY.search(_text(trace, hits[-1]))
    return match.group(1) if match else None


# -- node mappings → line mappings (spec §6.3) ---------------------------------------------------
def line_mappings(
    mapping_text: str, pre: str, post: str, py_code: str, cpp_code: str
) -> dict[str, LineMap]:
    """tlparse's conversion of the node-mapping JSON into the six line maps.

    Returns ``{}`` when the JSON does not decode (tlparse shows no links then).
    """
    try:
        node_mappings = loads_bounded(mapping_text)
    except ValueError:
        return {}
    if not isinstance(node_mappings, dict):
        node_mappings = {}
    kernel_post = _object(node_mappings.get("cppCodeToPost"))
    post_kernel = _object(node_mappings.get("postToCppCode"))
    kernels = sorted(kernel_post)
    pre_lines = node_lines(pre)
    post_lines = node_lines(post)
    py_lines = python_kernel_lines(py_code, kernels)
    cpp_lines = cpp_kernel_lines(cpp_code, kernels)
    maps = {
        "preToPost": _nodes_to_lines(
            _object(node_mappings.get("preToPost")), pre_lines, post_lines
        ),
        "postToPre": _nodes_to_lines(
            _object(node_mappings.get("postToPre")), post_lines, pre_lines
        ),
        "pyCodeToPost": _kernels_to_post(kernel_post, py_lines, post_lines),
        "postToPyCode": _post_to_kernels(post_kernel, post_lines, py_lines),
        "cppCodeToPost": _kernels_to_post(kernel_post, cpp_lines, post_lines),
        "postToCppCode": _post_to_kernels(post_kernel, post_lines, cpp_lines),
    }
    return {name: {str(k): v for k, v in sorted(maps[name].items())} for name in MAP_NAMES}


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def rust_lines(text: str) -> list[str]:
    """Rust's ``str::lines``: split at ``\\n`` or ``\\r\\n``; a final line ending adds no line."""
    lines = text.split("\n")
    last = lines.pop()  # the text after the last newline
    result = [line[:-1] if line.endswith("\r") else line for line in lines]
    if last:
        result.append(last)
    return result


def _trim(text: str) -> str:
    return text.strip(_RUST_WS)


def node_name(line: str) -> str | None:
    """The FX node a graph line defines: the text before the first ``=``, then before ``:``."""
    trimmed = _trim(line)
    if not trimmed or trimmed.startswith("#"):
        return None
    name = _trim(trimmed.split("=", 1)[0].split(":", 1)[0])
    return name or None


def node_lines(graph: str) -> dict[str, int]:
    """Node name → 1-based line of a printed FX graph (a later line wins)."""
    found: dict[str, int] = {}
    for number, line in enumerate(rust_lines(graph), 1):
        name = node_name(line)
        if name is not None:
            found[name] = number
    return found


def _code_lines(code: str) -> list[str]:
    """Code lines without the leading empty ones (the page's ``<pre>`` drops them too)."""
    return rust_lines("\n".join(dropwhile(lambda line: line == "", rust_lines(code))))


def _first(lines: list[str], test: Callable[[str], bool]) -> int:
    return next((i for i, line in enumerate(lines) if test(line)), 0)


def python_kernel_lines(code: str, kernels: Iterable[str]) -> dict[str, list[int]]:
    """Kernel → lines of the Python wrapper that launch it (numbered from ``# AOT ID:``).

    A debug handle ``kernel:N`` names one launch: the first line after its comment that
    mentions the kernel. Without a handle (or if it is not found) every line from
    ``def call(args)`` on that mentions the kernel counts.
    """
    lines = _code_lines(code)
    start = _first(lines, lambda ln: "def" in ln and "call" in ln and "(args)" in ln)
    base = _first(lines, lambda ln: "# AOT ID:" in ln)
    result: dict[str, list[int]] = {}
    for kernel in kernels:
        pure = kernel.split(":", 1)[0]
        found = _python_handle_line(lines, start, kernel, pure) if ":" in kernel else None
        hits = [found + 1 - base] if found is not None else _all_lines(lines, start, pure, 1 - base)
        if hits:
            result[kernel] = hits
    return result


def _python_handle_line(lines: list[str], start: int, kernel: str, pure: str) -> int | None:
    for i in range(start, len(lines)):
        if kernel in lines[i]:
            return next((j for j in range(i + 1, len(lines)) if pure in lines[j]), None)
    return None


def _all_lines(lines: list[str], start: int, needle: str, offset: int) -> list[int]:
    return [i + offset for i in range(start, len(lines)) if needle in lines[i]]


def cpp_kernel_lines(code: str, kernels: Iterable[str]) -> dict[str, list[int]]:
    """Kernel → 1-based lines of the AOTInductor C++ wrapper that launch it.

    Like the Python rule, but from ``::run_impl(`` on, the kernel name is cut at its *last*
    colon (C++ names contain ``::``), comment/def lines are not handle anchors, and
    ``…_xnumel = …`` declarations are not launches.
    """
    lines = _code_lines(code)
    start = _first(lines, lambda ln: "::run_impl(" in ln)
    result: dict[str, list[int]] = {}
    for kernel in kernels:
        pure = kernel[: kernel.rfind(":")] if ":" in kernel else kernel
        found = _cpp_handle_line(lines, start, kernel, pure) if ":" in kernel else None
        hits = [found + 1] if found is not None else _all_lines(lines, start, pure, 1)
        if hits:
            result[kernel] = hits
    return result


def _cpp_handle_line(lines: list[str], start: int, kernel: str, pure: str) -> int | None:
    for i in range(start, len(lines)):
        line = lines[i]
        if _valid(line, "def") and _valid(line, "static inline void") and kernel in line:
            launch = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if pure in lines[j] and not _is_xnumel(lines[j])
                ),
                None,
            )
            if launch is not None:
                return launch
    return None


def _valid(line: str, prefix: str) -> bool:
    stripped = _trim(line)
    return bool(stripped) and not stripped.startswith(prefix)


def _is_xnumel(line: str) -> bool:
    return "_xnumel = " in line or _XNUMEL_DECL.match(line) is not None


def _targets(names: Any, lookup: dict[str, int]) -> list[int]:
    if not isinstance(names, list):
        return []
    return [lookup[n] for n in names if isinstance(n, str) and n in lookup]


def _nodes_to_lines(
    mapping: dict[str, Any], source: dict[str, int], target: dict[str, int]
) -> dict[int, list[int]]:
    result: dict[int, list[int]] = {}
    for node in sorted(mapping):
        if node in source:
            lines = _targets(mapping[node], target)
            if lines:
                result[source[node]] = lines
    return result


def _kernels_to_post(
    mapping: dict[str, Any], kernel_lines: dict[str, list[int]], post: dict[str, int]
) -> dict[int, list[int]]:
    """Code line → post-grad lines; when kernels share a line the later kernel (sorted) wins."""
    result: dict[int, list[int]] = {}
    for kernel in sorted(mapping):
        targets = _targets(mapping[kernel], post)
        if targets:
            for line in kernel_lines.get(kernel, []):
                result[line] = list(targets)
    return result


def _post_to_kernels(
    mapping: dict[str, Any], post: dict[str, int], kernel_lines: dict[str, list[int]]
) -> dict[int, list[int]]:
    result: dict[int, list[int]] = {}
    for node in sorted(mapping):
        kernels = mapping[node]
        if node not in post or not isinstance(kernels, list):
            continue
        lines = [ln for k in kernels if isinstance(k, str) for ln in kernel_lines.get(k, [])]
        if lines:
            result[post[node]] = lines
    return result


# -- kernel stack traces (spec §3.11) ------------------------------------------------------------
def parse_kernel_stack_traces(text: str) -> list[KernelTraces] | None:
    """Kernels (sorted) with readable traces; None when the text is not JSON (no page then).

    Producers double-escape newlines, so a literal backslash-n becomes a newline; trailing
    newlines are trimmed. Traces that are not strings are skipped, as tlparse does.
    """
    try:
        value = loads_bounded(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return []
    return [KernelTraces(kernel, _readable(value[kernel])) for kernel in sorted(value)]


def _readable(traces: Any) -> list[str]:
    if not isinstance(traces, list):
        return []
    return [t.replace("\\n", "\n").rstrip("\n") for t in traces if isinstance(t, str)]


def kernel_stack_traces_by_artifact(
    trace: Trace, unit: CompileUnit
) -> list[tuple[Artifact, list[KernelTraces]]]:
    """Each stack-trace artifact of the unit with its kernels (tlparse's readable pages).

    Artifacts that are not JSON are left out, as tlparse makes no page for them.
    """
    found = []
    for artifact in unit.artifacts:
        if artifact.kind == "artifact" and artifact.name.startswith(KERNEL_STACK_TRACES):
            kernels = parse_kernel_stack_traces(_text(trace, artifact))
            if kernels is not None:
                found.append((artifact, kernels))
    return found


def kernel_stack_traces(trace: Trace, unit: CompileUnit) -> list[KernelTraces]:
    """Every kernel's stack traces in the unit, sorted by kernel.

    A unit with a forward and a backward graph logs one artifact for each; a kernel name
    found in both gets the traces of both, in log order.
    """
    merged: dict[str, list[str]] = {}
    for _, kernels in kernel_stack_traces_by_artifact(trace, unit):
        for entry in kernels:
            merged.setdefault(entry.kernel, []).extend(entry.traces)
    return [KernelTraces(kernel, merged[kernel]) for kernel in sorted(merged)]


__all__ = [
    "KernelTraces",
    "Provenance",
    "ProvenanceInputs",
    "fingerprint",
    "fx_cache_hit_key",
    "kernel_stack_traces",
    "kernel_stack_traces_by_artifact",
    "line_mappings",
    "parse_kernel_stack_traces",
    "provenance",
    "provenance_input_sets",
    "provenance_inputs",
    "provenances",
    "shared_provenance",
]

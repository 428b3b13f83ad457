"""Provenance line maps: tlparse's exact numbers (its tests 10-16, spec Appendix A), sound maps
on a torch 2.13 trace, agreement with tlparse 0.4.3 itself, and the kernel stack traces (test 18).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from corpus import (
    FIXTURE_TRACES,
    TLPARSE,
    TLPARSE_INPUTS,
    TLPARSE_TIMEOUT_S,
    TORCH_213,
    tlparse_input,
    tlparse_missing_reason,
    trace_id,
    trace_lines,
)

from tlsite.core import Trace, load
from tlsite.core.analysis.provenance import (
    MAP_NAMES,
    Provenance,
    cpp_kernel_lines,
    kernel_stack_traces,
    kernel_stack_traces_by_artifact,
    line_mappings,
    node_lines,
    node_name,
    provenance,
    provenances,
    python_kernel_lines,
)

# -- tlparse tests 10-16: the expected line maps (spec Appendix A, verified on tlparse 0.4.3) --
EXPECTED = {
    "inductor_provenance_aot_cuda_log.txt": """{"cppCodeToPost":{"1060":[14,27,24],"1064":[21,18,15],"1071":[24],"1079":[14,27,24],"1084":[35,31,28,34,33,32]},"postToCppCode":{"14":[1060,1079],"15":[1064],"18":[1064],"21":[1064],"24":[1071,1060,1079],"27":[1060,1079],"28":[1084],"31":[1084],"32":[1084],"33":[1084],"34":[1084],"35":[1084]},"postToPre":{"11":[8],"14":[8],"15":[8],"18":[11],"21":[14],"24":[17],"27":[20],"28":[20],"31":[23],"32":[23],"33":[23],"34":[23],"35":[23]},"postToPyCode":{},"preToPost":{"11":[18],"14":[21],"17":[24],"20":[27,28],"23":[31,32,33,34,35],"8":[11,14,15]},"pyCodeToPost":{}}""",  # noqa: E501
    "inductor_provenance_aot_debug_handle_log.txt": """{"cppCodeToPost":{"1074":[12],"1079":[19,16,13],"1087":[22],"1096":[25],"1102":[33,29,26,32,31,30]},"postToCppCode":{"12":[1074],"13":[1079],"16":[1079],"19":[1079],"22":[1087],"25":[1096],"26":[1102],"29":[1102],"30":[1102],"31":[1102],"32":[1102],"33":[1102]},"postToPre":{"11":[8],"12":[8],"13":[8],"16":[11],"19":[14],"22":[17],"25":[20],"26":[20],"29":[23],"30":[23],"31":[23],"32":[23],"33":[23]},"postToPyCode":{},"preToPost":{"11":[16],"14":[19],"17":[22],"20":[25,26],"23":[29,30,31,32,33],"8":[11,12,13]},"pyCodeToPost":{}}""",  # noqa: E501
    "inductor_provenance_aot_log.txt": """{"cppCodeToPost":{"813":[12,24,21],"821":[18,15,21],"829":[12,24,21],"834":[31,27,30,29,28]},"postToCppCode":{"12":[813,829],"15":[821],"18":[821],"21":[821,813,829],"24":[813,829],"27":[834],"28":[834],"29":[834],"30":[834],"31":[834]},"postToPre":{"11":[8],"12":[8],"15":[11],"18":[14],"21":[17],"24":[20],"27":[23],"28":[23],"29":[23],"30":[23],"31":[23]},"postToPyCode":{},"preToPost":{"11":[15],"14":[18],"17":[21],"20":[24],"23":[27,28,29,30,31],"8":[11,12]},"pyCodeToPost":{}}""",  # noqa: E501
    "inductor_provenance_aot_log_old.txt": """{"cppCodeToPost":{"704":[21],"717":[31,27,30,29,28]},"postToCppCode":{"21":[704],"27":[717],"28":[717],"29":[717],"30":[717],"31":[717]},"postToPre":{"11":[8],"12":[8],"15":[11],"18":[14],"21":[17],"24":[20],"27":[23],"28":[23],"29":[23],"30":[23],"31":[23]},"postToPyCode":{},"preToPost":{"11":[15],"14":[18],"17":[21],"20":[24],"23":[27,28,29,30,31],"8":[11,12]},"pyCodeToPost":{}}""",  # noqa: E501
    "inductor_provenance_jit_cuda_log.txt": """{"cppCodeToPost":{},"postToCppCode":{},"postToPre":{"11":[14],"14":[17],"17":[20],"20":[23],"21":[23],"24":[26],"25":[26],"26":[26],"27":[26],"28":[26],"4":[11],"7":[11],"8":[11]},"postToPyCode":{"11":[192],"14":[192],"17":[197,186,201],"20":[186,201],"21":[207],"24":[207],"25":[207],"26":[207],"27":[207],"28":[207],"7":[186,201],"8":[192]},"preToPost":{"11":[4,7,8],"14":[11],"17":[14],"20":[17],"23":[20,21],"26":[24,25,26,27,28]},"pyCodeToPost":{"186":[7,20,17],"192":[14,11,8],"197":[17],"201":[7,20,17],"207":[28,24,21,27,26,25]}}""",  # noqa: E501
    "inductor_provenance_jit_log.txt": """{"cppCodeToPost":{},"postToCppCode":{},"postToPre":{"11":[17],"14":[20],"17":[23],"20":[26],"21":[26],"22":[26],"23":[26],"24":[26],"4":[11],"5":[11],"8":[14]},"postToPyCode":{"11":[138],"14":[138,132,142],"17":[132,142],"20":[147],"21":[147],"22":[147],"23":[147],"24":[147],"5":[132,142],"8":[138]},"preToPost":{"11":[4,5],"14":[8],"17":[11],"20":[14],"23":[17],"26":[20,21,22,23,24]},"pyCodeToPost":{"132":[5,17,14],"138":[11,8,14],"142":[5,17,14],"147":[24,20,23,22,21]}}""",  # noqa: E501
    "inductor_provenance_jit_debug_handle_log.txt": """{"cppCodeToPost":{},"postToCppCode":{},"postToPre":{"12":[17],"15":[20],"18":[23],"19":[23],"22":[26],"23":[26],"24":[26],"25":[26],"26":[26],"4":[11],"5":[11],"6":[11],"9":[14]},"postToPyCode":{"12":[204],"15":[211],"18":[216],"19":[223],"22":[223],"23":[223],"24":[223],"25":[223],"26":[223],"29":[204],"5":[197],"6":[204],"9":[204]},"preToPost":{"11":[4,5,6],"14":[9],"17":[12],"20":[15],"23":[18,19],"26":[22,23,24,25,26]},"pyCodeToPost":{"197":[5],"204":[12,9,6,29],"211":[15],"216":[18],"223":[26,22,19,25,24,23]}}""",  # noqa: E501
}

#: The unit and the input files tlparse's tests name for each log (pre, post, mappings).
INPUTS = {
    "inductor_provenance_aot_cuda_log.txt": (
        "[-/-]",
        "-_-_-_-/before_pre_grad_graph_0.txt",
        "-_-_-_-/after_post_grad_graph_6.txt",
        "-_-_-_-/inductor_provenance_tracking_node_mappings_12.json",
    ),
    "inductor_provenance_aot_debug_handle_log.txt": (
        "[-/-]",
        "-_-_-_-/before_pre_grad_graph_0.txt",
        "-_-_-_-/after_post_grad_graph_6.txt",
        "-_-_-_-/inductor_provenance_tracking_node_mappings_10.json",
    ),
    "inductor_provenance_aot_log.txt": (
        "[-/-]",
        "-_-_-_-/before_pre_grad_graph_0.txt",
        "-_-_-_-/after_post_grad_graph_6.txt",
        "-_-_-_-/inductor_provenance_tracking_node_mappings_11.json",
    ),
    "inductor_provenance_aot_log_old.txt": (
        "[-/-]",
        "-_-_-_-/inductor_pre_grad_graph_0.txt",
        "-_-_-_-/inductor_post_grad_graph_8.txt",
        "-_-_-_-/inductor_provenance_tracking_node_mappings_11.json",
    ),
    "inductor_provenance_jit_cuda_log.txt": (
        "[0/0]",
        "-_0_0_0/before_pre_grad_graph_1.txt",
        "-_0_0_0/after_post_grad_graph_8.txt",
        "-_0_0_0/inductor_provenance_tracking_node_mappings_14.json",
    ),
    "inductor_provenance_jit_log.txt": (
        "[0/0]",
        "-_0_0_0/before_pre_grad_graph_1.txt",
        "-_0_0_0/after_post_grad_graph_8.txt",
        "-_0_0_0/inductor_provenance_tracking_node_mappings_13.json",
    ),
    "inductor_provenance_jit_debug_handle_log.txt": (
        "[0/0]",
        "-_0_0_0/before_pre_grad_graph_1.txt",
        "-_0_0_0/after_post_grad_graph_11.txt",
        "-_0_0_0/inductor_provenance_tracking_node_mappings_14.json",
    ),
}

EXTENDED = "inductor_provenance_extended_log.txt"
TORCH_213_PROVENANCE = sorted((TORCH_213 / "provenance").glob("*.log"))
LINE_MAPPINGS = re.compile(
    r'<script id="lineMappings" type="application/json">(.*?)</script>', re.S
)


def only_provenance(trace: Trace) -> tuple[str, Provenance]:
    """The one unit of a tlparse test log that has provenance."""
    found = [(u.display, p) for u in trace.unit_list() if (p := provenance(trace, u))]
    assert len(found) == 1, [d for d, _ in found]
    return found[0]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_line_mappings_equal_tlparses_expected_values(name: str) -> None:
    trace = load(tlparse_input(name))
    display, view = only_provenance(trace)
    unit_display, pre_path, post_path, mapping_path = INPUTS[name]
    assert display == unit_display
    assert view.inputs.pre_grad is not None and view.inputs.pre_grad.path == pre_path
    assert view.inputs.post_grad is not None and view.inputs.post_grad.path == post_path
    assert view.inputs.node_mappings is not None
    assert view.inputs.node_mappings.path == mapping_path
    assert view.mappings == json.loads(EXPECTED[name])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_aot_logs_fill_the_cpp_pane_and_jit_logs_the_python_pane(name: str) -> None:
    _, view = only_provenance(load(tlparse_input(name)))
    if "_aot_" in name:
        assert view.is_cpp and "AOTInductorModel::run_impl" in view.code and not view.py_code
    else:
        assert not view.is_cpp and "# AOT ID:" in view.py_code and view.code == view.py_code


# -- torch 2.13 ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def torch_213_trace() -> Trace:
    if not TORCH_213_PROVENANCE:
        pytest.fail(f"corpus file missing: {TORCH_213 / 'provenance'}/*.log")
    return load(TORCH_213_PROVENANCE[0])


def assignment_lines(text: str) -> set[int]:
    """1-based lines that define an FX node (``name: "type" = op(...)``)."""
    return {
        number
        for number, line in enumerate(text.split("\n"), 1)
        if node_name(line) and "=" in line and not line.strip().startswith(("def ", "class "))
    }


def check_sound(view: Provenance) -> None:
    """Every mapped line is a node assignment, and every code line names a mapped kernel."""
    pre_nodes = assignment_lines(view.pre_text)
    post_nodes = assignment_lines(view.post_text)
    for source, targets in view.mappings["postToPre"].items():
        assert int(source) in post_nodes
        assert set(targets) <= pre_nodes, (source, targets)
    for source, targets in view.mappings["preToPost"].items():
        assert int(source) in pre_nodes
        assert set(targets) <= post_nodes, (source, targets)
    code = view.py_code.split("\n")
    base = next(i for i, line in enumerate(code) if "# AOT ID:" in line)
    for source, targets in view.mappings["pyCodeToPost"].items():
        line = code[base + int(source) - 1]
        assert "(" in line, line  # a launch or an extern call, not a comment
        assert set(targets) <= post_nodes
    for targets in view.mappings["postToPyCode"].values():
        assert {str(t) for t in targets} <= set(view.mappings["pyCodeToPost"])


def test_torch_213_trace_maps_pre_grad_nodes_to_post_grad_nodes_and_kernels(
    torch_213_trace: Trace,
) -> None:
    trace = torch_213_trace
    units = [u for u in trace.unit_list() if provenances(trace, u)]
    assert [u.display for u in units] == ["[0/0]", "[0/1]"]
    for unit in units:
        views = provenances(trace, unit)
        useful = [v for v in views if v.mappings["postToPre"] and v.mappings["pyCodeToPost"]]
        assert useful, unit.display
        for view in views:
            assert set(view.mappings) == set(MAP_NAMES)
            assert not view.mappings["cppCodeToPost"] and not view.is_cpp
            check_sound(view)
        assert views[-1].mappings == provenance(trace, unit).mappings  # type: ignore[union-attr]


def test_tlparse_shows_only_the_last_mapping_of_a_compile_that_has_a_backward(
    torch_213_trace: Trace,
) -> None:
    """[0/1] logs a forward mapping, then an empty one (``{"version": 2.0}``) for the backward."""
    unit = torch_213_trace.unit("[0/1]")
    tlparse_view = provenance(torch_213_trace, unit)
    assert tlparse_view is not None
    assert all(not m for m in tlparse_view.mappings.values())
    forward, backward = provenances(torch_213_trace, unit)
    assert forward.inputs.post_grad is not None and backward.inputs.post_grad is not None
    assert forward.inputs.post_grad.number < forward.inputs.node_mappings.number  # type: ignore[union-attr]
    assert forward.inputs.post_grad.number < backward.inputs.post_grad.number
    assert forward.inputs.pre_grad is backward.inputs.pre_grad
    assert forward.mappings["preToPost"]


def test_units_without_a_mapping_artifact_have_no_provenance(torch_213_trace: Trace) -> None:
    assert provenance(torch_213_trace, torch_213_trace.unit("[-/-]")) is None
    assert provenances(torch_213_trace, torch_213_trace.unit("[-/-]")) == []


# -- agreement with tlparse 0.4.3 -i (HTML and --plain-text output code) --------------------
def tlparse_line_mappings(log: Path, out: Path, plain_text: bool) -> dict[str, object]:
    command = [TLPARSE, str(log), "-o", str(out), "--overwrite", "--no-browser", "-i"]
    if plain_text:
        command.append("-p")
    subprocess.run(command, capture_output=True, timeout=TLPARSE_TIMEOUT_S, check=False)
    pages = {}
    for page in out.glob("provenance_tracking_*.html"):
        match = LINE_MAPPINGS.search(page.read_text(encoding="utf-8"))
        assert match is not None, page
        pages[page.stem.removeprefix("provenance_tracking_")] = json.loads(match.group(1))
    return pages


@pytest.mark.parametrize("plain_text", [False, True], ids=["html", "plain-text"])
@pytest.mark.parametrize(
    "log",
    [
        *(TLPARSE_INPUTS / name for name in [*sorted(EXPECTED), EXTENDED]),
        *TORCH_213_PROVENANCE,
        FIXTURE_TRACES / "cache_hits" / "cache_hits.log",
    ],
    ids=trace_id,
)
def test_line_mappings_agree_with_tlparse(log: Path, plain_text: bool, tmp_path: Path) -> None:
    reason = tlparse_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    expected = tlparse_line_mappings(log, tmp_path, plain_text)
    trace = load(log)
    ours = {}
    for unit in trace.unit_list():
        view = provenance(trace, unit)
        ours[unit.dirname] = view.mappings if view is not None else {}
    assert ours == expected


# -- the rules on small inputs ---------------------------------------------------------------
def test_node_names_come_before_the_first_equals_then_the_first_colon() -> None:
    graph = (
        "class GraphModule(torch.nn.Module):\n"
        "    def forward(self, x: 'f32[2]'):\n"
        "        # File: model.py:3 in forward, code: y = x + 1\n"
        '        add: "f32[2][1]cpu" = torch.ops.aten.add.Tensor(x, 1)\n'
        "\n"
        "        return (add,)\n"
    )
    assert node_name('  x: "f32[8, 16]" = torch._C._nn.linear(a)') == "x"
    assert node_name("   # a comment = 3") is None
    assert node_name("   ") is None
    assert node_lines(graph)["add"] == 4
    assert "# File" not in node_lines(graph)


def test_mapping_json_that_does_not_decode_gives_no_maps_and_a_non_object_gives_empty_ones() -> (
    None
):
    assert line_mappings("not json", "", "", "", "") == {}
    assert line_mappings("[1, 2]", "", "", "", "") == {name: {} for name in MAP_NAMES}
    empty = line_mappings('{"version": 2.0}', "a = b", "c = d", "", "")
    assert empty == {name: {} for name in MAP_NAMES}


CPP = """

static inline void call_triton_k_0(int64_t triton_k_0_xnumel) {}
void AOTInductorModel::run_impl(AtenTensorHandle* input_handles) {
    // [Provenance debug handles] triton_k_0:1
    int64_t triton_k_0_xnumel = 128L;
    call_triton_k_0(buf0, triton_k_0_xnumel);
    // [Provenance debug handles] aoti_torch::cpu::mm_out:2
    aoti_torch::cpu::mm_out(buf1, buf0);
    aoti_torch::cpu::mm_out(buf2, buf1);
}
"""


def test_cpp_kernels_launch_after_their_handle_skipping_xnumel_and_cut_at_the_last_colon() -> None:
    lines = cpp_kernel_lines(CPP, ["triton_k_0:1", "aoti_torch::cpu::mm_out:2", "plain_k"])
    # leading blank lines are dropped: "static inline void …" is line 1, run_impl line 2
    assert lines == {"triton_k_0:1": [5], "aoti_torch::cpu::mm_out:2": [7]}
    # without a handle: every line from ``::run_impl(`` on that names it, xnumel or not
    assert cpp_kernel_lines(CPP, ["triton_k_0"]) == {"triton_k_0": [3, 4, 5]}
    # a C++ name with ``::`` is taken for a handle and cut at its last colon (tlparse #149)
    assert cpp_kernel_lines(CPP, ["aoti_torch::cpu::mm_out"]) == {"aoti_torch::cpu::mm_out": [7]}


PY = """
# AOT ID: ['0_inference']
triton_k_0 = async_compile.triton('triton_k_0', '''...''')
def call(args):
    # [Provenance debug handles] triton_k_0:1
    triton_k_0.run(buf0, 16, stream=stream0)
    triton_k_0.run(buf1, 16, stream=stream0)
"""


def test_python_kernels_are_numbered_from_the_aot_id_line() -> None:
    assert python_kernel_lines(PY, ["triton_k_0:1"]) == {"triton_k_0:1": [5]}
    # no handle: every line from ``def call(args)`` naming the kernel
    assert python_kernel_lines(PY, ["triton_k_0"]) == {"triton_k_0": [4, 5, 6]}
    assert python_kernel_lines(PY, ["triton_k_0:9"]) == {"triton_k_0:9": [4, 5, 6]}
    assert python_kernel_lines("", ["k"]) == {}


def test_kernels_sharing_a_line_keep_the_later_kernels_post_nodes() -> None:
    mappings = {
        "preToPost": {},
        "postToPre": {},
        "cppCodeToPost": {"triton_k_0": ["b"], "triton_k": ["a"]},
        "postToCppCode": {"a": ["triton_k"], "b": ["triton_k_0"]},
    }
    post = "a = x\nb = y\n"
    result = line_mappings(json.dumps(mappings), "", post, PY, "")
    # "triton_k" < "triton_k_0" in sorted order, and both match the same lines
    assert result["pyCodeToPost"] == {"4": [2], "5": [2], "6": [2]}
    assert result["postToPyCode"] == {"1": [4, 5, 6], "2": [4, 5, 6]}


# -- which artifacts are read ------------------------------------------------------------------
def test_files_in_another_raw_folder_are_only_found_when_asked(tmp_path: Path) -> None:
    """Records without an attempt are listed under [0/0] but live in ``-_0_0_-`` (tlparse misses
    them); ``any_folder=True`` takes them too."""
    ids = {"frame_id": 0, "frame_compile_id": 0}
    mapping = {"preToPost": {"x": ["y"]}, "postToPre": {"y": ["x"]}}
    text = trace_lines({"dynamo_start": {"stack": []}, **ids, "attempt": 0})
    text += trace_lines(
        {"artifact": {"name": "before_pre_grad_graph", "encoding": "string"}, **ids},
        "x = f(a)",
    )
    text += trace_lines(
        {"artifact": {"name": "after_post_grad_graph", "encoding": "string"}, **ids},
        "y = g(a)",
    )
    text += trace_lines(
        {
            "artifact": {"name": "inductor_provenance_tracking_node_mappings", "encoding": "json"},
            **ids,
        },
        json.dumps(mapping),
    )
    log = tmp_path / "attemptless.log"
    log.write_text(text, encoding="utf-8")
    trace = load(log)
    unit = trace.unit("[0/0]")
    assert {a.path.split("/")[0] for a in unit.artifacts if a.path} == {"-_0_0_-"}
    assert provenance(trace, unit) is None
    view = provenance(trace, unit, any_folder=True)
    assert view is not None
    assert view.mappings["preToPost"] == {"1": [1]}
    assert view.mappings["postToPre"] == {"1": [1]}


# -- kernel stack traces (tlparse test 18) ---------------------------------------------------
def test_kernel_stack_traces_have_real_newlines_and_sorted_kernels() -> None:
    trace = load(tlparse_input(EXTENDED))
    found = [(u, kernel_stack_traces(trace, u)) for u in trace.unit_list()]
    found = [(u, k) for u, k in found if k]
    assert len(found) == 1
    unit, kernels = found[0]
    assert unit.display == "[-/-]"
    names = [k.kernel for k in kernels]
    assert names == sorted(names) and names
    traces = [t for k in kernels for t in k.traces]
    assert any("line 1\n  foo()" in t for t in traces)
    assert not any("\\n" in t for t in traces)
    assert not any(t.endswith("\n") for t in traces)


def test_kernel_stack_traces_of_every_torch_213_compile(torch_213_trace: Trace) -> None:
    for display in ("[0/0]", "[0/1]"):
        unit = torch_213_trace.unit(display)
        kernels = kernel_stack_traces(torch_213_trace, unit)
        traces = [t for k in kernels for t in k.traces]
        assert traces and all("examples/provenance.py" in t for t in traces), display
        per_artifact = kernel_stack_traces_by_artifact(torch_213_trace, unit)
        assert len(per_artifact) == (1 if display == "[0/0]" else 2)
        assert sum(len(k.traces) for _, ks in per_artifact for k in ks) == len(traces)

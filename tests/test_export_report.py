"""The draft-export report: the failures tlparse's export tests (8, 9) report, every failure
torch 2.13 logs (tlparse 0.4.3 drops two), the expression trees, and tolerance of odd records.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from corpus import FIXTURE_TRACES, run_tlparse, tlparse_input, trace_lines

from tlsite.core import Trace, load
from tlsite.core.analysis.export_report import (
    DATA_DEPENDENT_ERROR,
    FAKE_KERNEL_DOC,
    GUARD_EVALUATED,
    MISMATCHED_FAKE_KERNEL,
    MISSING_FAKE_KERNEL,
    ExportFailure,
    ExprNode,
    export_report,
    exported_program,
    logged_failures,
)

EXPORT_DRAFT = FIXTURE_TRACES / "export_draft" / "export_draft.log"
_ROW = re.compile(
    r"<tr>\s*<td>(?P<type>.*?)</td>\s*<td>(?P<reason>.*?)</td>\s*<td>(?P<info>.*?)</td>", re.S
)
_HREF = re.compile(r"href='([^']*)'")
_PROGRAM = re.compile(r'Here is the resulting exported program: <a href="([^"]*)">')


def tlparse_rows(index_html: str) -> list[dict[str, str]]:
    """The rows of tlparse's "Draft Export Report" table (type, reason text, info link)."""
    rows = []
    for match in _ROW.finditer(index_html):
        reason = html.unescape(re.sub(r"<[^>]+>", "", match["reason"]))
        link = _HREF.search(match["info"])
        rows.append(
            {
                "type": match["type"].strip(),
                "reason": " ".join(reason.split()),
                "link": link.group(1) if link else "",
            }
        )
    return rows


def plain(markdown: str) -> str:
    """Our Markdown reason as the words tlparse shows (code spans unwrapped)."""
    return " ".join(markdown.replace("`", "").split())


# -- tlparse tests 8 and 9 -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["export.log", "export_guard_added.log"])
def test_export_logs_report_the_failures_tlparse_reports(name: str) -> None:
    log = tlparse_input(name)
    run = run_tlparse(log, export=True)
    assert run.returncode == 0, run.stderr
    index = (run.out / "index.html").read_text(encoding="utf-8")
    expected = tlparse_rows(index)
    assert f"{len(expected)} issue(s) were found during export" in index

    trace = load(log, export_mode=True)
    report = export_report(trace)
    assert [f.type for f in report.failures] == [row["type"] for row in expected]
    for failure, row in zip(report.failures, expected, strict=True):
        assert plain(failure.reason) == row["reason"]
        assert failure.page is not None and failure.page.path == row["link"]
        assert failure.page.path in run.files
    program = _PROGRAM.search(index)
    assert program is not None and report.exported_program is not None
    assert getattr(report.exported_program, "path", None) == program.group(1)


def test_export_log_keeps_only_guards_evaluated_during_export() -> None:
    """export.log has 7 ``guard_added`` records without the ``eval`` prefix: none is a failure."""
    trace = load(tlparse_input("export.log"), export_mode=True)
    guards = [e for u in trace.unit_list() for e in u.events_of("guard_added")]
    assert len(guards) == 7
    [failure] = logged_failures(trace)
    assert failure.type == DATA_DEPENDENT_ERROR
    assert failure.expr == "Eq((((-u0)//3)) + 5, 0)" and failure.result == "False"
    assert failure.locals == {
        "z": "Tensor(shape: torch.Size([2*s0]), stride: (1,), storage_offset: 0)",
        "a": "(((-u0)//3)) + 5",
    }
    assert failure.symbols == {"s0": "L['args'][0][1].size()[0]"}
    assert failure.source_line == "return z[:a]"
    assert failure.user_stack and failure.stack


def chain(tree: ExprNode) -> list[tuple[int, str, str | None]]:
    return [(depth, node.result, node.method) for depth, node in tree.walk()]


def test_export_log_expression_tree_goes_down_to_the_unbacked_symbol() -> None:
    [failure] = logged_failures(load(tlparse_input("export.log"), export_mode=True))
    assert failure.expr_tree is not None
    nodes = chain(failure.expr_tree)
    assert nodes[0] == (0, "Eq((((-u0)//3)) + 5, 0)", "eq")
    assert nodes[-1] == (8, "u0", None)  # create_unbacked_symbol
    assert [d for d, _, _ in nodes] == list(range(9))
    last = list(failure.expr_tree.walk())[-1][1]
    assert last.kind == "create_unbacked_symbol" and last.value_range == "[-int_oo, int_oo]"


# -- torch 2.13 draft export: every failure, more than tlparse 0.4.3 -------------------------
@pytest.fixture(scope="module")
def draft() -> Trace:
    return load(EXPORT_DRAFT)


def test_torch_213_draft_export_shows_every_failure_torch_logged(draft: Trace) -> None:
    assert draft.export_mode
    failures = logged_failures(draft)
    assert [f.type for f in failures] == [
        GUARD_EVALUATED,
        DATA_DEPENDENT_ERROR,
        MISSING_FAKE_KERNEL,
        MISMATCHED_FAKE_KERNEL,
    ]
    guard, data_dependent, missing, mismatched = failures
    assert guard.expr == "s77 > 4"
    assert guard.symbol_to_sources == {"s77": "L['x'].size()[0]"}
    assert data_dependent.expr == "u0 > 2" and data_dependent.result == "True"
    assert "`u0 > 2`" in data_dependent.reason and "`True`" in data_dependent.reason
    assert data_dependent.locals == {"k": "['u0']"}  # a list in torch 2.13, shown as text
    assert data_dependent.user_stack[-1].line == 45
    assert data_dependent.user_stack[-1].filename.endswith("export_draft.py")
    assert missing.op == "tlsite.scale_rows.default" and missing.doc_url == FAKE_KERNEL_DOC
    assert missing.reason == (
        "`torch.ops.tlsite.scale_rows.default` is missing a fake kernel implementation"
    )
    assert mismatched.mismatch == "mismatch between fake value u1 and real value 5 "
    assert mismatched.reason.endswith("The reason for the mismatch is: " + mismatched.mismatch)
    assert [f.is_guard for f in failures] == [True, True, False, False]


def test_torch_213_draft_export_has_more_failures_than_tlparse_shows(draft: Trace) -> None:
    run = run_tlparse(EXPORT_DRAFT, export=True)
    index = (run.out / "index.html").read_text(encoding="utf-8")
    theirs = [row["type"] for row in tlparse_rows(index)]
    assert theirs == [MISSING_FAKE_KERNEL, MISMATCHED_FAKE_KERNEL]  # the list locals break it
    ours = [f.type for f in logged_failures(draft)]
    assert set(theirs) < set(ours) and len(ours) == len(theirs) + 2


def test_data_dependent_error_tree_has_the_expression_and_the_symbol_it_came_from(
    draft: Trace,
) -> None:
    failure = logged_failures(draft)[1]
    tree = failure.expr_tree
    assert tree is not None
    assert tree.method == "gt" and tree.arguments == ["u0", "2"] and tree.result == "u0 > 2"
    assert tree.user_stack and tree.user_stack[-1].line == 45
    [symbol] = tree.children
    assert symbol.result == "u0" and symbol.method is None and not symbol.children
    assert symbol.kind == "create_unbacked_symbol"
    assert any(node.method and node.arguments for _, node in tree.walk())


def test_draft_export_pages_and_program_in_export_mode_and_not_otherwise() -> None:
    exported = load(EXPORT_DRAFT, export_mode=True)
    pages = [f.page.path if f.page else None for f in logged_failures(exported)]
    assert pages == [
        "-_-_-_-/symbolic_guard_information_0.html",
        "-_-_-_-/symbolic_guard_information_1.html",
        None,
        None,
    ]
    program = exported_program(exported)
    assert program is not None and getattr(program, "path", None) == (
        "-_-_-_-/exported_program_2.txt"
    )
    normal = load(EXPORT_DRAFT, export_mode=False)
    assert [f.type for f in logged_failures(normal)] == [f.type for f in logged_failures(exported)]
    event = exported_program(normal)
    assert event is not None and event.payload is not None
    assert "ExportedProgram" in normal.read_payload(event.payload)


def test_traces_without_export_records_have_no_failures_and_no_program() -> None:
    report = export_report(load(tlparse_input("simple.log")))
    assert report.ok and report.failures == [] and report.exported_program is None


# -- tolerance -------------------------------------------------------------------------------
def write_trace(tmp_path: Path, *records: dict[str, Any]) -> Trace:
    log = tmp_path / "odd.log"
    log.write_text("".join(trace_lines(r) for r in records), encoding="utf-8")
    return load(log, export_mode=True)


def expression(node_id: int, result: str, argument_ids: Any, **extra: Any) -> dict[str, Any]:
    meta = {"method": "add", "result": result, "result_id": node_id, "arguments": ["a", 1]}
    return {"expression_created": {**meta, "argument_ids": argument_ids, **extra}}


def test_odd_records_never_raise_and_still_make_failures(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path,
        {"guard_added": {"prefix": "eval"}},  # no expr, no stacks, no node id
        {
            "propagate_real_tensors_provenance": {
                "expr": 3,
                "expr_node_id": "x",
                "frame_locals": ["not", "a", "dict"],
                "symbol_to_sources": {"s0": None, "s1": ["L['x']"]},
                "user_stack": "nope",
            }
        },
        {
            "guard_added": {
                "prefix": "eval",
                "expr": "s0 > 1",
                "frame_locals": {"locals": {"n": 5, "m": None, "t": [1, "u0"]}, "symbols": 7},
            }
        },
        {"missing_fake_kernel": {}},
        {"mismatched_fake_kernel": "not an object"},
        {"guard_added": {"prefix": "hint", "expr": "s0 > 2"}},
    )
    failures = logged_failures(trace)
    assert [f.type for f in failures] == [
        GUARD_EVALUATED,
        DATA_DEPENDENT_ERROR,
        GUARD_EVALUATED,
        MISSING_FAKE_KERNEL,
        MISMATCHED_FAKE_KERNEL,
    ]
    first, second, third, missing, mismatched = failures
    assert first.expr is None and "(not logged)" in first.reason and first.expr_tree is None
    assert second.expr == "3" and second.expr_node_id is None and second.locals == {}
    assert second.symbol_to_sources == {"s1": "[\"L['x']\"]"}
    assert second.user_stack == []
    assert third.locals == {"n": "5", "t": "[1, 'u0']"} and third.symbols == {}
    assert missing.op is None and "torch.ops.(not logged)" in missing.reason
    assert mismatched.mismatch is None
    assert all(isinstance(f, ExportFailure) and f.reason for f in failures)


def test_expression_trees_use_only_earlier_records_and_survive_cycles(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path,
        expression(1, "a + b", [2, 3, 99, "junk"]),
        expression(2, "a", [1]),  # a cycle back to the root
        {"create_unbacked_symbol": {"symbol": "u0", "node_id": 3, "vr": "[0, 5]"}},
        {"guard_added": {"prefix": "eval", "expr": "a + b", "expr_node_id": 1}},
        {"guard_added": {"prefix": "eval", "expr": "c", "expr_node_id": 4}},
        expression(4, "c", [1]),  # logged after the guard that names it
        expression(1, "reused id", []),  # torch reuses object ids
        {"guard_added": {"prefix": "eval", "expr": "c", "expr_node_id": 4}},
    )
    first, too_early, later = logged_failures(trace)
    assert first.expr_tree is not None
    assert chain(first.expr_tree) == [(0, "a + b", "add"), (1, "a", "add"), (1, "u0", None)]
    assert first.expr_tree.arguments == ["a", "1"]
    assert too_early.expr_tree is None
    assert later.expr_tree is not None
    assert chain(later.expr_tree) == [(0, "c", "add"), (1, "reused id", "add")]


def test_a_very_deep_expression_chain_does_not_hit_the_recursion_limit(tmp_path: Path) -> None:
    depth = 3000
    records = [expression(i, f"e{i}", [i - 1] if i else []) for i in range(depth)]
    records.append({"guard_added": {"prefix": "eval", "expr": "e", "expr_node_id": depth - 1}})
    [failure] = logged_failures(write_trace(tmp_path, *records))
    assert failure.expr_tree is not None
    assert len(list(failure.expr_tree.walk())) == depth


def test_failures_serialise_their_text_fields(draft: Trace) -> None:
    """Everything a page shows is plain text (no frames needed to print a summary)."""
    for failure in logged_failures(draft):
        json.dumps(
            {
                "type": failure.type,
                "reason": failure.reason,
                "locals": failure.locals,
                "symbols": failure.symbols,
                "sources": failure.symbol_to_sources,
            }
        )

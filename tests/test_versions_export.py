"""torch.export calls and draft-export issues as each torch release logs them (issue #17).

Real traces: ``tests/fixtures/traces/torch-<version>/export*.log`` (the scripts in
``tests/fixtures/scripts/versions/``: a good module, a data-dependent guard, a Dim
constraint violation; the script's own output says the last two raised),
``torch-2.15/export_dtrace.log`` (the same three calls under ``TORCH_DTRACE`` on 2.15) and
``torch-2.15/dynamic_shapes.log`` (``scripts/dynamic_shapes.py`` run by torch 2.15). Expected
lines come from the scripts, expected times from the raw log lines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from corpus import FIXTURE_TRACES
from test_site import article_text, glance, site_cache, tables

from tlsite.core import load
from tlsite.core.analysis.export_report import export_failures

SCRIPTS = Path(__file__).parent / "fixtures" / "scripts"
EXPORT_DTRACE = FIXTURE_TRACES / "torch-2.15" / "export_dtrace.log"
DYNAMIC_215 = FIXTURE_TRACES / "torch-2.15" / "dynamic_shapes.log"
#: Traces that ran the script before it gained line 5 (fixtures README).
EARLIER_SCRIPT = {("2.15", "export"), ("2.6", "export")}


def fixture(version: str, scenario: str) -> Path:
    return FIXTURE_TRACES / f"torch-{version}" / f"{scenario}.log"


def script_line(script: Path, text: str, shift: int = 0) -> str:
    """``name.py:N`` for the one line of ``script`` holding ``text``."""
    lines = script.read_text(encoding="utf-8").splitlines()
    numbers = [n for n, line in enumerate(lines, 1) if text in line]
    assert len(numbers) == 1, f"{text!r} is on lines {numbers} of {script.name}"
    return f"{script.name}:{numbers[0] - shift}"


def version_line(version: str, scenario: str, text: str) -> str:
    script = SCRIPTS / "versions" / f"{scenario}.py"
    return script_line(script, text, int((version, scenario) in EARLIER_SCRIPT))


def metrics_lines(path: Path) -> list[dict]:
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if '{"compilation_metrics":' in line:
            found.append(json.loads(line[line.index("{") :])["compilation_metrics"])
    return found


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory):
    return site_cache(tmp_path_factory)


def export_rows(page_html: str) -> list[list[str]]:
    """The "torch.export calls" table: one row of cell texts per call."""
    for rows in tables(page_html):
        if rows and rows[0][0].text == "Call":
            return [[cell.text for cell in row] for row in rows[1:]]
    raise AssertionError("no torch.export calls table")


#: (version, scenario) → the calls' (call site text, outcome, error) as the script ran them.
CALLS = {
    "good": ("Good(), (torch.randn(3, 8),)", "succeeded"),
    "datadep": ("DataDep(), (torch.randn(3, 8),)", "failed"),
    "constrained": ("Constrained(), (torch.randn(4, 8),)", "failed"),
}


# -- each export call its own row, with its outcome ----------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "scenario"),
    [("2.15", "export_strict"), ("2.10", "export_strict"), ("2.6", "export"), ("2.4", "export")],
)
def test_strict_export_calls_are_one_row_each_with_outcome_and_time(
    sites, version: str, scenario: str
) -> None:
    """torch 2.10+ strict export traces every call as [0/0] and logs its metrics with no
    compile id; each call is still its own row: the good one succeeded, the data-dependent
    one raised UserError, the constrained one ConstraintViolationError, each with its time."""
    site = sites.get(fixture(version, scenario))
    rows = export_rows(site.page("failures.html"))
    assert len(rows) == 3
    assert [r[2] for r in rows] == ["succeeded", "failed", "failed"]
    assert rows[1][3].startswith("UserError: ")
    assert "zuf0 > 0.0" in rows[1][3]
    assert rows[2][3].startswith("ConstraintViolationError: Constraints violated (b)!")
    raw = metrics_lines(fixture(version, scenario))
    assert len(raw) == 3 and [bool(m["fail_type"]) for m in raw] == [False, True, True]
    for row, metrics in zip(rows, raw, strict=True):
        if metrics.get("duration_us") is not None:
            assert float(row[4]) == pytest.approx(metrics["duration_us"] / 1e6, rel=0.01)
    site_text = version_line(version, scenario, CALLS["good"][0])
    assert rows[0][1] == site_text
    overview = article_text(site.page("index.html"))
    assert "3 calls: 2 failed, 1 succeeded" in glance(site)["torch.export"]
    assert "No compilation failures" not in overview


@pytest.mark.slow
@pytest.mark.parametrize("version", ["2.15", "2.10"])
def test_non_strict_export_calls_say_what_failed(sites, version: str) -> None:
    """Non-strict export logs no metrics and no exception. The data-dependent call leaves its
    partial graph (ending at `zuf0 > 0.0`), the constrained one the specialization of the dim
    declared `Dim("b", min=2, max=16)`: both failed, and the good call's outcome is not logged."""
    site = sites.get(fixture(version, "export"))
    rows = export_rows(site.page("failures.html"))
    assert [r[2] for r in rows] == ["not logged", "failed (inferred)", "failed (inferred)"]
    assert rows[0][1] == version_line(version, "export", CALLS["good"][0])
    assert rows[1][3].startswith("GuardOnDataDependentSymNode")
    assert "zuf0 > 0.0" in rows[1][3]
    assert f"at {version_line(version, 'export', 'if x.sum().item() > 0')}" in rows[1][3]
    assert rows[2][3].startswith("Constraint violation")
    assert "[2, 16]" in rows[2][3]
    overview = article_text(site.page("index.html"))
    assert glance(site)["Compilation failures"] == "2"
    assert "No compilation failures" not in overview
    assert "Export failed" in overview and "GuardOnDataDependentSymNode" in overview


@pytest.mark.slow
def test_2_15_non_strict_compile_ids_are_export_calls_not_missing_metrics(sites) -> None:
    """2.15 gives each non-strict export call a compile id and no metrics: the compile-ids
    list names them exports, never "No metrics" with function "?"."""
    site = sites.get(fixture("2.15", "export"))
    (rows,) = [t for t in tables(site.page("compile_ids.html")) if t[0][0].text == "Compile id"]
    by_id = {r[0].text: (r[1].text, r[2].text) for r in rows[1:]}
    assert by_id["[0/0]"] == ("Export", "torch.export")
    assert by_id["[1/0]"] == ("Error", "torch.export")
    assert by_id["[2/0]"] == ("Error", "torch.export")
    page = article_text(site.page("-_0_0_0/index.html"))
    assert "Metrics were missing" not in page
    assert "torch.export call: outcome not logged" in page


@pytest.mark.slow
def test_dtrace_export_record_starts_each_call(sites) -> None:
    """Under TORCH_DTRACE each call starts with an `export` record ("start!"): it is shown on
    the call's compile page, and the good call's exported program makes it a success."""
    raw = EXPORT_DTRACE.read_text(encoding="utf-8")
    assert raw.count('{"export": {}') == 3
    site = sites.get(EXPORT_DTRACE)
    rows = export_rows(site.page("failures.html"))
    script = SCRIPTS / "export_dtrace.py"
    assert [r[1] for r in rows] == [
        script_line(script, "ep = torch.export.export(Good()"),
        script_line(script, "torch.export.export(DataDep()"),
        script_line(script, "Constrained(), (torch.randn(4, 8),)", shift=1),  # the call's line
    ]
    assert [r[2] for r in rows] == ["succeeded", "failed", "failed (inferred)"]
    assert rows[1][3].startswith("GuardOnDataDependentSymNode: Could not guard on")
    assert all("began with export at line" in r[3] for r in rows)
    page = article_text(site.page("-_0_0_0/index.html"))
    assert "began at line 1 with an export record" in page and "start!" in page
    health = article_text(site.page("health.html"))
    assert "no special view" not in health
    overview = article_text(site.page("index.html"))
    assert "Congratulations" not in overview and "Draft" not in overview  # not a draft export
    assert glance(site)["torch.export"] == "3 calls: 2 failed, 1 succeeded"
    assert overview.count("Export failed in") == 2


def test_a_torch_compile_trace_has_no_export_calls() -> None:
    from tlsite.core.analysis.exports import export_calls

    for scenario in ("graph_breaks", "recompiles", "compiled_autograd", "dynamic_shapes"):
        assert export_calls(load(fixture("2.15", scenario))) == [], scenario


def test_2_15_aoti_export_compile_id_is_the_export_call_not_missing_metrics() -> None:
    """The AOTInductor script exports first (torch.export.export, non-strict); torch 2.15 gives
    that call a compile id with no dynamo_start, whose only records describe fake tensors."""
    from tlsite.core.analysis.exports import export_calls

    trace = load(fixture("2.15", "aoti"))
    try:
        calls = export_calls(trace)
        assert [(c.number, c.outcome) for c in calls] == [(1, "not logged")]
        unit = next(u for u in trace.units.values() if u.display == "[0/0]")
        assert unit in calls[0].units
    finally:
        trace.close()


# -- draft export: count what torch counts --------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # torch printed "4 issue(s)": 1 data dependent u0 > 2, 1 missing, 2 mismatched
        ("2.6", ["Data Dependent Error", "Missing Fake Kernel"] + ["Mismatched Fake Kernel"] * 2),
        # torch printed "3 issue(s)"; the s77 > 4 guard is not one of them
        ("2.10", ["Data Dependent Error", "Missing Fake Kernel", "Mismatched Fake Kernel"]),
        ("2.15", ["Data Dependent Error", "Missing Fake Kernel", "Mismatched Fake Kernel"]),
    ],
)
def test_draft_export_counts_the_issues_torch_reported(version: str, expected: list) -> None:
    path = fixture(version, "export_draft")
    raw = path.read_text(encoding="utf-8")
    if version == "2.6":
        assert raw.count('{"missing_fake_kernel"') == 2  # logged once per traced graph
    else:
        assert raw.count('{"guard_added"') == 1
    issues = export_failures(load(path, export_mode=True))
    assert [f.type for f in issues] == expected
    assert issues[0].expr == "u0 > 2"


@pytest.mark.slow
def test_2_6_draft_export_report_page_says_four_issues(tmp_path: Path) -> None:
    from tlsite.cli import build

    out = tmp_path / "site"
    build(str(fixture("2.6", "export_draft")), out, export_mode=True, make_zip=False)
    facts = {}
    for rows in tables((out / "index.html").read_text(encoding="utf-8")):
        facts.update({r[0].text: r[1].text for r in rows if len(r) == 2})
    assert facts["Draft export"] == "4 issues found"
    assert facts["Issues by kind"] == (
        "1 × Data Dependent Error, 1 × Missing Fake Kernel, 2 × Mismatched Fake Kernel"
    )


# -- dynamic shapes: user code when torch logs `user_stack: []` ---------------------------------
@pytest.mark.slow
def test_2_15_unbacked_guards_show_the_users_line(sites) -> None:
    """torch 2.15 logs `user_stack: []` on the guards of the unbacked u0; its `stack` starts
    in the user's script, at the call of the compiled function."""
    raw = DYNAMIC_215.read_text(encoding="utf-8")
    assert re.search(r'"guard_added_fast": \{"expr": "u0 >= 1", "user_stack": \[\]', raw)
    page = article_text(sites.get(DYNAMIC_215).page("symbolic_shapes.html"))
    call = script_line(SCRIPTS / "dynamic_shapes.py", "take_positive(a, torch.tensor(2))")
    assert re.search(rf"guard u0 >= 1 at {re.escape(call)} ?: take_positive\(a", page), page


def test_each_strict_export_call_has_its_own_symbols() -> None:
    """2.15 strict export logs the symbols of every call under [0/0]: the good call's s6
    (value 3) and the constrained call's s6 (value 4, range [2, 16]) are two symbols, and the
    guard `Eq(s6, 4)` is on the second one only."""
    from tlsite.core.analysis.symbols import unit_symbols

    raw = fixture("2.15", "export_strict").read_text(encoding="utf-8")
    assert len(re.findall(r'\{"create_symbol": \{"symbol": "s6"', raw)) == 2
    group = unit_symbols(load(fixture("2.15", "export_strict")).unit("[0/0]"))
    assert group is not None
    s6 = [s for s in group.symbols if s.name == "s6"]
    assert [(s.value, s.range) for s in s6] == [("3", "[2, int_oo]"), ("4", "[2, 16]")]
    assert s6[0].constraints == []
    assert [c.expr for c in s6[1].constraints] == ["Eq(s6, 4)", "s6 = 4"]


@pytest.mark.slow
def test_export_mode_never_congratulates_a_trace_whose_exports_failed(tmp_path: Path) -> None:
    """`-e` on 2.15's non-strict export trace: no draft-export issue is logged, but two export
    calls raised (the script says so): neither page says "Congratulations"."""
    from tlsite.cli import build

    out = tmp_path / "site"
    build(str(fixture("2.15", "export")), out, export_mode=True, make_zip=False)
    for name in ("index.html", "export_report.html"):
        text = article_text((out / name).read_text(encoding="utf-8"))
        assert "Congratulations" not in text, name
        assert "2 export calls failed" in text or "2 torch.export calls failed" in text, name


HOSTILE = "<img src=x onerror=alert(1)>`[click](javascript:alert(2))"


def test_export_call_text_from_the_trace_is_escaped(tmp_path: Path) -> None:
    """What an export call's row quotes from the trace (source, range, value, error, the
    `export` record's payload) is shown as text, never markup."""
    from corpus import trace_lines

    from tlsite.cli import build

    ids = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    text = trace_lines({"str": ["/home/u/model.py", 0]})
    text += trace_lines({"str": ["/x/site-packages/torch/export/__init__.py", 1]})
    text += trace_lines({"export": {}, **ids}, HOSTILE)
    stack = [
        {"line": 3, "name": "<module>", "filename": 0},
        {"line": 9, "name": "export", "filename": 1},
    ]
    symbol = {"symbol": "s0", "val": HOSTILE, "vr": f"[2, {HOSTILE}]", "source": HOSTILE}
    text += trace_lines({"create_symbol": {**symbol, "stack": stack}, **ids})
    special = {"symbol": "s0", "sources": [HOSTILE], "value": HOSTILE, "reason": HOSTILE}
    text += trace_lines({"symbolic_shape_specialization": {**special, "stack": stack}, **ids})
    log = tmp_path / "hostile.log"
    log.write_text(text, encoding="utf-8")
    build(str(log), tmp_path / "site", make_zip=False)
    for name in ("index.html", "failures.html", "-_0_0_0/index.html"):
        page = (tmp_path / "site" / name).read_text(encoding="utf-8")
        assert "<img" not in page and 'href="javascript' not in page, name
    failures = article_text((tmp_path / "site" / "failures.html").read_text(encoding="utf-8"))
    assert "Constraint violation (inferred)" in failures and "onerror=alert(1)" in failures


@pytest.mark.slow
def test_2_15_export_calls_hang_in_the_stack_trie_under_their_call(sites) -> None:
    """No export call logs a dynamo_start stack; the good and the constrained call's records
    do log the Python stack that called torch.export, and the trie places them there."""
    site = sites.get(fixture("2.15", "export"))
    overview = article_text(site.page("index.html"))
    assert "No dynamo_start stacks were logged" not in overview
    trie = overview.split("Stack trie", 1)[1].split("How to read this report", 1)[0]
    for compile_id, text in (("[0/0]", CALLS["good"][0]), ("[2/0]", CALLS["constrained"][0])):
        where = version_line("2.15", "export", text)
        assert re.search(rf"{re.escape(compile_id)} .*{re.escape(where)} in <module>", trie), trie

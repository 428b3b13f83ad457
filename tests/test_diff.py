"""``tlsite diff``: what a user checks on the summary of real before/after pairs.

The pairs in tests/fixtures/traces/diff_*/ were made with torch from the scripts in
tests/fixtures/scripts/diff/ (see tests/fixtures/README.md).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tlsite.cli import main
from tlsite.core import load
from tlsite.core.analysis.diff import TraceDiff, diff_traces, failed_checks, parse_fail_on
from tlsite.core.analysis.fx_diff import graph_diff

TRACES = Path(__file__).parent / "fixtures" / "traces"


def side(scenario: str, which: str) -> str:
    return str(TRACES / f"diff_{scenario}" / f"{which}.log")


_CACHE: dict[tuple[str, str, str, str], TraceDiff] = {}


def compare(before: str, after: str, b: str = "before", a: str = "after") -> TraceDiff:
    key = (before, b, after, a)
    if key not in _CACHE:
        _CACHE[key] = diff_traces(load(side(before, b)), load(side(after, a)))
    return _CACHE[key]


def frame(diff: TraceDiff, function: str):
    return next(f for f in diff.frames if f.any.function == function)


# -- a graph break fixed ------------------------------------------------------------------------
def test_removing_the_print_is_a_graph_break_fixed():
    diff = compare("gbfix", "gbfix")
    assert [s.reason for s in diff.graph_breaks.fixed] == ["Failed to trace builtin operator"]
    assert diff.graph_breaks.fixed[0].where == "diff_gbfix.py:15"
    assert diff.graph_breaks.new == []
    # the resume function after the print is no longer compiled; step now succeeds at once
    assert frame(diff, "torch_dynamo_resume_in_step_at_15").after is None
    step = frame(diff, "step").compiles[0]
    assert (step.before.status, step.after.status) == ("break", "ok")
    assert not diff.regressions or all(f.kind == "compile_time" for f in diff.regressions)


def test_the_fixed_graph_gains_the_node_that_ran_after_the_break():
    step = frame(compare("gbfix", "gbfix"), "step").compiles[0]
    dynamo = next(g for g in step.graph_diffs() if g.name == "dynamo_output_graph")
    assert (dynamo.nodes_before, dynamo.nodes_after) == (2, 3)
    assert [n.target for n in dynamo.added] == ["y.sum"]
    assert dynamo.removed == [] and dynamo.changed == []


def test_swapping_sides_swaps_fixed_and_new():
    forward, backward = compare("gbfix", "gbfix"), compare("gbfix", "gbfix", "after", "before")
    assert [s.reason for s in backward.graph_breaks.new] == [
        s.reason for s in forward.graph_breaks.fixed
    ]
    assert backward.graph_breaks.fixed == []
    assert backward.verdict in ("worse", "mixed")
    assert any("new graph break" in f.text for f in backward.regressions)


# -- a recompile fixed by dynamic=True ----------------------------------------------------------
def test_dynamic_true_removes_the_recompile():
    diff = compare("dynamic", "dynamic")
    assert (diff.before.recompiles, diff.after.recompiles) == (1, 0)
    scale = frame(diff, "scale")
    assert scale.recompiles == (1, 0)
    assert "recompiles of scale (diff_dynamic.py): 1 → 0" in [f.text for f in diff.improvements]
    # the one AFTER compile (dynamic) is paired by its guards with BEFORE's dynamic recompile
    pairs = [
        (c.before.display if c.before else None, c.after.display if c.after else None)
        for c in scale.compiles
    ]
    assert ("[0/1]", "[0/0]") in pairs


def test_dynamic_compile_page_diffs_the_generated_code():
    scale = frame(compare("dynamic", "dynamic"), "scale")
    paired = next(c for c in scale.compiles if c.before and c.after)
    [(label, lines, _left_out)] = paired.code_diffs()
    assert label.endswith(".html") or label.endswith(".py")
    # the dynamic kernel takes the batch size as an argument: the static one had it built in
    assert any(ln.startswith("+") and "const int64_t ks0" in ln for ln in lines)
    assert any(ln.startswith("-") and "AOT ID: ['1_inference']" in ln for ln in lines)
    assert all("Guard latency" not in ln for ln in paired.guard_diff())


# -- a new graph break, with every line shifted ---------------------------------------------------
def test_new_graph_break_is_found_and_the_shifted_one_is_unchanged():
    diff = compare("newgb", "newgb")
    [new] = diff.graph_breaks.new
    assert (new.where, new.function) == ("diff_newgb.py:21", "mix")
    assert "zlib.crc32" in new.source
    [(old, same)] = diff.graph_breaks.unchanged
    assert (old.where, same.where) == ("diff_newgb.py:14", "diff_newgb.py:15")
    assert diff.graph_breaks.fixed == []
    assert diff.regressions[0].kind == "graph_break"  # worst first
    assert diff.verdict == "worse"


def test_frames_match_by_code_not_by_line():
    diff = compare("newgb", "newgb")
    block = frame(diff, "block")
    assert (block.before.first_line, block.after.first_line) == (12, 13)
    assert [f.label for f in diff.frames if f.before is None] == [
        "torch_dynamo_resume_in_mix (diff_newgb.py)"
    ]


# -- the same script under two torch versions ---------------------------------------------------
def test_two_torch_versions():
    diff = compare("versions", "versions")
    assert diff.before.torch_version.startswith("2.13")
    assert diff.after.torch_version.startswith("2.15")
    assert diff.verdict != "no change"
    # the same print break in both, no frame lost or gained
    assert len(diff.graph_breaks.unchanged) == 1 and not diff.graph_breaks.new
    assert all(f.before and f.after for f in diff.frames)
    assert diff.config  # the two torches log different config values


# -- identical inputs ---------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["gbfix", "newgb"])
def test_identical_inputs_say_no_change(scenario):
    diff = compare(scenario, scenario, "after", "after")
    assert diff.verdict == "no change"
    assert diff.regressions == [] and diff.improvements == []
    assert all(not c.guard_diff()[2:] for c in diff.compile_pages)


# -- --fail-on ----------------------------------------------------------------------------------
def test_fail_on_names_what_regressed():
    checks = parse_fail_on("graph-breaks,recompiles,failures,compile-time=+20%")
    assert checks["compile-time"] == pytest.approx(0.2)
    assert failed_checks(compare("newgb", "newgb"), {"graph-breaks": 0}) == [
        "graph-breaks: 1 new, 0 hit more often"
    ]
    assert failed_checks(compare("gbfix", "gbfix"), {"graph-breaks": 0}) == []
    assert failed_checks(compare("dynamic", "dynamic", "after", "before"), {"recompiles": 0})
    with pytest.raises(ValueError, match="unknown check"):
        parse_fail_on("graph-brakes")


# -- the command ---------------------------------------------------------------------------------
def test_cli_writes_site_json_and_zip(tmp_path, capsys):
    out = tmp_path / "d"
    code = main(
        ["diff", side("newgb", "before"), side("newgb", "after"), "-o", str(out), "--no-browser"]
    )
    assert code == 0
    said = capsys.readouterr().out
    assert "worse" in said and "new graph break" in said
    data = json.loads((out / "diff.json").read_text())
    assert data["schema"] == "tlsite.diff/1"
    assert [b["function"] for b in data["graph_breaks"]["new"]] == ["mix"]
    page = (out / "index.html").read_text()
    assert "New (1)" in page and "Unchanged (1)" in page
    assert 'http-equiv="Content-Security-Policy"' in page
    with zipfile.ZipFile(tmp_path / "d.zip") as bundle:
        names = bundle.namelist()
    assert "d/diff.json" in names and "d/index.html" in names
    compile_pages = sorted((out / "compiles").glob("*.html"))
    assert compile_pages and "Guards" in compile_pages[0].read_text()


def test_cli_fail_on_exit_code(tmp_path, capsys):
    args = ["diff", side("newgb", "before"), side("newgb", "after"), "--bundle", "none"]
    args += ["--no-browser", "--quiet", "--fail-on", "graph-breaks"]
    assert main([*args, "-o", str(tmp_path / "a")]) == 4
    assert "--fail-on graph-breaks: 1 new" in capsys.readouterr().err
    fixed = ["diff", side("gbfix", "before"), side("gbfix", "after"), "--bundle", "none"]
    fixed += ["--no-browser", "--quiet", "--fail-on", "graph-breaks,failures"]
    assert main([*fixed, "-o", str(tmp_path / "b")]) == 0
    with pytest.raises(SystemExit) as typo:  # before anything is read
        main([*args[:-1], "graph-brakes", "-o", str(tmp_path / "c")])
    assert typo.value.code == 2 and "unknown check 'graph-brakes'" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("bad_side", [0, 1])
def test_non_trace_input_is_one_error_line(tmp_path, capsys, bad_side):
    junk = tmp_path / "notes.txt"
    junk.write_text("this is not a trace\njust some text\n")
    paths = [side("gbfix", "before"), side("gbfix", "after")]
    paths[bad_side] = str(junk)
    code = main(["diff", *paths, "-o", str(tmp_path / "out"), "--no-browser", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("tlsite: error: ") and "notes.txt" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_missing_input_is_one_error_line(tmp_path, capsys):
    code = main(["diff", side("gbfix", "before"), str(tmp_path / "nope.log"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "nope.log" in err


def test_deterministic_site(tmp_path):
    for name in ("one", "two"):
        code = main(
            [
                "diff",
                side("newgb", "before"),
                side("newgb", "after"),
                "-o",
                str(tmp_path / name),
                "--bundle",
                "none",
                "--no-browser",
                "--quiet",
            ]
        )
        assert code == 0
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*"))
    assert files == sorted(p.relative_to(tmp_path / "two") for p in (tmp_path / "two").rglob("*"))
    for rel in files:
        if (tmp_path / "one" / rel).is_file():
            assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes()


def test_graph_diff_pairs_renamed_nodes_by_target():
    before = 'mul: "f32[4]" = x * 2;  x = None\nrelu: "f32[4]" = torch.relu(mul)\n'
    after = 'add: "f32[4]" = x + 1\nmul: "f32[4]" = add * 2\nrelu: "f32[4]" = torch.tanh(mul)\n'
    result = graph_diff("g", before, after)
    assert [n.target for n in result.added] == ["+"]
    assert [(a.target, b.target) for a, b in result.changed] == [("torch.relu", "torch.tanh")]
    assert result.removed == []


def test_two_ranks_of_one_job(tmp_path, capsys):
    job = Path(__file__).parents[2] / "shared" / "corpus" / "tlparse" / "inputs" / "multi_rank_logs"
    if not job.is_dir():
        pytest.skip("the shared corpus is not here")
    out = tmp_path / "ranks"
    code = main(["diff", str(job), "--ranks", "0,2", "-o", str(out), "--bundle", "none"])
    code_quiet = main(["diff", str(job), "--ranks", "0", "-o", str(tmp_path / "x"), "--quiet"])
    assert code == 0 and code_quiet == 2
    data = json.loads((out / "diff.json").read_text())
    assert data["before"]["source"].endswith("rank_0.log")
    assert data["after"]["source"].endswith("rank_2.log")


@pytest.mark.slow
def test_run_compare_writes_the_diff_beside_the_report(tmp_path, capsys):
    after = side("newgb", "after")
    command = ["sh", "-c", f'cp "{after}" "$TORCH_TRACE/dedicated_log_torch_trace_x.log"']
    out = tmp_path / "report"
    options = ["-o", str(out), "--bundle", "none", "--no-browser", "--quiet"]
    code = main(["run", *options, "--compare", side("newgb", "before"), "--", *command])
    assert code == 0
    data = json.loads((tmp_path / "report_diff" / "diff.json").read_text())
    assert data["verdict"] == "worse"
    gated = ["--overwrite", "--compare", side("newgb", "before"), "--fail-on", "graph-breaks"]
    assert main(["run", *options, *gated, "--", *command]) == 4
    assert [b["function"] for b in data["graph_breaks"]["new"]] == ["mix"]
    assert (out / "index.html").is_file()


@pytest.mark.browser
@pytest.mark.slow
def test_summary_and_compile_page_in_the_browser(tmp_path, open_site):
    out = tmp_path / "site"
    args = ["diff", side("gbfix", "before"), side("gbfix", "after"), "-o", str(out)]
    assert main([*args, "--bundle", "none", "--no-browser", "--quiet"]) == 0
    page, report = open_site(out / "index.html")
    fixed = page.locator("h3", has_text="Fixed (1)")
    assert fixed.is_visible()
    assert "Failed to trace builtin operator" in page.locator("table").nth(1).inner_text()
    page.get_by_role("link", name="[1/0] → [1/0]").first.click()
    page.wait_for_load_state()
    assert page.url.endswith("compiles/1_0.html")
    added = page.get_by_text("sum_1 = y.sum")
    assert added.first.is_visible()
    assert report.console_errors == [] and report.outside_requests == []
    assert report.dialogs == []


def test_a_cut_log_is_compared_and_its_damage_said(tmp_path, capsys):
    whole = Path(side("gbfix", "before")).read_bytes()
    cut = tmp_path / "cut.log"
    cut.write_bytes(whole[: whole.rindex(b"\n", 0, len(whole) // 2) + 1] + b'V1124 {"dyn')
    out = tmp_path / "d"
    args = ["diff", side("gbfix", "before"), str(cut), "-o", str(out), "--bundle", "none"]
    assert main([*args, "--no-browser", "--quiet", "--strict"]) == 3
    assert "--strict: a side has damaged input" in capsys.readouterr().err
    data = json.loads((out / "diff.json").read_text())
    assert data["before"]["parse"]["clean"] is True
    assert data["after"]["parse"]["clean"] is False and data["after"]["parse"]["problem"]
    assert "Parse health" in (out / "index.html").read_text()


def test_hostile_strings_in_both_sides_are_shown_as_text(tmp_path):
    from corpus import trace_lines
    from test_hostile_trace import CID0, hostile, hostile_trace, scan

    before = tmp_path / "before.log"
    before.write_text(hostile_trace(), encoding="utf-8")
    after = tmp_path / "after.log"
    changed = [
        trace_lines({"dynamo_output_graph": {}, **CID0}, f"{hostile('n1')} = {hostile('t1')}(x)"),
        trace_lines({"inductor_output_code": {"filename": "/tmp/ioc9.py"}, **CID0}, hostile("c2")),
    ]
    after.write_text(hostile_trace() + "".join(changed), encoding="utf-8")
    out = tmp_path / "d"
    assert main(["diff", str(before), str(after), "-o", str(out), "--no-browser", "--quiet"]) == 0
    pages = [p for p in out.rglob("*.html") if "assets" not in p.parts]
    assert len(pages) >= 3  # the summary, the 404 page and a compile page
    problems = []
    for page in pages:
        html = page.read_text(encoding="utf-8")
        problems += [f"{page.name}: {f}" for f in scan(html).found]
        if page.name != "404.html":
            assert 'http-equiv="Content-Security-Policy"' in html
    assert problems == []
    compile_page = (out / "compiles" / "0_0.html").read_text()  # frame 0's first compile
    assert "c2-end" in compile_page and "<script>alert" not in compile_page


def test_across_torch_versions_reworded_reasons_are_the_same_break():
    old = load(TRACES / "torch-2.6" / "graph_breaks.log")
    new = load(TRACES / "torch-2.15" / "graph_breaks.log")
    diff = diff_traces(old, new)
    assert diff.graph_breaks.new == [] and diff.graph_breaks.fixed == []
    pairs = {(b.reason, a.reason) for b, a in diff.graph_breaks.unchanged}
    assert ("Data-dependent jump", "Data-dependent branching") in pairs
    assert len(pairs) == 4
    # the recompile limit is one failure, however each torch names it
    limits = diff_traces(
        load(TRACES / "torch-2.6" / "recompiles.log"),
        load(TRACES / "torch-2.15" / "recompiles.log"),
    )
    assert limits.failures.new == [] and limits.failures.fixed == []
    assert len(limits.failures.unchanged) == 1


@pytest.mark.slow
def test_multi_rank_landing_links_each_diverging_pair_to_its_diff(tmp_path):
    from tlsite.cli import build

    job = Path(__file__).parents[2] / "shared" / "corpus" / "tlparse" / "inputs" / "multi_rank_logs"
    if not job.is_dir():
        pytest.skip("the shared corpus is not here")
    site = build(str(job), tmp_path / "site", bundle="none").site
    landing = (site / "index.html").read_text()
    assert "Diverging ranks compared" in landing
    # ranks 1 and 3 compiled what rank 0 did not: each is compared with rank 0
    for other in (1, 3):
        assert f'href="diff_0_{other}/index.html"' in landing
        data = json.loads((site / f"diff_0_{other}" / "diff.json").read_text())
        assert data["before"]["source"].endswith("rank_0.log")
        assert data["after"]["recompiles"] > data["before"]["recompiles"]


def test_a_recompile_storm_gets_a_bounded_number_of_compile_pages(monkeypatch):
    from tlsite.core.analysis import diff as diff_module
    from tlsite.core.render.diff_pages import render_pages

    monkeypatch.setattr(diff_module, "MAX_COMPILE_PAGES", 2)
    trace = TRACES / "recompiles" / "recompiles.log"
    diff = diff_traces(load(trace), load(trace))
    matched = [c for f in diff.frames for c in f.compiles if c.before and c.after]
    assert len(matched) == 6 and len(diff.compile_pages) == 2
    summary = render_pages(diff)[0].markdown
    assert "6 matched](#compiles) (2 with a page)" in summary


def test_compile_time_gate_ignores_noise_but_not_a_real_slowdown():
    noisy = compare("gbfix", "gbfix")  # 0.74 s → 0.93 s: +26% but 0.19 s
    assert noisy.seconds_share > 0.2
    assert failed_checks(noisy, {"compile-time": 0.2}) == []
    slower = compare("dynamic", "dynamic", "after", "before")  # 12.6 s → 18.1 s
    [message] = failed_checks(slower, {"compile-time": 0.2})
    assert message.startswith("compile-time: 12.64 s → 18.10 s (+43%)")

"""Event types and fields of newer torch releases, shown so that a user can read them.

- ``min_cut_information`` (activation checkpointing) from a real torch 2.15 trace
  (``fixtures/traces/min_cut``), ``triton_kernel_info`` from tlparse's real provenance inputs;
- the config snapshots of ``compilation_metrics`` stored and shown once, each compile id with
  its difference from the run's baseline;
- ``bytecode_dump`` and ``memoizer_artifacts``, which no torch here writes: records shaped as
  their producers write them are inserted into a real trace (see :func:`with_inserted_records`
  and the fixtures README), with an event type from the future that must still show.

Expected values come from the raw log lines and the fixture script, never from tlsite.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import json
import re
from pathlib import Path

import pytest
from corpus import CORPUS, FIXTURE_TRACES, TLPARSE_INPUTS
from test_site import BuiltSite, article, article_text, site_cache, tables, visible_text

from tlsite.core import load
from tlsite.core.analysis.config import RunConfig

MIN_CUT = FIXTURE_TRACES / "min_cut" / "min_cut.log"
SCRIPT = FIXTURE_TRACES.parent / "scripts" / "min_cut.py"
PROVENANCE = TLPARSE_INPUTS / "inductor_provenance_jit_cuda_log.txt"
BASE_215 = FIXTURE_TRACES / "torch-2.15" / "recompiles.log"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory):
    return site_cache(tmp_path_factory)


def raw_records(path: Path) -> list[tuple[dict, str | None]]:
    """Each record of a log as ``(envelope, payload)``, read without tlsite."""
    records: list[tuple[dict, str | None]] = []
    payload: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("\t"):
            if payload is not None:
                payload.append(line[1:])
            continue
        if payload is not None:
            records[-1] = (records[-1][0], "\n".join(payload))
        envelope = json.loads(line[line.index("] ") + 2 :])
        records.append((envelope, None))
        payload = [] if "has_payload" in envelope else None
    if payload is not None:
        records[-1] = (records[-1][0], "\n".join(payload))
    return records


def artifact_payload(path: Path, name: str) -> dict:
    for envelope, payload in raw_records(path):
        if envelope.get("artifact", {}).get("name") == name:
            return json.loads(payload or "")
    raise AssertionError(f"no {name} artifact in {path}")


def section(page_html: str, heading: str) -> str:
    """The visible text of the ``<h2>`` section whose heading starts with ``heading``."""
    for part in re.split(r"(?=<h2\b)", article(page_html)):
        text = visible_text(part)
        if text.startswith(heading):
            return text
    raise AssertionError(f"no section {heading!r}")


def unit_page(site: BuiltSite, dirname: str) -> str:
    return site.page(f"{dirname}/index.html")


# -- min_cut_information ------------------------------------------------------------------------
@pytest.mark.slow
def test_activation_checkpointing_decision_is_a_table_of_saved_and_recomputed_nodes(sites) -> None:
    raw = artifact_payload(MIN_CUT, "min_cut_information")
    saved = {raw["Recomputable Banned Nodes Order"][i] for i in raw["Knapsack Saved Nodes"]}
    recomputed = {
        raw["Recomputable Banned Nodes Order"][i] for i in raw["Knapsack Recomputed Nodes"]
    }
    assert saved and recomputed  # the fixture's budget makes the knapsack do both
    budget = re.search(r"activation_memory_budget=([0-9.]+)", SCRIPT.read_text()).group(1)

    page = unit_page(sites.get(MIN_CUT), "-_2_0_0")
    text = article_text(page)
    assert f"activation memory budget of {budget}" in text
    assert f"it saves {len(saved)} and recomputes {len(recomputed)}" in text
    rows = next(t for t in tables(page) if t[0][0].text == "Activation")
    decisions = {row[0].text: row[5].text for row in rows[1:]}
    assert decisions == {**dict.fromkeys(saved, "saved"), **dict.fromkeys(recomputed, "recomputed")}
    # the user's line the activation came from (the script's Block.forward)
    forward_line = next(
        n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if "return self.b(" in line
    )
    assert {row[6].text for row in rows[1:]} == {f"min_cut.py:{forward_line} in forward"}


def test_activation_checkpointing_decision_is_searchable(sites) -> None:
    site = sites.get(MIN_CUT)
    index = json.loads(site.page("search/search_index.json"))
    hits = [
        d["location"] for d in index["docs"] if "Activation checkpointing decision" in d["text"]
    ]
    assert hits and all(h.startswith("-_2_0_0/") for h in hits), hits


# -- config snapshots ---------------------------------------------------------------------------
def test_compile_page_shows_only_its_difference_from_the_runs_baseline_config(sites) -> None:
    site = sites.get(MIN_CUT)
    metrics = [
        e["compilation_metrics"] for e, _ in raw_records(MIN_CUT) if "compilation_metrics" in e
    ]
    budgets = [json.loads(m["functorch_config"])["activation_memory_budget"] for m in metrics]
    assert budgets[0] == budgets[1] != budgets[2]  # two default compiles, then the patched one

    changed = section(unit_page(site, "-_2_0_0"), "Config")
    assert "activation_memory_budget" in changed
    assert f"{budgets[0]} {budgets[2]}" in changed.replace("|", " ")  # baseline, then this one
    page = unit_page(site, "-_2_0_0")
    rows = next(
        t for t in tables(page) if [c.text for c in t[0]][1:] == ["Baseline", "This compile"]
    )[1:]
    assert [[c.text for c in r] for r in rows] == [
        ["functorch (AOTAutograd): activation_memory_budget", str(budgets[0]), str(budgets[2])]
    ]
    for dirname in ("-_0_0_0", "-_1_0_0"):
        assert "Same as the run's baseline config" in section(unit_page(site, dirname), "Config")


def test_a_config_snapshot_is_on_one_page_and_in_the_search_once(sites) -> None:
    """The ~90 kB of config each record repeats is shown once, on the Config page."""
    site = sites.get(MIN_CUT)
    metrics = next(
        e["compilation_metrics"] for e, _ in raw_records(MIN_CUT) if "compilation_metrics" in e
    )
    setting = "accumulated_recompile_limit"
    value = json.loads(metrics["dynamo_config"])[setting]
    config = tables(site.page("config.html"))
    assert [str(value)] == [r[1].text for t in config for r in t if r[0].text == setting]
    pages = [p for p in site.site.rglob("*.html") if setting in p.read_text(encoding="utf-8")]
    assert [p.relative_to(site.site).as_posix() for p in pages] == ["config.html"]
    index = json.loads(site.page("search/search_index.json"))
    assert [d["location"] for d in index["docs"] if setting in d["text"]] == [
        "config.html#dynamo_config"
    ]


def test_each_distinct_config_snapshot_is_kept_once() -> None:
    trace = load(MIN_CUT)
    records = [m for u in trace.units.values() for m in u.metrics if m.configs]
    assert len(records) == 6  # forward and backward metrics of three compiles
    refs = {ref for m in records for ref in m.configs.values()}
    raw = {
        e[kind][name]
        for e, _ in raw_records(MIN_CUT)
        for kind in ("compilation_metrics", "bwd_compilation_metrics")
        if kind in e
        for name in ("dynamo_config", "inductor_config", "functorch_config", "compiler_config")
        if e[kind].get(name)
    }
    assert {ref.md5 for ref in refs} == {hashlib.md5(t.encode()).hexdigest() for t in raw}
    assert len(refs) < len(records)
    for m in records:  # the metrics record itself keeps no snapshot, but all else
        assert "inductor_config" not in m.meta and "end_time_us" in m.meta


def test_a_dynamic_true_compile_and_a_default_one_differ_in_one_dynamo_setting(sites) -> None:
    path = FIXTURE_TRACES / "dynamic_shapes" / "dynamic_shapes.log"
    site = sites.get(path)
    config_rows = [
        r for t in tables(site.page("config.html")) for r in t if r and r[0].text.startswith("[")
    ]
    # norm_rows ([0/0], dynamic=True) and take_positive ([1/0]) tie at one compile each: the
    # earlier one's config is the baseline
    metrics = [e["compilation_metrics"] for e, _ in raw_records(path) if "compilation_metrics" in e]
    static = [json.loads(m["dynamo_config"])["assume_static_by_default"] for m in metrics]
    assert static == [False, True]
    assert [[c.text for c in r] for r in config_rows] == [
        ["[1/0] take_positive", "Dynamo: assume_static_by_default", "false", "true"]
    ]


def test_older_torch_gets_its_functorch_config_from_aotautograds_artifact(sites) -> None:
    path = FIXTURE_TRACES / "torch-2.10" / "recompiles.log"
    assert "functorch_config" not in path.read_text(encoding="utf-8")
    text = article_text(sites.get(path).page("config.html"))
    assert "torch._functorch.config" in text and "activation_memory_budget" in text
    # torch 2.4 logs no config at all: no Config page (nor section) claims one
    assert not RunConfig(load(FIXTURE_TRACES / "torch-2.4" / "recompiles.log"))


# -- parameter counts and kernel compile times -------------------------------------------------
def test_compile_summary_counts_the_parameters(sites) -> None:
    metrics = [
        e["compilation_metrics"] for e, _ in raw_records(MIN_CUT) if "compilation_metrics" in e
    ]
    numel, count = metrics[2]["param_numel"], metrics[2]["param_count"]
    assert numel == 2 * 2 * (64 * 64 + 64)  # two Blocks of two Linear(64, 64) in the script
    summary = section(unit_page(sites.get(MIN_CUT), "-_2_0_0"), "Summary")
    assert f"Parameters {numel:,} elements" in summary.replace("|", " ")
    assert f"in {count} tensors" in summary


@pytest.mark.skipif(not PROVENANCE.is_file(), reason="corpus missing")
def test_triton_kernel_info_is_a_table_of_kernel_compile_times(sites) -> None:
    raw = artifact_payload(PROVENANCE, "triton_kernel_info")
    page = unit_page(sites.get(PROVENANCE), "-_0_0_0")
    rows = next(t for t in tables(page) if t[0][0].text == "Kernel" and len(t[0]) == 4)
    shown = {row[0].text: (row[1].text, row[2].text) for row in rows[1:]}
    expected = {
        name: (f"{info['compile_time_us'] / 1000:.1f} ms", info["autotune_cache_state"])
        for name, info in raw.items()
    }
    assert shown == expected
    slowest = max(raw, key=lambda k: raw[k]["compile_time_us"])
    assert rows[1][0].text == slowest


# -- records no torch here writes, inserted into a real trace ----------------------------------
def _record(time: str, envelope: dict, payload: str) -> str:
    """One record as torch's structured logger writes it: glog header, JSON, tab-indented
    payload lines, ``has_payload`` the MD5 of the payload text."""
    envelope = {**envelope, "has_payload": hashlib.md5(payload.encode()).hexdigest()}
    head = f"V1123 {time} 4970 torch/_dynamo/convert_frame.py:1] {json.dumps(envelope)}"
    return head + "".join(f"\n\t{line}" for line in payload.split("\n")) + "\n"


def _f(x, mode, scale):  # the fixture script's f (its bytecode is dumped below)
    y = x * scale
    return y.sum(-1)


#: Inductor's memoizer cache as torch 2.15 dumps it (interfaces.CacheDump: collections by sub
#: key, each entry the encoded parameters and result; should_pad_memoizer's sub key).
MEMOIZER = {
    "collections": {
        "should_pad": {
            "3f1c0c7a9b2e4d5f8a6b1c2d3e4f5a6b": {
                "params": {
                    "mat1": {"shape": [32, 64], "stride": [64, 1], "dtype": "torch.float32"},
                    "mat2": {"shape": [64, 64], "stride": [1, 64], "dtype": "torch.float32"},
                    "op": "aten.addmm",
                    "input": None,
                    "mat1_exclude_padding_time": False,
                    "mat2_exclude_padding_time": False,
                    "fp32_precision": "ieee",
                },
                "result": False,
            }
        }
    },
    "cache_size": 1,
}
FUTURE = "future_event_from_torch_3"


@functools.cache
def with_inserted_records(folder: Path) -> Path:
    """The real torch 2.15 recompiles trace with records no torch here writes: a
    ``bytecode_dump`` of [0/0] (``co_name`` and ``bytecode_type``, as tlparse 0.4.8 reads
    them) before and after Dynamo's rewrite, a ``memoizer_artifacts`` record, and an event
    type no torch writes yet. The trace's own lines are unchanged."""
    lines = BASE_215.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if '"dynamo_start"' in line)
    cid = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    code = dis.Bytecode(_f).dis().rstrip("\n")
    inserted = [
        _record(
            "21:59:55.914500",
            {"bytecode_dump": {"co_name": "f", "bytecode_type": "original"}, **cid},
            code,
        ),
        _record(
            "21:59:55.914600",
            {"bytecode_dump": {"co_name": "f", "bytecode_type": "modified"}, **cid},
            code,
        ),
        _record("21:59:55.914700", {FUTURE: {"what": "something new"}, **cid}, "new payload"),
    ]
    out = lines[: start + 1] + inserted + lines[start + 1 :]
    out.append(_record("21:59:59.000000", {"memoizer_artifacts": {}}, json.dumps(MEMOIZER)))
    path = folder / "inserted.log"
    path.write_text("".join(out), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def inserted(tmp_path_factory: pytest.TempPathFactory, sites) -> BuiltSite:
    return sites.get(with_inserted_records(tmp_path_factory.mktemp("inserted")))


@pytest.mark.slow
def test_bytecode_dump_is_shown_as_the_functions_bytecode(inserted: BuiltSite) -> None:
    text = article_text(unit_page(inserted, "-_0_0_0"))
    assert "Bytecode of f (original)" in text and "Bytecode of f (modified)" in text
    first_op = next(iter(dis.Bytecode(_f))).opname
    assert first_op in text
    trace = load(inserted.trace)
    assert not trace.stats.unknown_events.get("bytecode_dump")
    assert trace.stats.skipped_lines == 0 and not trace.stats.findings.get("md5_mismatch")


def test_memoizer_cache_is_a_table_of_its_entries(inserted: BuiltSite) -> None:
    pages = [
        p for p in inserted.site.rglob("index.html") if "memoizer" in p.read_text(encoding="utf-8")
    ]
    assert pages
    page = pages[0].read_text(encoding="utf-8")
    assert "Inductor memoizer cache" in article_text(page)
    rows = next(t for t in tables(page) if t[0][0].text == "Collection")
    assert [(r[0].text, r[3].text) for r in rows[1:]] == [("should_pad", "false")]
    assert '"fp32_precision": "ieee"' in rows[1][2].text


def test_an_event_type_from_the_future_still_shows_generically(inserted: BuiltSite) -> None:
    health = article_text(inserted.page("health.html"))
    assert "Event types without a special view" in health and f"{FUTURE} × 1" in health
    other = section(unit_page(inserted, "-_0_0_0"), "Other records")
    assert FUTURE in other and "something new" in other


# -- every fixture: nothing a user wants to read is left without a view ------------------------
def every_fixture() -> list[Path]:
    traces = sorted(FIXTURE_TRACES.glob("**/*.log"))
    traces += sorted((CORPUS / "tlparse-0.4.8" / "inputs").glob("*.log"))
    return [p for p in traces if p.stat().st_size]


#: JSON artifacts shown as raw JSON only, each for a reason: cache-key details (their
#: hit/miss is in the artifact title and the summary's Caches row), the provenance mappings
#: (read by the provenance pages), the torch version (on the overview), vLLM's config (on the
#: vLLM page), the recompile reasons (read into "Why it recompiled"), AOTAutograd's wrapper
#: details.
RAW_JSON_ON_PURPOSE = {
    "aotautograd_cache_bypass",
    "aotautograd_cache_hit",
    "aotautograd_cache_miss",
    "fx_graph_cache_bypass",
    "fx_graph_cache_hit",
    "fx_graph_cache_miss",
    "inductor_provenance_tracking_kernel_stack_traces",
    "inductor_provenance_tracking_node_mappings",
    "torch_version",
    "vllm_compilation_config",
    "vllm_piecewise_compile_start",
    "aot_autograd_runtime_wrappers",
    "runtime_wrapper_orchestration",
    "recompile_reasons",
}


@pytest.mark.slow
def test_no_fixture_has_an_event_type_or_json_artifact_without_a_view() -> None:
    """The Parse health page of every fixture lists no event type as "no special view", and
    every JSON artifact is either read into tables or on the list of raw ones above."""
    from tlsite.core.render.pages import DETAIL_READERS

    generic: dict[str, set[str]] = {}
    raw_json: set[str] = set()
    for path in every_fixture():
        trace = load(path)
        for name in trace.stats.unknown_events:
            generic.setdefault(name, set()).add(path.name)
        for unit in trace.units.values():
            for a in unit.artifacts:
                if a.kind == "artifact" and a.encoding == "json" and a.name not in DETAIL_READERS:
                    raw_json.add(a.name)
        trace.close()
    assert generic == {}
    assert raw_json <= RAW_JSON_ON_PURPOSE, raw_json - RAW_JSON_ON_PURPOSE

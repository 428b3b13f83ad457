"""The diff's verdict says "no change" only when nothing a user reads differs."""

from __future__ import annotations

from pathlib import Path

from corpus import CORPUS

from tlsite.core import load
from tlsite.core.analysis.diff import diff_traces

JOB = CORPUS / "torch-2.13" / "multi_rank"


def _rank(n: int) -> Path:
    return next(JOB.glob(f"dedicated_log_torch_trace_rank_{n}_*.log"))


def test_two_ranks_whose_cache_use_differs_are_not_no_change() -> None:
    before, after = load(_rank(0)), load(_rank(1))
    try:
        diff = diff_traces(before, after)
        assert diff.before.cache != diff.after.cache  # the ranks hit the cache differently
        assert diff.verdict != "no change"
        assert diff.as_json()["cache"]["before"] != diff.as_json()["cache"]["after"]
    finally:
        before.close()
        after.close()

"""bench_sched's side-by-side table: figures and ratios to the baseline in
columns wide enough for the schedulers' names, and only the parts run."""

from __future__ import annotations

from braid_eval.bench_sched import comparison_table


def test_table_has_ratios_and_only_the_parts_run() -> None:
    results = {"default": {"lossy_rr_p50_ms": 24.0, "lossy_rr_p99_ms": 230.0},
               "redundant": {"lossy_rr_p50_ms": 24.0, "lossy_rr_p99_ms": 62.1}}
    header, *rows = comparison_table(results, ["default", "redundant"])
    assert header.split() == ["metric", "default", "redundant", "redundant/default"]
    assert len(rows) == 2  # the lossy part only
    p99 = rows[1]
    assert p99.startswith("1 KiB rr p99, 1% loss (ms)")
    assert p99.split()[-3:] == ["230.00", "62.10", "0.27"]

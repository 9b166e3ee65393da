"""The side-by-side benchmark tables (terminal and RESULTS.md): figures and
ratios to the baseline, only the parts run, a zero baseline without a
ratio, and qualifying rows named in Markdown."""

from __future__ import annotations

import pytest

from braid_eval.bench.comparison import markdown_table, paired_ratio, text_table
from braid_eval.bench.sched import ROWS as SCHED_ROWS

LOSSY = {"default": {"lossy_rr_p50_ms": 24.0, "lossy_rr_p99_ms": 230.0},
         "redundant": {"lossy_rr_p50_ms": 24.0, "lossy_rr_p99_ms": 62.1}}


def test_text_table_has_ratios_and_only_the_parts_run() -> None:
    header, *rows = text_table(LOSSY, ["default", "redundant"], SCHED_ROWS)
    assert header.split() == ["metric", "default", "redundant", "redundant/default"]
    assert len(rows) == 2  # the lossy part only
    p99 = rows[1]
    assert p99.startswith("1 KiB rr p99, 1% loss (ms)")
    assert p99.split()[-3:] == ["230.00", "62.10", "0.27"]


def test_a_zero_baseline_has_no_ratio() -> None:
    results = {"default": {"join_waits": 0.0}, "hywf": {"join_waits": 12.0}}
    rows = [("first flights held for a join", "join_waits")]
    assert text_table(results, ["default", "hywf"], rows)[1].split()[-1] == "-"
    assert markdown_table(results, ["default", "hywf"], rows)[2].endswith("| 0.00 | 12.00 | - |")


def test_markdown_names_the_row_a_qualifying_row_belongs_to() -> None:
    results = {"default": {"upload_mbit": 50.0, "upload_capacity": 0.9},
               "hywf": {"upload_mbit": 40.0, "upload_capacity": 0.72}}
    lines = markdown_table(results, ["default", "hywf"], SCHED_ROWS)
    assert lines[0] == "| metric | default | hywf | hywf/default |"
    assert lines[3] == "| upload goodput, of WAN capacity | 0.90 | 0.72 | 0.80 |"
    # The terminal keeps the indent instead.
    assert text_table(results, ["default", "hywf"], SCHED_ROWS)[2].startswith("  of WAN capacity")


def test_paired_ratio_takes_each_item_against_its_own_baseline() -> None:
    base = [0.2 * (i + 1) for i in range(40)]  # items of very different sizes
    r = paired_ratio([1.1 * b for b in base], base)
    assert (round(r.median, 6), round(r.low, 6), round(r.high, 6), r.items) == (1.1, 1.1, 1.1, 40)


def test_paired_ratio_interval_is_the_binomial_order_statistics() -> None:
    # ratios 1..40 in any order: the 95 % interval of the median of 40 is
    # the 14th to the 27th (P(Bin(40, 1/2) <= 13) = 0.019, <= 14: 0.040)
    base = [1.0] * 40
    r = paired_ratio([float(v) for v in reversed(range(1, 41))], base)
    assert (r.median, r.low, r.high) == (20.5, 14.0, 27.0)
    # too few items for 95 %: the whole range
    few = paired_ratio([3.0, 1.0, 2.0], [1.0] * 3)
    assert few == paired_ratio([1.0, 2.0, 3.0], [1.0] * 3)
    assert (few.low, few.high) == (1.0, 3.0)


@pytest.mark.parametrize(("values", "base"), [([1.0], [1.0, 2.0]), ([], []), ([1.0], [0.0])])
def test_paired_ratio_refuses_what_has_no_ratio(values: list[float], base: list[float]) -> None:
    with pytest.raises(ValueError):
        paired_ratio(values, base)

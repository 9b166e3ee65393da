"""E1b's pieces that need no emulated link: Binder's schedule, goodput bins
from the receiver's progress lines, the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from braid_eval.experiments import timevarying as e1b


def test_schedule_is_binders_table_2_scaled() -> None:
    steps = e1b.schedule(1 / 3)
    assert len(steps) == 12 and steps[0][:2] == (0.0, 42.5) and steps[0][2] == pytest.approx(1e-5)
    assert steps[-1][0] == pytest.approx(12.0) and steps[-1][2] == 100.0  # total loss at 36 s
    assert e1b.duration(1.0) == 39.0 and e1b.duration(1 / 3) == pytest.approx(15.0)  # total loss: 3 s


def test_goodput_bins_interpolate_the_receivers_samples() -> None:
    # 1.25 MB/s for 4 s (10 Mbit/s), then nothing more arrives.
    samples = [(100.0 + t / 4, int(312_500 * t)) for t in range(17)]
    bins = e1b.goodput_bins(samples, 100.0, 6.0, 1.0)
    assert bins[:4] == [pytest.approx(10.0)] * 4 and bins[4:] == [0.0, 0.0]
    assert e1b.goodput_bins(samples, 100.0, 2.0, 0.5) == [pytest.approx(10.0)] * 4


def test_progress_follows_the_upload_that_began_after_a_time(tmp_path: Path) -> None:
    """The previous run's upload, stopped just before, writes its last line late: not ours."""
    path = tmp_path / "progress.txt"
    path.write_text("10.0 40000 5\n20.0 40000 7\n21.0 40002 1\n22.0 40000 9\n23.0 40002 4\n")
    assert e1b.read_progress(path, 15.0) == [(21.0, 1), (23.0, 4)]
    assert e1b.read_progress(path, 30.0) == [] and e1b.read_progress(tmp_path / "none", 0) == []
    assert e1b.delivered_between([(0.0, 0), (2.0, 2_500_000)], 0.0, 1.0) == pytest.approx(10.0)


def test_report_has_a_row_per_step_and_the_published_shape() -> None:
    runs = [e1b.Run(c, 1.0, [9.0] * 39, [float(i) for i in range(12)]) for c in ("tcp-gw1", "default")]
    text = e1b.report(runs, {"time_scale": 1.0, "kernel": "k", "braid": "b", "date": "d"})
    assert text.count("\n| ") >= 13 and "| 36 | 110 | 1 | 11.0 | 11.0 |" in text
    assert "collapses soon after 30 s" in text

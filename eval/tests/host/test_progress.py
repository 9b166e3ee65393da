"""Progress of long work: n/N and an ETA on stderr, so stdout (a report,
JSON) stays clean; quiet when asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from braid_eval.progress import Progress, duration, eta
from braid_wf import cli as wf
from braid_wf.synth import synthetic_dataset
from braid_wf.trace import save_dataset


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_steps_print_n_of_total_and_an_eta_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    p = Progress("e1", 4, clock=clock)
    clock.now += 30
    p.step("lossless")
    clock.now += 30
    p.step()
    clock.now += 90
    p.step(n=2)
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["e1 [1/4] lossless (30 s, ETA 1 min 30 s)",
                                "e1 [2/4] (1 min 00 s, ETA 1 min 00 s)",
                                "e1 [4/4] (2 min 30 s)"]


def test_work_done_before_this_run_is_not_in_the_rate(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    p = Progress("hywf:", 100, done=90, clock=clock)
    clock.now += 20
    p.step("loads", n=5)
    assert capsys.readouterr().err == "hywf: [95/100] loads (20 s, ETA 20 s)\n"


def test_quiet_prints_nothing_and_every_throttles(capsys: pytest.CaptureFixture[str]) -> None:
    Progress("x", 2, quiet=True).step()
    assert capsys.readouterr().err == ""
    clock = Clock()
    p = Progress("pages", 5, every=10, clock=clock)
    for _ in range(5):
        clock.now += 3
        p.step()
    # the first line, the next 10 s after it, and the last
    assert [ln.split(" (")[0] for ln in capsys.readouterr().err.splitlines()] == [
        "pages [1/5]", "pages [5/5]"]
    lines: list[str] = []
    clock = Clock()
    p = Progress("pages", 9, every=10, clock=clock, sink=lines.append)
    for _ in range(9):
        clock.now += 3
        p.step()
    assert [ln.split(" (")[0] for ln in lines] == ["pages [1/9]", "pages [5/9]", "pages [9/9]"]


def test_durations() -> None:
    assert [duration(s) for s in (0.4, 59, 61, 3599, 3720)] == ["0 s", "59 s", "1 min 01 s", "59 min 59 s",
                                                                "1 h 02 min"]
    assert eta(0, 5, 10) == "ETA unknown"


def test_wf_evaluate_reports_reps_with_an_eta_on_stderr_and_the_report_on_stdout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_dataset(synthetic_dataset(5, 6, seed=8), tmp_path / "orig")
    assert wf.main(["evaluate", "--data", str(tmp_path / "orig"), "--attacks", "cumul", "--repeats", "2"]) == 0
    out, err = capsys.readouterr()
    assert "cumul rep 1/2:" in err and "ETA" in err and "cumul rep 2/2:" in err
    assert "rep 1/2" not in out and out.lstrip().startswith("#")

"""`wf defenses` writes its JSON, Markdown and plot (quick mode, a tiny
corpus, k-FP: seconds), the same results with one worker process or two,
a deadline skips cells and says so, a deep attack's learning curve is
kept in the JSON, a split defence's accuracy is kept by network 1's
share of the load, and k-FP's open-world neighbours from the sparse leaf
product are those of the pairwise leaf comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from braid_wf import cli
from braid_wf.attacks import UNMONITORED, KFingerprinting, kfp_features
from braid_wf.compare import SHARE_BANDS, Cell, DefenseResult, accuracy_by_share, share_band_names, to_json
from braid_wf.defences import adaptive_padding, hywf_sim
from braid_wf.synth import synthetic_dataset

TINY = ["defenses", "--sites", "4", "--instances", "6", "--unmonitored", "12", "--repeats", "1",
        "--copies", "1", "--defenses", "none,hywf,ap"]


def run(tmp_path: Path, name: str, *extra: str) -> dict[str, Any]:
    out = tmp_path / name
    assert cli.main([*TINY, "--json", str(out / "r.json"), "--plot", str(out / "r.png"),
                     "--report", str(out / "r.md"), *extra]) == 0
    doc: dict[str, Any] = json.loads((out / "r.json").read_text())
    return doc


def test_json_markdown_and_plot_in_quick_mode(tmp_path: Path) -> None:
    doc = run(tmp_path, "two", "--jobs", "2")
    assert doc["meta"]["complete"] and doc["meta"]["attacks"] == ["kfp"] and doc["meta"]["traces"] == 36
    # what RESULTS.md needs to say which simulators made the table
    assert doc["meta"]["hywf_split"] == hywf_sim.SPLIT_MODEL
    assert doc["meta"]["padding_model"] == adaptive_padding.PADDING_MODEL
    assert doc["meta"]["params"]["ncons"] == hywf_sim.NCONS
    res = doc["results"]
    assert list(res) == ["none", "hywf", "ap"]
    assert res["none"]["overhead"] == res["hywf"]["overhead"] == 0.0 and res["ap"]["overhead"] > 0
    for name, r in res.items():
        closed, opened = r["closed"]["kfp"], r["open"]["kfp"]
        assert closed["repeats_done"] == opened["repeats_done"] == 1 and closed["skipped"] is None
        assert 0 <= closed["accuracy_mean"] <= 1 and len(opened["fpr"]) == 1
        assert opened["recall_mean"] == opened["tpr_mean"] and "precision_mean" in opened
        assert (name == "none") == (closed["tpr_on_originals"] == [])
    # the split's cell by network 1's share, every closed-world test load in one band, and its total the TPR
    bands = res["hywf"]["closed"]["kfp"]["by_share"]
    assert [b["share_from"] for b in bands] == list(SHARE_BANDS)
    test_loads = res["hywf"]["closed"]["kfp"]["test_size"]
    assert sum(b["loads"] for b in bands) == test_loads
    assert sum(b["right"] for b in bands) == round(res["hywf"]["closed"]["kfp"]["tpr_mean"] * test_loads)
    # nothing to band where one network carries everything, nor in the open world
    assert all("by_share" not in res[n]["closed"]["kfp"] for n in ("none", "ap"))
    assert all("by_share" not in r["open"]["kfp"] for r in res.values())
    md = (tmp_path / "two" / "r.md").read_text()
    assert "| hywf |" in md and "precision@0.1 / recall" in md
    png = (tmp_path / "two" / "r.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    # The protections are seeded per trace: one worker or two, the same results.
    assert scores(run(tmp_path, "one", "--jobs", "1")["results"]) == scores(res)


def scores(res: dict[str, Any]) -> dict[str, Any]:
    """The results without the seconds they took."""
    return {n: {k: ({a: {f: v for f, v in c.items() if f != "seconds"} for a, c in w.items()}
                    if k in ("closed", "open") else w) for k, w in r.items()} for n, r in res.items()}


def test_a_burst_below_one_packet_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(tmp_path, "bad", "--ncons", "0")
    assert "--ncons >= 1" in capsys.readouterr().err


def test_one_run_compares_a_defence_at_several_settings(tmp_path: Path) -> None:
    """A row per named setting, each with its own protection: bursts longer
    than any load leave each direction whole on one network, so a load's
    network-1 share is 0, 1 or about one direction's bytes (the requests:
    a small part), never in the middle bands; the default's splits are."""
    doc = run(tmp_path, "sweep", "--defenses", "hywf,hywf:ncons=1000000")
    res = doc["results"]
    assert list(res) == ["hywf", "hywf:ncons=1000000"] and doc["meta"]["defences"] == list(res)
    middle = {n: sum(b["loads"] for b in r["closed"]["kfp"]["by_share"][1:-1]) for n, r in res.items()}
    assert middle["hywf:ncons=1000000"] == 0 < middle["hywf"]


def test_deadline_skips_cells_and_marks_them(tmp_path: Path) -> None:
    doc = run(tmp_path, "late", "--jobs", "1", "--deadline", "0")
    cells = [c for r in doc["results"].values() for w in ("closed", "open") for c in r[w].values()]
    assert cells and all(c["skipped"] and c["repeats_done"] == 0 for c in cells)
    assert "skipped (deadline" in (tmp_path / "late" / "r.md").read_text()


def test_accuracy_by_share_bands_edges_into_the_band_above() -> None:
    share = np.asarray([0.0, 0.19, 0.2, 0.5, 0.8, 1.0])
    right = np.asarray([True, False, True, True, False, True])
    assert accuracy_by_share(share, right) == [[2, 1], [1, 1], [1, 1], [0, 0], [2, 1]]
    assert share_band_names() == ["0-20 %", "20-40 %", "40-60 %", "60-80 %", "80-100 %"]


def test_kfp_open_world_neighbours_match_the_pairwise_comparison() -> None:
    ds = synthetic_dataset(5, 6, 15, seed=3)
    x = np.stack([kfp_features(t) for t in ds.traces])
    train, test = np.arange(0, len(x), 2), np.arange(1, len(x), 2)
    y = np.asarray(ds.labels)
    model = KFingerprinting(trees=50, open_world=True, seed=2)
    model.fit_features(x[train], list(y[train]))
    fast = model.predict_features(x[test])
    leaves = model.forest.apply(x[train])
    slow = []
    for row in model.forest.apply(x[test]):
        near = y[train][np.argsort(-(leaves == row).sum(axis=1), kind="stable")[:3]]
        slow.append(near[0] if (near == near[0]).all() else UNMONITORED)
    assert fast.tolist() == slow


def test_json_keeps_a_recorded_learning_curve_per_repeat() -> None:
    watched = Cell(tpr=[0.8], curves=[[(10, 0.5), (20, 0.8)]])
    plain = Cell(tpr=[0.7])
    res = to_json([DefenseResult("none", 0.0, 0.0, 0.0, closed={"df": watched, "kfp": plain})], ["df", "kfp"], 0.1)
    closed = res["none"]["closed"]
    assert closed["df"]["curve"] == [[[10, 0.5], [20, 0.8]]]
    assert "curve" not in closed["kfp"]
    json.dumps(res)  # plain JSON values

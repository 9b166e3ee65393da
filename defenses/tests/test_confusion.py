"""`wf confusion`: the tally of an attack's predictions, a pair of sites
that cannot be told apart found at the top, the alike-sites shares, and
the command's JSON and report (k-FP in quick mode on a tiny corpus:
seconds)."""

from __future__ import annotations

import json
from pathlib import Path

from braid_wf import cli
from braid_wf.confusion import Confusion, SiteShape, confusion, site_shape, tally
from braid_wf.synth import simulate_load, synthetic_dataset
from braid_wf.trace import Dataset, save_dataset


def test_tally_counts_each_pair_either_way_round() -> None:
    truth = [0, 0, 0, 1, 1, 2, 2, 2]
    predicted = [0, 1, 2, 0, 1, 2, 2, 0]
    per_site, pairs = tally(truth, predicted)
    assert per_site == {0: 1 / 3, 1: 1 / 2, 2: 2 / 3}
    assert pairs == [(0, 1, 2), (0, 2, 2)]


def test_two_labels_of_one_site_are_the_top_pair() -> None:
    """Label 1's loads are more loads of site 0: no attack can tell them
    apart, so the pair (0, 1) holds the most errors, about half of their
    test loads."""
    ds = synthetic_dataset(sites=6, instances=45, seed=3)
    for i, label in enumerate(ds.labels):
        if label == 1:
            ds.traces[i] = simulate_load(0, 1000 + i, seed=3)
    result = confusion(ds, "kfp", quick=True, seed=1)
    (a, b, n), *rest = result.pairs
    assert (a, b) == (0, 1)
    assert n >= 8 and all(n > m for _, _, m in rest)
    assert result.per_site[0] < 0.8 and result.per_site[1] < 0.8
    assert result.errors == round((1 - result.accuracy) * result.test)
    # every site has 15 test loads: its misses add up to the pairs' errors
    assert sum(round((1 - a) * 15) for a in result.per_site.values()) == result.errors


def test_alike_shares_count_errors_and_pairs() -> None:
    shapes = {0: SiteShape(5, 100.0), 1: SiteShape(6, 110.0), 2: SiteShape(20, 900.0)}
    c = Confusion("kfp", 10, 9, {0: 0.5, 1: 0.5, 2: 0.5}, [(0, 1, 3), (1, 2, 1)], shapes)
    assert c.alike_shares() == (3 / 4, 1 / 3)
    assert Confusion.from_json(json.loads(json.dumps(c.to_json()))) == c
    assert Confusion("kfp", 10, 9, {0: 0.5}, [(0, 1, 3)]).alike_shares() is None


def test_command_reads_the_generator_seed_beside_a_collected_corpus(tmp_path: Path) -> None:
    ds: Dataset = synthetic_dataset(sites=4, instances=9, seed=1)
    save_dataset(ds, tmp_path / "single" / "all")
    (tmp_path / "single" / "collection.json").write_text(json.dumps({
        "condition": "single", "loader": "synthetic", "host": True, "links": "unshaped", "seed": 1,
        "kernel": "test"}))
    out = tmp_path / "c.json"
    assert cli.main(["confusion", "--data", str(tmp_path / "single" / "all"), "--attack", "knn",
                     "--json", str(out), "--report", str(tmp_path / "c.md")]) == 0
    doc = json.loads(out.read_text())
    assert doc["meta"]["generator_seed"] == 1 and doc["meta"]["corpus"].startswith("captured corpus")
    result = Confusion.from_json(doc["confusion"])
    assert result.test == 12 and set(result.per_site) == {0, 1, 2, 3}
    assert result.shapes[2] == site_shape(2, 1)
    assert "| per-site accuracy |" in (tmp_path / "c.md").read_text()

"""`wf wirecheck`: an attack on captured protected traces beside the same
loads protected by the simulator. A "capture" that is not protected at all
must be told apart from the simulated hywf; one the simulator made of the
same loads must not; loads are matched by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from braid_wf import collection, wirecheck
from braid_wf.compare import observed
from braid_wf.conditions import CONDITIONS
from braid_wf.defences import catalog, hywf_sim
from braid_wf.synth import synthetic_dataset
from braid_wf.trace import Dataset, Trace, save_dataset

SITES, LOADS = 8, 12


def corpus() -> Dataset:
    return synthetic_dataset(SITES, LOADS, 0, seed=5)


def hywf_captures(ds: Dataset, seed: int) -> Dataset:
    """What a wire that splits as the simulator does would capture on network 1."""
    protect = observed(catalog.make_defense("hywf"))
    rng = np.random.default_rng(seed)
    return Dataset([protect(t, rng) for t in ds.traces], list(ds.labels), list(ds.names))


def test_simulator_names() -> None:
    assert wirecheck.simulator_of("hywf-ap-1conn") == "hywf-ap"
    assert wirecheck.simulator_of("hywf") == "hywf"
    # the long-burst condition's simulator bursts as its kernel setting does
    ncons = dict(CONDITIONS["hywf-long"].sysctls)["hywf_ncons"]
    assert catalog.parse_spec(wirecheck.simulator_of("hywf-long")) == ("hywf", {"ncons": ncons})
    assert ncons > hywf_sim.NCONS
    # and padded: HyWF-AP at the long burst, in the kernel and simulated
    padded = CONDITIONS["hywf-ap-long"]
    assert padded.padded and padded.drift and dict(padded.sysctls)["hywf_ncons"] == ncons
    assert catalog.parse_spec(wirecheck.simulator_of("hywf-ap-long")) == ("hywf-ap", {"ncons": ncons})
    try:
        wirecheck.simulator_of("default")
    except ValueError as err:
        assert "no simulator" in str(err)
    else:
        raise AssertionError("a condition without a defence has no simulator")
    assert wirecheck.proxy_histograms() is not None


def test_loads_are_matched_by_name() -> None:
    ds = corpus()
    wire = hywf_captures(ds, seed=9)
    order = list(reversed(range(len(wire.traces))))[: len(wire.traces) - 5]  # shuffled, 5 missing
    orig, got = wirecheck.matched(ds, wire.subset(order))
    assert len(orig.traces) == len(ds.traces) - 5
    assert orig.names == got.names
    assert orig.labels == got.labels


def test_an_unprotected_capture_fails_and_a_simulated_one_holds() -> None:
    ds = corpus()
    params = catalog.DefenseParams()
    # k-FP with its seeds fixed: the same figures on every run
    bare = wirecheck.check("hywf", ds, ds, "kfp", params=params, repeats=2, quick=True)
    assert bare.difference_points > 20 and not bare.holds, bare
    assert min(bare.undefended) > 0.5, bare  # the attack works on these loads
    alike = wirecheck.check("hywf", ds, hywf_captures(ds, seed=9), "kfp", params=params, repeats=2,
                            quick=True)
    assert alike.holds, alike
    rows = wirecheck.table([bare, alike])
    assert rows[2].startswith("| hywf | kfp | 96 | 2 |") and rows[2].endswith("| **no** (too few splits) |")


def test_a_difference_is_resolved_by_enough_consistent_splits() -> None:
    """The difference's standard error over paired splits; fewer than
    MIN_SPLITS splits, or splits that disagree, leave it unresolved."""
    steady = wirecheck.Check("hywf", "kfp", 600, wire=[0.40, 0.42] * 5, simulated=[0.43, 0.43] * 5)
    assert steady.difference_points == pytest.approx(-2.0) and steady.holds
    # differences -3, -1, ...: sd (10 / 9) ** 0.5 points over 10 splits
    assert steady.difference_se_points == pytest.approx((10 / 9) ** 0.5 / 10 ** 0.5) and steady.resolved
    few = wirecheck.Check("hywf", "kfp", 600, wire=[0.40, 0.42], simulated=[0.43, 0.43])
    assert few.holds and not few.resolved
    noisy = wirecheck.Check("hywf", "kfp", 600, wire=[0.30, 0.50] * 5, simulated=[0.40, 0.40] * 5)
    assert noisy.difference_se_points > wirecheck.RESOLVED_SE_POINTS and not noisy.resolved
    assert np.isnan(wirecheck.Check("hywf", "rf", 1, wire=[0.3], simulated=[0.3]).difference_se_points)
    rows = wirecheck.table([steady, noisy])
    assert rows[2] == ("| hywf | kfp | 600 | 10 | — | 41.0 ± 1.1 | 43.0 ± 0.0 | -2.0 ± 0.3 | yes |")
    assert rows[3].endswith("| yes (too few splits) |")
    more = wirecheck.Check("hywf", "kfp", 600, wire=[0.4] * 12, simulated=[0.4] * 12)
    other = wirecheck.Check("hywf-ap", "kfp", 600, wire=[0.4], simulated=[0.4])
    assert wirecheck.merged([steady, other], [more]) == [more, other]
    assert wirecheck.merged([other], [more]) == [other, more]


def test_cli_writes_json_and_exits_1_when_a_check_fails(tmp_path: Path) -> None:
    ds = corpus()
    save_dataset(ds, tmp_path / "hywf" / "all")
    save_dataset(ds, tmp_path / "hywf" / "wan1")  # not split: the check must fail
    out = tmp_path / "check.json"
    run = subprocess.run([sys.executable, "-m", "braid_wf", "wirecheck", "--root", str(tmp_path),
                          "--attacks", "kfp", "--repeats", "1", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    assert "| hywf | kfp | 96 |" in run.stdout
    data = json.loads(out.read_text())
    assert data["meta"]["tolerance_points"] == wirecheck.TOLERANCE_POINTS
    assert [c["attack"] for c in data["checks"]] == ["kfp"]
    # more splits for that attack, the file's other checks kept; a file made
    # with other settings is refused as bad input
    again = tmp_path / "again.json"
    more = subprocess.run([sys.executable, "-m", "braid_wf", "wirecheck", "--root", str(tmp_path),
                           "--attacks", "kfp", "--repeats", "2", "--update", str(out), "--json", str(again)],
                          capture_output=True, text=True, timeout=300)
    assert more.returncode == 1, more.stderr
    assert [len(c["wire"]) for c in json.loads(again.read_text())["checks"]] == [2]
    other = subprocess.run([sys.executable, "-m", "braid_wf", "wirecheck", "--root", str(tmp_path),
                            "--padding-budget", "0.3", "--update", str(out)], capture_output=True, text=True,
                           timeout=60)
    assert other.returncode == 2 and "made differently (padding_budget 0.4 there, 0.3 here)" in other.stderr
    bad = subprocess.run([sys.executable, "-m", "braid_wf", "wirecheck", "--root", str(tmp_path),
                          "--conditions", "default"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no simulator" in bad.stderr


def test_runs_are_counted_per_direction_across_networks() -> None:
    one = Trace(np.array([0.0, 1.0, 2.0, 4.0, 5.0]), np.array([100, 100, 100, 100, -1500]))
    two = Trace(np.array([3.0, 6.0]), np.array([100, -1500]))
    assert wirecheck.mean_runs([one, two], 1) == 5 / 3  # 1 1 1 | 2 | 1
    assert wirecheck.mean_runs([one, two], -1) == 1.0  # 1 | 2
    assert np.isnan(wirecheck.mean_runs([Trace(np.zeros(0), np.zeros(0, dtype=np.int64))], 1))


def captured(ds: Dataset, root: Path, condition: str, split: str, seed: int) -> None:
    """``ds`` as ``all`` and as both networks' captures under ``split``
    (times from each load's start, as collect writes them)."""
    defend = catalog.make_defense(split)
    save_dataset(ds, root / condition / "all")
    parts = [defend(t, np.random.default_rng((seed, i))).parts for i, t in enumerate(ds.traces)]
    for k, wan in enumerate(("wan1", "wan2")):
        save_dataset(Dataset([p[k] for p in parts], list(ds.labels), list(ds.names)), root / condition / wan)


def test_structure_tells_a_thinned_split_from_the_simulated_bursts(tmp_path: Path) -> None:
    """A wire that splits as the simulator does shows the simulator's runs;
    one that alternates packets shows runs of one packet."""
    ds = corpus()
    params = catalog.DefenseParams()
    captured(ds, tmp_path, "hywf", "hywf", seed=3)
    alike = wirecheck.structure("hywf", tmp_path, tmp_path / "hywf" / "all", ds.names, params)
    assert alike is not None and alike.loads == len(ds.traces)
    # Two samples of the simulator on these 96 loads differ: over 30 pairs
    # of seeds their mean runs were 4.1 or more and their ratio 0.66-1.51;
    # the thinned split below has runs of 1.
    for wire, sim in (alike.runs_up, alike.runs_down):
        assert sim > 3 and 0.5 < wire / sim < 2, alike
    assert alike.extra_packets == (0.0, 0.0) and alike.extra_bytes == (0.0, 0.0)
    assert alike.tail_s == (0.0, 0.0)
    captured(ds, tmp_path / "even", "hywf", "even", seed=3)
    thinned = wirecheck.structure("hywf", tmp_path / "even", tmp_path / "hywf" / "all", ds.names, params)
    assert thinned is not None and thinned.runs_up[0] == thinned.runs_down[0] == 1.0
    assert wirecheck.structure_table([alike, thinned])[2].startswith(f"| hywf | {len(ds.traces)} |")
    assert wirecheck.structure("hywf", tmp_path / "none", tmp_path / "hywf" / "all", ds.names, params) is None


def test_tail_shows_padding_past_the_page_s_last_packet(tmp_path: Path) -> None:
    """A wire that pads nothing after the page (here: not at all) has no
    tail; the simulated hywf-ap of the same loads runs past the last real
    packet, as adaptive padding does up to its idle bound."""
    ds = corpus()
    captured(ds, tmp_path, "hywf", "hywf", seed=3)
    captured(ds, tmp_path, "hywf-ap", "hywf", seed=3)
    params = catalog.DefenseParams(budget=0.4, histograms=wirecheck.proxy_histograms())
    padded = wirecheck.structure("hywf-ap", tmp_path, tmp_path / "hywf" / "all", ds.names, params)
    assert padded is not None and padded.tail_s[0] == 0.0 and padded.tail_s[1] > 0.01, padded
    assert padded.extra_packets[0] == 0.0 < padded.extra_packets[1]
    assert wirecheck.structures_from_json(json.loads(json.dumps(wirecheck.to_json([], {}, [padded])))) == [padded]


def test_behind_links_queues_each_network_and_direction_at_the_link_rate() -> None:
    """A packet leaves its network's link once it has come and the one
    before it has left, plus its own time on the link; the other direction
    and the other network have links of their own."""
    # 1500 B at 12 Mbit/s: 1 ms on the link
    one = Trace(np.array([0.0, 0.0, 0.0005, 0.005]), np.array([-1500, -1500, 1500, -1500]))
    two = Trace(np.array([0.0]), np.array([-1500]))
    linked_one, linked_two = wirecheck.behind_links([one, two], 12.0)
    np.testing.assert_allclose(linked_one.times, [0.001, 0.0015, 0.002, 0.006])
    assert list(linked_one.sizes) == [-1500, 1500, -1500, -1500]
    np.testing.assert_allclose(linked_two.times, [0.001])


def test_behind_links_shortens_runs_when_a_burst_moves_faster_than_a_link_drains() -> None:
    """Network 1's burst of ten packets, then network 2's, sent faster
    than either link drains: merged in sending time they are two runs; past
    the links the two queues empty at once and the packets alternate."""
    sent = np.arange(20, dtype=np.float64) / 10_000  # 0.1 ms apart; 1 ms each on the link
    one = Trace(sent[:10], np.full(10, -1500))
    two = Trace(sent[10:], np.full(10, -1500))
    assert wirecheck.mean_runs([one, two], -1) == 10.0
    assert wirecheck.mean_runs(wirecheck.behind_links([one, two], 12.0), -1) < 2.0


def test_structure_gives_the_simulated_runs_behind_links_of_the_collection_s_rate(tmp_path: Path) -> None:
    """The simulated runs behind links are computed for a shaped collection
    (its collection.json's links) and kept through JSON; an older record
    without them reads as not computed."""
    ds = corpus()
    captured(ds, tmp_path, "hywf", "hywf", seed=3)
    (tmp_path / "hywf" / "collection.json").write_text(json.dumps({"links": collection.links_description(20, 10)}))
    assert collection.link_rate_mbit(collection.description(tmp_path / "hywf") or {}) == 20.0
    assert collection.link_rate_mbit({"links": collection.links_description(None)}) is None
    assert collection.link_rate_mbit({}) is None
    params = catalog.DefenseParams()
    plain = wirecheck.structure("hywf", tmp_path, tmp_path / "hywf" / "all", ds.names, params)
    linked = wirecheck.structure("hywf", tmp_path, tmp_path / "hywf" / "all", ds.names, params, link_mbit=20.0)
    assert plain is not None and linked is not None
    assert all(np.isnan(plain.runs_behind_links)) and not any(np.isnan(linked.runs_behind_links))
    assert linked.runs_up == plain.runs_up and linked.runs_down == plain.runs_down
    table = wirecheck.structure_table([plain, linked])
    assert table[2].endswith("| — |") and table[3].endswith(
        f"| {linked.runs_behind_links[0]:.1f} / {linked.runs_behind_links[1]:.1f} |")
    text = json.dumps(wirecheck.to_json([], {}, [plain, linked]))
    assert "NaN" not in text
    assert wirecheck.structures_from_json(json.loads(text))[1] == linked
    older = json.loads(text)
    del older["structure"][1]["runs_behind_links"]
    assert all(np.isnan(wirecheck.structures_from_json(older)[1].runs_behind_links))

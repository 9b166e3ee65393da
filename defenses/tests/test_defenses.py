"""The trace-level defence simulators: real packets kept, overhead within
the budget, padding stopping when the load is idle, AP following its
histograms, FRONT's Rayleigh schedule, HyWF's split statistics (the same
estimators and tolerances the VM test applies to the kernel's split on the
wire), HyWF-AP padding before the split."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from braid_eval.analysis.split_analysis import pooled_burst_mean
from braid_wf.defences import hywf_sim
from braid_wf.defences.adaptive_padding import (
    EDGES_S,
    ApHistograms,
    Histogram,
    adaptive_padding,
    dummy_sizes,
    fit_histograms,
    histograms_from_json,
    histograms_to_json,
)
from braid_wf.defences.catalog import NAMES, PADDING, SPLITS, DefenseParams, base_name, make_defense, parse_spec
from braid_wf.defences.defended import DUMMY, Defended
from braid_wf.defences.front import front
from braid_wf.defences.hywf_ap import hywf_ap
from braid_wf.synth import synthetic_dataset
from braid_wf.trace import Dataset, Trace

NCONS = hywf_sim.NCONS


@pytest.fixture(scope="module")
def corpus() -> Dataset:
    return synthetic_dataset(10, 4, 10, seed=11)


@pytest.fixture(scope="module")
def hist(corpus: Dataset) -> ApHistograms:
    return fit_histograms(corpus.traces)


def params(hist: ApHistograms, **kw: object) -> DefenseParams:
    p = DefenseParams(budget=0.4, n_chp=100, front_n=300, front_w=(0.05, 0.7), histograms=hist)
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def one_bin(delay: float, p_infinity: float) -> Histogram:
    """All delays in the bin that holds ``delay``."""
    counts = np.zeros(len(EDGES_S) - 1)
    counts[np.searchsorted(EDGES_S, delay, side="right") - 1] = 1.0
    return Histogram(counts, p_infinity)


def bin_of(delay: float) -> tuple[float, float]:
    b = int(np.searchsorted(EDGES_S, delay, side="right")) - 1
    return float(EDGES_S[b]), float(EDGES_S[b + 1])


def hand_hist(burst_s: float, gap_s: float, p_inf: float) -> ApHistograms:
    return ApHistograms({d: one_bin(burst_s, 0.0) for d in (1, -1)}, {d: one_bin(gap_s, p_inf) for d in (1, -1)})


def regular_trace(n: int, spacing: float, out_every: int = 4) -> Trace:
    """n packets ``spacing`` apart, every ``out_every``-th one outgoing."""
    sizes = np.where(np.arange(n) % out_every == 0, 500, -1400)
    return Trace(np.arange(n, dtype=np.float64) * spacing, sizes)


# -- every defence -------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_removing_the_dummies_gives_back_the_original(corpus: Dataset, hist: ApHistograms, name: str) -> None:
    defend = make_defense(name, params(hist))
    dummies = 0
    for i, t in enumerate(corpus.traces):
        d = defend(t, np.random.default_rng(i))
        back = d.real()
        assert np.array_equal(back.times, t.times) and np.array_equal(back.sizes, t.sizes), name
        assert len(d.parts) == (2 if name in SPLITS else 1)
        for part in d.parts:
            assert (np.diff(part.times) >= 0).all()  # each observer's trace is in time order
        n_dummy = sum(int((o == DUMMY).sum()) for o in d.origins)
        dummies += n_dummy
        # overhead is exactly the dummies' bytes
        assert d.overhead == pytest.approx(d.dummy_bytes / t.total_bytes)
        # a dummy goes the way its end sends and no dummy precedes the load
        for part, o in zip(d.parts, d.origins, strict=True):
            assert (part.times[o == DUMMY] >= t.times[0]).all()
    if name in PADDING:
        assert dummies > 10 * len(corpus.traces)
    else:
        assert dummies == 0


@pytest.mark.parametrize("name", NAMES)
def test_defences_are_deterministic_given_the_seed(corpus: Dataset, hist: ApHistograms, name: str) -> None:
    defend = make_defense(name, params(hist))
    t = max(corpus.traces, key=len)
    a, b = defend(t, np.random.default_rng(5)), defend(t, np.random.default_rng(5))
    c = defend(t, np.random.default_rng(6))
    for x, y in zip(a.parts, b.parts, strict=True):
        assert np.array_equal(x.times, y.times) and np.array_equal(x.sizes, y.sizes)
    if name != "none":
        assert any(len(x) != len(y) or not np.array_equal(x.times, y.times)
                   for x, y in zip(a.parts, c.parts, strict=True))


def test_bad_parameters_are_errors_naming_them(hist: ApHistograms) -> None:
    t = regular_trace(10, 0.01)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="budget"):
        adaptive_padding(t, rng, hist, budget=-0.1)
    with pytest.raises(ValueError, match="idle"):
        adaptive_padding(t, rng, hist, idle=math.inf)
    with pytest.raises(ValueError, match="N"):
        front(t, rng, n_max=0)
    with pytest.raises(ValueError, match="W_min"):
        front(t, rng, n_max=5, w_min=2.0, w_max=1.0)
    with pytest.raises(ValueError, match="histograms"):
        make_defense("ap", DefenseParams())
    with pytest.raises(ValueError, match="unknown defence"):
        make_defense("wtfpad")
    with pytest.raises(ValueError, match="n_chp"):
        hywf_sim.hywf_mask(t, rng, n_chp=-1)


# -- adaptive padding: budget ------------------------------------------------

@pytest.mark.parametrize("budget", [0.05, 0.2, 0.4])
def test_ap_never_exceeds_its_budget_on_any_load(corpus: Dataset, hist: ApHistograms, budget: float) -> None:
    free, capped = [], []
    for i, t in enumerate(corpus.traces):
        free.append(adaptive_padding(t, np.random.default_rng(i), hist).overhead)
        capped.append(adaptive_padding(t, np.random.default_rng(i), hist, budget).overhead)
    assert max(capped) <= budget + 1e-9
    # the budget is what held them: uncapped, some loads pad beyond it
    assert max(free) > 2 * budget
    # where AP wants three times the budget, the load ends up near it
    binding = [c for f, c in zip(free, capped, strict=True) if f > 3 * budget]
    assert binding and np.median(binding) >= 0.9 * budget


@pytest.mark.parametrize("budget", [0.1, 0.3, 0.5])
def test_ap_budget_holds_within_5_percent_over_a_load(budget: float) -> None:
    """Traffic with a silence after every packet: AP pads far beyond any
    budget, so the budget alone sets the overhead: within 5 % of it."""
    t = regular_trace(2000, 0.002)
    h = hand_hist(burst_s=0.0004, gap_s=0.0002, p_inf=0.2)
    free = adaptive_padding(t, np.random.default_rng(1), h).overhead
    assert free > 3 * budget
    got = adaptive_padding(t, np.random.default_rng(1), h, budget).overhead
    assert 0.95 * budget <= got <= budget + 1e-9  # 1e-9: float rounding of bytes / bytes - 1


# -- padding stops when idle ---------------------------------------------------

def gapped_trace() -> Trace:
    """1 s of traffic, 3 s of silence, 1 s of traffic."""
    a = regular_trace(200, 0.005)
    return Trace(np.concatenate([a.times, a.times + 4.0]), np.concatenate([a.sizes, a.sizes]))


@pytest.mark.parametrize("name", PADDING)
def test_padding_stops_when_the_load_is_idle(hist: ApHistograms, name: str) -> None:
    t = gapped_trace()
    idle = 0.3
    aggressive = hand_hist(burst_s=0.02, gap_s=0.01, p_inf=0.0)  # would pad every silence forever
    silence_dummies = 0
    for seed in range(20):
        d = make_defense(name, params(aggressive, idle=idle, budget=None, front_w=(1.0, 3.0)))(
            t, np.random.default_rng(seed))
        dt = d.dummy_times()
        assert len(dt)
        # no dummy after the last real packet + idle, none deep in the silence
        assert dt.max() <= t.times[-1] + idle
        assert not ((dt > t.times[199] + idle) & (dt < t.times[200])).any()
        # with a long idle bound the same defence pads into the silence: the
        # check above is what the idle bound bought
        loose = make_defense(name, params(aggressive, idle=10.0, budget=None, front_w=(1.0, 3.0)))(
            t, np.random.default_rng(seed))
        lt = loose.dummy_times()
        silence_dummies += int(((lt > t.times[199] + idle) & (lt < t.times[200])).sum())
    assert silence_dummies > 20


# -- adaptive padding: the state machine -------------------------------------

def test_ap_dummies_follow_the_burst_and_gap_histograms() -> None:
    """Real outgoing packets 0.5 s apart; H_B puts the first dummy ~50 ms
    after a real packet, H_G the next ones ~2 ms apart, and a fake burst
    has 1 / p_inf dummies on average."""
    t = Trace(np.arange(200, dtype=np.float64) * 0.5, np.full(200, 600))
    p_inf = 0.1
    d = adaptive_padding(t, np.random.default_rng(3), hand_hist(0.05, 0.002, p_inf), idle=1.0)
    part, origin = d.parts[0], d.origins[0]
    b_lo, b_hi = bin_of(0.05)
    g_lo, g_hi = bin_of(0.002)
    fake_bursts: list[int] = []
    for j in range(1, len(part)):
        if origin[j] != DUMMY:
            continue
        gap = part.times[j] - part.times[j - 1]
        if origin[j - 1] != DUMMY:  # BURST state: first dummy after a real packet
            assert b_lo <= gap <= b_hi
            fake_bursts.append(1)
        else:  # GAP state
            assert g_lo <= gap <= g_hi
            fake_bursts[-1] += 1
        assert part.sizes[j] == 600  # the size of the last data frame sent
    assert len(fake_bursts) == 200  # every silence got one (0.5 s > 50 ms, < idle)
    assert np.mean(fake_bursts) == pytest.approx(1 / p_inf, rel=0.2)


def test_ap_dummy_is_the_last_data_frame_at_most_one_packet() -> None:
    """A dummy follows the end's last data frame as braid's transport pads:
    an empty frame (FIN, window) does not set it, a frame larger than a
    packet (full packets, then a shorter tail) gives a full packet, and
    the other direction's packets do not count."""
    out = [35, 400, 35, -1420, 1420, 1420, 700, 35, -1420, 300, -600, 1500]
    t = Trace(np.arange(len(out), dtype=np.float64), np.asarray(out))
    assert dummy_sizes(t, 1).tolist() == [35, 400, 400, 1400, 1400, 1400, 1400, 300, 1400]
    assert dummy_sizes(t, -1).tolist() == [1400, 1400, 600]


def test_ap_real_packet_resets_the_burst_timer() -> None:
    """Real packets 10 ms apart and H_B at ~50 ms: no timer ever fires
    before the next real packet, so only the tail after the last one pads."""
    t = Trace(np.arange(100, dtype=np.float64) * 0.01, np.full(100, 600))
    d = adaptive_padding(t, np.random.default_rng(3), hand_hist(0.05, 0.002, 0.1))
    assert (d.dummy_times() > t.times[-1]).all() and len(d.dummy_times()) > 0


def test_fit_histograms_splits_in_burst_and_between_burst_delays() -> None:
    # out, out (1.5 ms), in (bursts of 3 at 2 ms), repeated with 100 ms between
    times, sizes = [], []
    for k in range(50):
        base = k * 0.1
        times += [base, base + 0.0015, base + 0.01, base + 0.012, base + 0.014]
        sizes += [300, 300, -1400, -1400, -1400]
    h = fit_histograms([Trace(np.asarray(times), np.asarray(sizes))])
    assert h.gap[1].p_infinity == pytest.approx(1 / 2) and h.gap[-1].p_infinity == pytest.approx(1 / 3)
    assert h.gap[1].counts.sum() == 50 and h.gap[1].counts[np.searchsorted(EDGES_S, 0.0015, "right") - 1] == 50
    assert h.gap[-1].counts.sum() == 100
    assert h.burst[1].counts.sum() == 49 and h.burst[-1].counts.sum() == 49
    lo, hi = bin_of(0.0985)
    assert (h.burst[1].sample(np.random.default_rng(0), 200) >= lo).all()
    assert (h.burst[1].sample(np.random.default_rng(0), 200) <= hi).all()


# -- FRONT -----------------------------------------------------------------------

def test_front_dummies_are_rayleigh_at_the_front() -> None:
    """With W fixed, the pooled dummy times follow Rayleigh(W) (KS), not
    Rayleigh(2W); per end 1..N dummies, (N + 1) / 2 on average."""
    t = regular_trace(4000, 0.001)  # 4 s of traffic: no dummy dropped as idle
    w, n_max = 0.5, 40
    times, counts = [], []
    for seed in range(60):
        d = front(t, np.random.default_rng(seed), n_max=n_max, w_min=w, w_max=w)
        part, o = d.parts[0], d.origins[0]
        dummy = o == DUMMY
        for sign in (1, -1):
            sel = dummy & (np.sign(part.sizes) == sign)
            counts.append(int(sel.sum()))
        times.append(part.times[dummy])
    pooled = np.concatenate(times)
    pooled = pooled[pooled < 3.9]  # the far tail falls outside the trace
    assert stats.kstest(pooled, stats.rayleigh(scale=w).cdf).pvalue > 0.01
    assert stats.kstest(pooled, stats.rayleigh(scale=2 * w).cdf).pvalue < 1e-6
    assert 1 <= min(counts) and max(counts) <= n_max
    assert np.mean(counts) == pytest.approx((n_max + 1) / 2, rel=0.15)


# -- HyWF split statistics (as measured on the wire by eval/tests/vm/test_hywf.py)

def shares(n_chp: int, split: str = "hywf",
           rng: np.random.Generator | None = None) -> tuple[list[float], list[float]]:
    """Network 1's share of each load's outgoing and incoming packets."""
    t = regular_trace(8000, 0.001, out_every=2)
    out, inc = [], []
    # one stream for all loads, as one end's draws would be
    rng = np.random.default_rng(21) if rng is None else rng
    for _ in range(300):
        on1 = hywf_sim.hywf_mask(t, rng, n_chp=n_chp) if split == "hywf" else hywf_sim.even_mask(t, rng)
        out.append(float(on1[t.sizes > 0].mean()))
        inc.append(float(on1[t.sizes < 0].mean()))
    return out, inc


@pytest.mark.parametrize("n_chp", [0, 100])
def test_hywf_share_per_load_is_uniform_and_ends_independent(n_chp: int) -> None:
    """The wire test's criterion (test_hywf.py): KS against U[0, 1] at
    0.01, a rejection confirmed on a fresh sample at 0.001."""
    rng = np.random.default_rng(21)
    out, inc = shares(n_chp, rng=rng)
    for i, s in enumerate((out, inc)):
        if stats.kstest(s, "uniform").pvalue <= 0.01:
            s = shares(n_chp, rng=rng)[i]
            assert stats.kstest(s, "uniform").pvalue > 0.001
        assert min(s) < 0.2 and max(s) > 0.8
    assert abs(stats.pearsonr(out, inc).statistic) < 0.2  # client and proxy draw their own p


def test_even_split_fails_the_uniformity_test() -> None:
    out, _ = shares(0, split="even")
    assert stats.kstest(out, "uniform").pvalue < 1e-6


@pytest.mark.parametrize("n_chp", [0, 100])
def test_hywf_burst_length_seen_on_one_network_has_mean_ncons(n_chp: int) -> None:
    """pooled_burst_mean (split_analysis, the wire test's estimator) on
    network 1's runs: NCONS within 15 %, as the VM test requires."""
    t = Trace(np.arange(3000, dtype=np.float64) * 0.001, np.full(3000, -1400))
    per_load = []
    for seed in range(60):
        on1 = hywf_sim.hywf_mask(t, np.random.default_rng(seed), n_chp=n_chp)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], on1.astype(np.int8), [0]])))
        runs = (edges[1::2] - edges[::2]).tolist()[1:-1]  # first and last cut, as run_lengths does
        per_load.append((runs, float(on1.mean())))
    assert sum(len(r) for r, _ in per_load) >= 100
    est = pooled_burst_mean(per_load)
    # p-drift switches p inside a load, which pooled_burst_mean does not model
    assert est == pytest.approx(NCONS, rel=0.15 if n_chp == 0 else 0.3)


def test_p_drift_moves_the_split_within_a_load() -> None:
    """Without drift network 1's share of 500-packet windows only wobbles
    with the bursts; with n_chp = 100 it wanders around the load's mean."""
    t = Trace(np.arange(10000, dtype=np.float64) * 0.001, np.full(10000, -1400))
    spread = {}
    for n_chp in (0, 100):
        sds = []
        for seed in range(30):
            on1 = hywf_sim.hywf_mask(t, np.random.default_rng(seed), p_proxy=0.5, n_chp=n_chp)
            sds.append(on1.reshape(20, 500).mean(axis=1).std())
        spread[n_chp] = float(np.mean(sds))
    assert spread[100] > 1.3 * spread[0]
    # 10,000 redraws: the mean within 6 sd of 0.2, the run length within 10
    p = hywf_sim.drifting_p(1_000_000, 0.2, 100, np.random.default_rng(1))
    assert p.min() >= 0 and p.max() <= 0.4 and p.mean() == pytest.approx(0.2, abs=0.01)
    changes = int((np.diff(p) != 0).sum())
    assert 1_000_000 / changes == pytest.approx(100, rel=0.1)  # mean n_chp packets between redraws
    q = hywf_sim.drifting_p(100_000, 0.9, 100, np.random.default_rng(1))
    assert q.min() >= 0.8 and q.max() <= 1.0


def test_both_networks_drain_a_flight_at_once() -> None:
    """Two bursts dealt one after the other inside a flight come out in
    alternating turns, as on the wire; a gap longer than FLIGHT_GAP_S
    starts a new flight, and no flight's share moves to another."""
    step = hywf_sim.FLIGHT_GAP_S / 4
    times = np.concatenate([np.arange(10) * step, 1.0 + np.arange(6) * step])
    dealt = np.array([True] * 4 + [False] * 6 + [False] * 5 + [True], dtype=bool)
    on1 = hywf_sim.drain_concurrently(times, dealt)
    assert "".join("1" if x else "0" for x in on1) == "1100110000" + "001000"
    sequential = hywf_sim.drain_concurrently(times, dealt, per_turn=100)
    assert np.array_equal(sequential, dealt)
    with pytest.raises(ValueError, match="per_turn"):
        hywf_sim.drain_concurrently(times, dealt, per_turn=0)


def test_wire_mask_keeps_the_scheduler_s_share_of_each_flight(corpus: Dataset) -> None:
    """The observers' split moves packets only in time, inside a flight:
    per direction and flight, network 1 carries as many packets as the
    scheduler dealt it (same seed), so per-load shares are the thesis's."""
    for i, t in enumerate(corpus.traces):
        dealt = hywf_sim.hywf_mask(t, np.random.default_rng(i))
        seen = hywf_sim.hywf_wire_mask(t, np.random.default_rng(i))
        for sel in (t.sizes > 0, t.sizes <= 0):
            times = t.times[sel]
            flight = np.concatenate([[0], np.cumsum(np.diff(times) > hywf_sim.FLIGHT_GAP_S)])
            assert np.array_equal(np.bincount(flight, dealt[sel]), np.bincount(flight, seen[sel]))


# -- HyWF-AP ---------------------------------------------------------------------

def test_hywf_ap_pads_before_the_split(corpus: Dataset, hist: ApHistograms) -> None:
    """The two networks' traces together are exactly the AP-padded load
    (same seed), and dummies land on both networks in proportion to the
    real packets: the split does not tell them apart."""
    dummy_on1 = real_on1 = dummies = reals = 0
    for i, t in enumerate(corpus.traces):
        d = hywf_ap(t, np.random.default_rng(i), hist, budget=0.4, n_chp=100)
        padded = adaptive_padding(t, np.random.default_rng(i), hist, budget=0.4)
        merged = np.concatenate([p.times for p in d.parts])
        assert np.array_equal(np.sort(merged), padded.parts[0].times)
        assert d.overhead == pytest.approx(padded.overhead)
        o1 = d.origins[0]
        dummy_on1 += int((o1 == DUMMY).sum())
        real_on1 += int((o1 != DUMMY).sum())
        dummies += sum(int((o == DUMMY).sum()) for o in d.origins)
        reals += len(t)
    assert dummies > 0 and dummy_on1 > 0
    assert dummy_on1 / dummies == pytest.approx(real_on1 / reals, abs=0.1)


@pytest.mark.parametrize("name", ["hywf", "hywf-drift", "hywf-ap"])
def test_every_hywf_split_takes_its_mean_burst_from_the_params(corpus: Dataset, hist: ApHistograms,
                                                                name: str) -> None:
    """``ncons`` reaches each split: bursts far longer than any load leave
    each direction of a load whole on one network, the default does not."""
    def whole_per_direction(ncons: int) -> list[bool]:
        defend = make_defense(name, params(hist, ncons=ncons))
        whole = []
        for i, t in enumerate(corpus.traces):
            d = defend(t, np.random.default_rng(i))
            for sign in (1, -1):
                on1 = int((np.sign(d.parts[0].sizes) == sign).sum())
                both = sum(int((np.sign(part.sizes) == sign).sum()) for part in d.parts)
                whole.append(on1 in (0, both))
        return whole
    assert all(whole_per_direction(10 ** 6))
    assert not all(whole_per_direction(NCONS))
    # and a name's own setting overrides the params
    defend = make_defense(f"{name}:ncons={10 ** 6}", params(hist, ncons=NCONS))
    parts = [defend(t, np.random.default_rng(i)).parts for i, t in enumerate(corpus.traces)]
    assert all(int((np.sign(ps[0].sizes) == sign).sum()) in (0, sum(int((np.sign(q.sizes) == sign).sum())
                                                                     for q in ps))
               for ps in parts for sign in (1, -1))


@pytest.mark.parametrize(("spec", "why"), [
    ("hywf:ncons=0", "ncons >= 1"), ("ap:ncons=3", "one of budget, idle"), ("none:ncons=3", "takes no settings"),
    ("hywf:ncons=1.5", "needs an integer"), ("hywf:ncons", "FIELD=VALUE"), ("hywff", "unknown defence"),
    ("front:idle=0", "idle > 0")])
def test_a_defence_setting_that_does_not_apply_or_is_out_of_range_is_refused(spec: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        make_defense(spec)


def test_a_defence_named_with_settings_is_its_catalog_defence_with_them() -> None:
    assert parse_spec("hywf-ap:ncons=100:budget=0.2") == ("hywf-ap", {"ncons": 100, "budget": 0.2})
    assert parse_spec("none") == ("none", {})
    assert base_name("hywf:ncons=100") == "hywf" and base_name("front") == "front"


def test_defended_rejects_a_lost_or_doubled_packet() -> None:
    t = regular_trace(5, 0.1)
    idx = np.arange(5, dtype=np.int64)
    assert np.array_equal(Defended(t, (t,), (idx,)).real().times, t.times)
    with pytest.raises(ValueError):
        Defended(t, (Trace(t.times[:4], t.sizes[:4]),), (idx[:4],)).real()
    with pytest.raises(ValueError):
        Defended(t, (t,), (np.asarray([0, 1, 2, 2, 4], dtype=np.int64),)).real()


def test_histograms_json_round_trip_is_exact(hist: ApHistograms) -> None:
    back = histograms_from_json(histograms_to_json(hist))
    for d in (1, -1):
        assert np.array_equal(back.burst[d].counts, hist.burst[d].counts)
        assert np.array_equal(back.gap[d].counts, hist.gap[d].counts)
        assert back.gap[d].p_infinity == hist.gap[d].p_infinity
    with pytest.raises(ValueError, match="format"):
        histograms_from_json('{"format": "other"}')

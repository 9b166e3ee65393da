"""Statistical tests of the HyWF policy core (the code the kernel runs),
with fixed seeds so that results are reproducible."""

from __future__ import annotations

import ctypes
import math
import statistics
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from policy_harness import HYWF_MAX_PATHS, HYWF_ONE, HywfDrift, HywfEpoch, draw_weights, load_harness

ALPHA = 0.01


@pytest.fixture(autouse=True)
def seeded() -> None:
    load_harness().harness_seed(20261122)


@pytest.mark.parametrize("ncons", [1, 5, 20, 50, 1000])
def test_burst_lengths_are_geometric_with_mean_ncons(ncons: int) -> None:
    lib = load_harness()
    n = 20000
    lengths = np.array([lib.harness_hywf_draw_burst(ncons) for _ in range(n)])
    assert lengths.min() >= 1
    assert lengths.mean() == pytest.approx(ncons, rel=0.05)
    if ncons == 1:
        assert (lengths == 1).all()
        return
    # Chi-square goodness of fit against Geometric(1/ncons) on [1, inf),
    # bins with >= 5 expected counts and one tail bin.
    q = 1 / ncons
    counts = Counter(lengths.tolist())
    edges = [k for k in range(1, 10 * ncons) if n * stats.geom.pmf(k, q) >= 5]
    observed = [counts.get(k, 0) for k in edges]
    expected = [n * stats.geom.pmf(k, q) for k in edges]
    observed.append(n - sum(observed))
    expected.append(n - sum(expected))
    _, p = stats.chisquare(observed, expected)
    assert p > ALPHA, f"burst lengths are not geometric (p={p:.4g})"


@pytest.mark.parametrize("x", [1, 2, 3, 1000, 9999, 10000, (1 << 32) - 1, 1 << 32])
def test_fixed_point_log2_is_accurate(x: int) -> None:
    got = load_harness().harness_hywf_log2(x) / (1 << 30)
    assert got == pytest.approx(math.log2(x), abs=4e-9)


@pytest.mark.parametrize("ncons", [2, 20, 10000])
def test_burst_inversion_matches_the_geometric_quantiles(ncons: int) -> None:
    """L = 1 + floor(log U / log q) at chosen U: P(L > k) = q^k exactly, so
    the draw that is a quantile u of U gives the u-quantile of L."""
    lib = load_harness()
    q = 1 - 1 / ncons
    for u in (0.999, 0.5, 0.1, 0.01, 1e-6):
        r = int(u * (1 << 32)) - 1
        expected = 1 + math.floor(math.log((r + 1) / (1 << 32)) / math.log(q))
        assert abs(lib.harness_hywf_draw_burst_from(ncons, r) - expected) <= 1


def test_burst_cost_does_not_grow_with_ncons() -> None:
    """One draw per burst: even the smallest U (2^-32) is one step, and gives
    the longest burst the 32-bit draw can express, 1 + 32 / log2(1/q), about
    22 ncons, well inside the 64 ncons cap that keeps the arithmetic safe."""
    lib = load_harness()
    longest = 1 + math.floor(32 / -math.log2(1 - 1 / 10000))
    assert abs(lib.harness_hywf_draw_burst_from(10000, 0) - longest) <= 1
    assert longest < 64 * 10000
    assert lib.harness_hywf_draw_burst_from(10000, 0xFFFFFFFF) == 1


def test_split_is_uniform_on_unit_interval() -> None:
    draws = [draw_weights(500, 2)[0] / HYWF_ONE for _ in range(5000)]
    assert stats.kstest(draws, "uniform").pvalue > ALPHA


@pytest.mark.parametrize("ps", [100, 250, 400])
def test_biased_split_stays_in_zero_to_twice_ps(ps: int) -> None:
    draws = np.array([draw_weights(ps, 2)[0] / HYWF_ONE for _ in range(5000)])
    hi = 2 * ps / 1000
    assert draws.min() >= 0 and draws.max() <= hi + 1 / HYWF_ONE
    assert stats.kstest(draws, "uniform", args=(0, hi)).pvalue > ALPHA


def test_ps_above_half_mirrors_the_range() -> None:
    draws = np.array([draw_weights(800, 2)[0] / HYWF_ONE for _ in range(5000)])
    assert draws.min() >= 0.6 - 1 / HYWF_ONE
    assert stats.kstest(draws, "uniform", args=(0.6, 0.4)).pvalue > ALPHA


@pytest.mark.parametrize("n", [3, 4, 8])
def test_weights_for_many_paths_are_uniform_on_the_simplex(n: int) -> None:
    samples = np.array([draw_weights(500, n) for _ in range(4000)]) / HYWF_ONE
    assert np.allclose(samples.sum(axis=1), 1.0)
    # Each coordinate of a uniform point on the (n-1)-simplex is Beta(1, n-1).
    for i in range(n):
        assert stats.kstest(samples[:, i], "beta", args=(1, n - 1)).pvalue > ALPHA


def test_long_run_fraction_equals_drawn_split() -> None:
    lib = load_harness()
    burst = ctypes.c_uint32()
    for _ in range(20):
        conn = HywfEpoch()
        packets = [0, 0]
        while sum(packets) < 200_000:
            path = lib.harness_hywf_next_burst(ctypes.byref(conn), 500, 20, 2, 1, 1000,
                                               ctypes.byref(burst))
            packets[path] += burst.value
        p = conn.weight[0] / HYWF_ONE
        assert packets[0] / sum(packets) == pytest.approx(p, abs=0.03)
        assert conn.draws == 1


def test_idle_gap_redraws_split_and_activity_does_not() -> None:
    lib = load_harness()
    burst = ctypes.c_uint32()
    conn = HywfEpoch()
    idle_ms = 500

    def step(now: int) -> None:
        lib.harness_hywf_next_burst(ctypes.byref(conn), 500, 20, 2, now, idle_ms,
                                    ctypes.byref(burst))

    step(1000)
    first = list(conn.weight[:2])
    for now in range(1100, 5000, 100):  # busy: gaps of 100 ms
        step(now)
    assert conn.draws == 1 and list(conn.weight[:2]) == first
    step(5000 + idle_ms + 1)  # a pause longer than idle_ms: new page load
    assert conn.draws == 2


def test_idle_detection_survives_clock_wrap() -> None:
    lib = load_harness()
    assert not lib.harness_hywf_idle_expired(5, 0xFFFFFFF0, 100)
    assert lib.harness_hywf_idle_expired(200, 0xFFFFFFF0, 100)


def test_path_count_change_redraws_and_one_path_keeps_the_split() -> None:
    lib = load_harness()
    burst = ctypes.c_uint32()
    epoch = HywfEpoch()
    # One subflow (waiting for its join): no split drawn yet, path 0.
    assert lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 1, 10, 500,
                                       ctypes.byref(burst)) == 0
    assert epoch.draws == 0 and epoch.nr_paths == 0
    path = lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, 20, 500,
                                       ctypes.byref(burst))
    assert epoch.nr_paths == 2 and epoch.draws == 1 and path in (0, 1)
    split = list(epoch.weight[:2])
    # Another connection of the same epoch still has one subflow: the
    # page's split stays.
    lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 1, 25, 500, ctypes.byref(burst))
    assert epoch.draws == 1 and list(epoch.weight[:2]) == split
    lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 99, 30, 500, ctypes.byref(burst))
    assert epoch.nr_paths == HYWF_MAX_PATHS and epoch.draws == 2


def test_shared_epoch_gives_every_connection_the_same_split() -> None:
    """Interleaved bursts of several connections of one page load draw one
    split: the pooled share of path 0 follows it, not one half."""
    lib = load_harness()
    burst = ctypes.c_uint32()
    for _ in range(10):
        epoch = HywfEpoch()
        packets = [0, 0]
        now = 1000
        while sum(packets) < 200_000:
            now += 1  # eight connections take turns, never idle
            path = lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, now, 500,
                                               ctypes.byref(burst))
            packets[path] += burst.value
        assert epoch.draws == 1
        assert packets[0] / sum(packets) == pytest.approx(epoch.weight[0] / HYWF_ONE, abs=0.03)


def test_burst_goes_on_only_while_busy_and_present() -> None:
    lib = load_harness()
    keep = lib.harness_hywf_keep_burst
    last = ctypes.c_uint32(1000)
    assert keep(ctypes.byref(last), True, 20, 1100, 500)
    assert last.value == 1100  # activity recorded
    assert not keep(ctypes.byref(last), True, 0, 1200, 500)  # burst spent
    assert not keep(ctypes.byref(last), False, 20, 1200, 500)  # its subflow is gone
    # Segments left, but the connection was idle: the next page load must
    # not inherit the previous burst (and with it the previous split).
    assert not keep(ctypes.byref(last), True, 20, 1100 + 501, 500)


def drifting_page(lib: ctypes.CDLL, nchp: int, packets_wanted: int,
                  ncons: int = 20) -> tuple[HywfEpoch, list[float], list[int], list[int]]:
    """One never-idle page load with hywf_nchp: the connection's split at
    each redraw, packets between redraws, and packets per path."""
    epoch, drift, burst = HywfEpoch(), HywfDrift(), ctypes.c_uint32()
    splits: list[float] = []
    gaps: list[int] = []
    packets = [0, 0]
    since = 0
    draws = 0
    while sum(packets) < packets_wanted:
        path = lib.harness_hywf_next_burst_drift(ctypes.byref(epoch), ctypes.byref(drift), ncons, nchp,
                                                 2, 1000, 500, ctypes.byref(burst))
        if drift.draws != draws:
            if draws:
                gaps.append(since)
            draws, since = drift.draws, 0
            splits.append(drift.weight[0] / HYWF_ONE)
        since += burst.value
        packets[path] += burst.value
    return epoch, splits, gaps, packets


def test_drift_redraws_around_the_page_split() -> None:
    """hywf_nchp (HyWF-AP's dynamic p): the connection's split is redrawn
    uniformly on [c - h, c + h] around the page's c, every ~nchp packets
    (checked at bursts, so at most a burst later), and the page's share
    stays c."""
    lib = load_harness()
    nchp, ncons = 100, 20
    all_gaps: list[int] = []
    for _ in range(10):
        epoch, splits, gaps, packets = drifting_page(lib, nchp, 200_000, ncons)
        all_gaps += gaps
        c = epoch.weight[0] / HYWF_ONE
        h = min(c, 1 - c)
        assert epoch.draws == 1  # one page: the page's split is drawn once
        assert len(splits) > 500
        assert all(c - h - 1e-4 <= x <= c + h + 1e-4 for x in splits)
        if h > 0.05:
            assert stats.kstest(splits, "uniform", args=(c - h, 2 * h)).pvalue > ALPHA
        assert packets[0] / sum(packets) == pytest.approx(c, abs=0.03)
    # A redraw waits for the end of the burst in progress: geometric bursts
    # are memoryless, so it comes nchp + (ncons - 1) packets apart on average
    # (~16,000 gaps, standard error ~0.8).
    assert statistics.mean(all_gaps) == pytest.approx(nchp + ncons - 1, rel=0.03)


def test_drift_starts_afresh_with_a_new_page_and_is_off_at_zero() -> None:
    lib = load_harness()
    epoch, drift, burst = HywfEpoch(), HywfDrift(), ctypes.c_uint32()
    lib.harness_hywf_next_burst_drift(ctypes.byref(epoch), ctypes.byref(drift), 20, 10_000, 2, 1000, 500,
                                      ctypes.byref(burst))
    assert (epoch.draws, drift.draws, drift.epoch_draws) == (1, 1, 1)
    # an idle gap: a new page, and the drift follows it at once although
    # its own packets (mean 10,000) are far from spent
    lib.harness_hywf_next_burst_drift(ctypes.byref(epoch), ctypes.byref(drift), 20, 10_000, 2, 2000, 500,
                                      ctypes.byref(burst))
    assert (epoch.draws, drift.draws, drift.epoch_draws) == (2, 2, 2)
    # hywf_nchp 0: no drift state is touched, the page's split is used
    _, splits, _, _ = drifting_page(lib, 0, 20_000)
    assert splits == []

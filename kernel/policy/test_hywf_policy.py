"""Statistical tests of the HyWF policy core (the code the kernel runs),
with fixed seeds so that results are reproducible.

A fixed seed makes each run the same, not each check safe: a change to
the policy or to the order of its draws is a new sample. So every
statistical check states the probability that it fails a correct policy
on a fresh sample, at most FALSE_FAILURE per test (braid_eval.analysis.false_failure).
"""

from __future__ import annotations

import ctypes
import math
import statistics
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from braid_eval.analysis.false_failure import FALSE_FAILURE
from policy_harness import HYWF_MAX_PATHS, HYWF_ONE, HywfDrift, HywfEpoch, draw_weights, load_harness

# The level of a test's goodness-of-fit check: a correct policy fails it
# with this probability (a test with several divides it among them).
ALPHA = FALSE_FAILURE


@pytest.fixture(autouse=True)
def seeded() -> None:
    load_harness().harness_seed(20261122)


def assert_geometric(lengths: list[int], ncons: int, what: str) -> None:
    """Chi-square goodness of fit of ``lengths`` against Geometric(1/ncons)
    on [1, inf), bins with >= 5 expected counts and one tail bin, at ALPHA."""
    n, q = len(lengths), 1 / ncons
    counts = Counter(lengths)
    edges = [k for k in range(1, 10 * ncons) if n * stats.geom.pmf(k, q) >= 5]
    observed = [counts.get(k, 0) for k in edges]
    expected = [n * stats.geom.pmf(k, q) for k in edges]
    observed.append(n - sum(observed))
    expected.append(n - sum(expected))
    _, p = stats.chisquare(observed, expected)
    assert p > ALPHA, f"{what} are not geometric (p={p:.4g})"


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
    # the mean above is 7 standard errors inside its 5 %: fails with 1e-12
    assert_geometric(lengths.tolist(), ncons, "burst lengths")


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
    # Each coordinate of a uniform point on the (n-1)-simplex is Beta(1, n-1);
    # n checks share ALPHA (Bonferroni).
    for i in range(n):
        assert stats.kstest(samples[:, i], "beta", args=(1, n - 1)).pvalue > ALPHA / n


def test_long_run_fraction_equals_drawn_split() -> None:
    """200,000 packets in bursts of mean 20: the share's sd about the split
    p is sqrt(p (1 - p) 39 / 200,000), 0.007 at most, so 0.03 is 4.3 sd:
    over p ~ U[0, 1], 20 connections fail with 9.2e-5."""
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


def test_one_path_neither_keeps_the_split_alive_nor_touches_it() -> None:
    """A connection waiting for its join sends on its only path; it must not
    hand the previous page's split to the next page by keeping the epoch
    busy through the gap between them."""
    lib = load_harness()
    burst = ctypes.c_uint32()
    epoch = HywfEpoch()
    lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, 1000, 500, ctypes.byref(burst))
    assert (epoch.draws, epoch.last_ms) == (1, 1000)
    for now in range(1300, 3000, 300):  # single-path bursts through the gap
        assert lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 1, now, 500,
                                           ctypes.byref(burst)) == 0
    assert (epoch.draws, epoch.last_ms) == (1, 1000)
    lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, 3000, 500, ctypes.byref(burst))
    assert epoch.draws == 2  # the next page gets a split of its own


def test_fewer_paths_use_the_split_without_redrawing_it() -> None:
    """A connection with two paths in an epoch drawn for three (one not yet
    joined) picks among its two in the split's proportions; the split stays
    for the connections that have all three."""
    lib = load_harness()
    burst = ctypes.c_uint32()
    for _ in range(5):
        epoch = HywfEpoch()
        lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 3, 1000, 500, ctypes.byref(burst))
        split = list(epoch.weight[:3])
        packets = [0, 0]
        for now in range(1001, 30_000):
            path = lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, now, 500,
                                               ctypes.byref(burst))
            packets[path] += burst.value
        assert epoch.draws == 1 and epoch.nr_paths == 3 and list(epoch.weight[:3]) == split
        if split[0] + split[1]:
            assert packets[0] / sum(packets) == pytest.approx(split[0] / (split[0] + split[1]),
                                                              abs=0.03)
        lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 4, 30_000, 500, ctypes.byref(burst))
        assert epoch.draws == 2 and epoch.nr_paths == 4  # a network came: redrawn


def test_shared_epoch_gives_every_connection_the_same_split() -> None:
    """Interleaved bursts of several connections of one page load draw one
    split: the pooled share of path 0 follows it, not one half (within
    0.03 as test_long_run_fraction_equals_drawn_split: 10 pages fail a
    correct policy with 4.6e-5)."""
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
    assert keep(ctypes.byref(last), True, False, 2, 2, 20, 1100, 500)
    assert last.value == 1100  # activity recorded
    assert not keep(ctypes.byref(last), True, False, 2, 2, 0, 1200, 500)  # burst spent
    assert not keep(ctypes.byref(last), False, False, 2, 2, 20, 1200, 500)  # its subflow is gone
    # Segments left, but the connection was idle: the next page load must
    # not inherit the previous burst (and with it the previous split).
    assert not keep(ctypes.byref(last), True, False, 2, 2, 20, 1100 + 501, 500)
    # A path went: the burst's subflow is still there, the burst goes on.
    assert keep(ctypes.byref(last), True, False, 3, 2, 20, 1150, 500)
    # Drawn on the only subflow before the join: the join ends it, so that
    # the rest of the first flight follows the split, not the first path.
    assert not keep(ctypes.byref(last), True, False, 1, 2, 20, 1200, 500)


def test_a_burst_waiting_for_its_subflow_is_not_idle() -> None:
    """A full subflow may hold its burst longer than the idle gap; that
    burst's end is the scheduler's (moved, counted), not a new page."""
    keep = load_harness().harness_hywf_keep_burst
    last = ctypes.c_uint32(1000)
    assert keep(ctypes.byref(last), True, True, 2, 2, 20, 1000 + 900, 500)
    assert not keep(ctypes.byref(last), True, False, 2, 2, 20, 1900 + 501, 500)


def long_burst_page(touch: bool) -> HywfEpoch:
    """Connection A draws at 0 ms and sends one burst for 2 s, deciding
    every 10 ms (refreshing the epoch when due if ``touch``); connection B
    of the same page draws at 1.5 s. Idle gap 500 ms."""
    lib = load_harness()
    epoch, burst = HywfEpoch(), ctypes.c_uint32()
    lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, 0, 500, ctypes.byref(burst))
    last, touched = ctypes.c_uint32(0), ctypes.c_uint32(0)
    for now in range(10, 2001, 10):
        assert lib.harness_hywf_keep_burst(ctypes.byref(last), True, False, 2, 2, 1000, now, 500)
        if touch and lib.harness_hywf_epoch_touch_due(ctypes.byref(touched), now, 500):
            lib.harness_hywf_epoch_touch(ctypes.byref(epoch), 2, now, 500)
        if now == 1500:
            lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, now, 500, ctypes.byref(burst))
    return epoch


def test_a_long_burst_keeps_its_page_split_for_the_other_connections() -> None:
    assert long_burst_page(touch=True).draws == 1
    # Control: without the refresh, B's burst redraws the split mid-page.
    assert long_burst_page(touch=False).draws == 2


def test_a_refresh_neither_revives_an_expired_split_nor_comes_from_one_path() -> None:
    lib = load_harness()
    epoch, burst = HywfEpoch(), ctypes.c_uint32()
    lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, 0, 500, ctypes.byref(burst))
    lib.harness_hywf_epoch_touch(ctypes.byref(epoch), 1, 400, 500)  # single path
    assert epoch.last_ms == 0
    lib.harness_hywf_epoch_touch(ctypes.byref(epoch), 2, 501, 500)  # expired: the page is over
    assert epoch.last_ms == 0
    lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, 2, 502, 500, ctypes.byref(burst))
    assert epoch.draws == 2
    # At most four refreshes per idle gap.
    touched = ctypes.c_uint32(0)
    due = sum(lib.harness_hywf_epoch_touch_due(ctypes.byref(touched), t, 500) for t in range(1, 501))
    assert due == 4 and touched.value == 500


def test_first_flights_follow_the_split_once_joined() -> None:
    """Eight connections of a page share an epoch; each first sends 2 of its
    12 packets before its join (a hold that gave up), the rest after. The
    share of path 0 of what leaves after the joins follows the page's
    split, not path 0."""
    lib = load_harness()
    burst = ctypes.c_uint32()
    after = [0, 0]
    splits = []
    for _page in range(400):
        epoch = HywfEpoch()
        now = 1000
        per_page = [0, 0]
        for _ in range(8):
            last = ctypes.c_uint32(now)
            drawn, path, left = 0, 0, 0
            for pkt in range(12):
                n = 1 if pkt < 2 else 2
                if not lib.harness_hywf_keep_burst(ctypes.byref(last), True, False, drawn, n, left, now,
                                                   500):
                    path = lib.harness_hywf_next_burst(ctypes.byref(epoch), 500, 20, n, now, 500,
                                                       ctypes.byref(burst))
                    drawn, left = n, burst.value
                    last.value = now
                left -= 1
                if n == 2:
                    per_page[path] += 1
            now += 1
        splits.append(epoch.weight[0] / HYWF_ONE)
        after = [a + b for a, b in zip(after, per_page, strict=True)]
    # Pooled over pages, path 0 carries the mean split (1/2), not ~all of
    # it as when the first, single-path burst (mean 20 packets) went on.
    assert after[0] / sum(after) == pytest.approx(statistics.mean(splits), abs=0.05)


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
    stays c.

    Three checks share ALPHA: the redraws, pooled over pages as
    (x - (c - h)) / 2h, against U[0, 1] (KS at ALPHA / 3); each page's
    share within z sd of c, its sd the model's (the drift's h^2 / 3 *
    sum(gaps^2) / N^2 plus the bursts' c (1 - c) (2 ncons - 1) / N; 0.012
    at c = 1/2, where a fixed 0.03 failed 1.5 % of samples of 10 pages),
    z for ALPHA / 3 over the pages; and the mean gap, 4.6 standard errors
    inside its 3 % (5e-6)."""
    lib = load_harness()
    nchp, ncons, pages = 100, 20, 10
    z = stats.norm.isf(ALPHA / 3 / pages / 2)
    all_gaps: list[int] = []
    redraws: list[float] = []
    for _ in range(pages):
        epoch, splits, gaps, packets = drifting_page(lib, nchp, 200_000, ncons)
        all_gaps += gaps
        c = epoch.weight[0] / HYWF_ONE
        h = min(c, 1 - c)
        assert epoch.draws == 1  # one page: the page's split is drawn once
        assert len(splits) > 500
        assert all(c - h - 1e-4 <= x <= c + h + 1e-4 for x in splits)
        if h > 0.05:
            redraws += [(x - (c - h)) / (2 * h) for x in splits]
        n = sum(packets)
        sd = math.sqrt(h * h / 3 * sum(g * g for g in gaps) / n**2 + c * (1 - c) * (2 * ncons - 1) / n)
        assert packets[0] / n == pytest.approx(c, abs=z * sd)
    assert stats.kstest(redraws, "uniform").pvalue > ALPHA / 3
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


def _take_piece(epoch: HywfEpoch, ncons: int, n: int, now: int) -> tuple[int, int, int]:
    """(path, packets, the page burst it is of) of the next piece a
    connection with n paths takes."""
    pkts, seq = ctypes.c_uint32(), ctypes.c_uint32()
    path = load_harness().harness_hywf_take_burst(ctypes.byref(epoch), ncons, n, now, 500,
                                                  ctypes.byref(pkts), ctypes.byref(seq))
    return path, pkts.value, seq.value


def _take(epoch: HywfEpoch, ncons: int, n: int, now: int) -> tuple[int, int]:
    """(path, packets) of the next piece a connection with n paths takes."""
    path, pkts, _ = _take_piece(epoch, ncons, n, now)
    return path, pkts


def _give_back(epoch: HywfEpoch, n: int, seq: int, pkts: int, now: int) -> bool:
    return bool(load_harness().harness_hywf_give_back(ctypes.byref(epoch), n, seq, pkts, now, 500))


@pytest.mark.parametrize("ncons", [1, 20, 50])
def test_a_page_burst_is_handed_out_in_pieces_on_one_path(ncons: int) -> None:
    """Connections sending at once take pieces of the page's burst: every
    piece of a burst is on the burst's path and at most ncons / 4 packets,
    and the pieces of a burst add up to a geometric length of mean ncons,
    as HyWF's bursts (whichever connection takes each piece)."""
    epoch = HywfEpoch()
    piece_max = max(1, ncons // 4)
    lengths: list[int] = []
    now = 1000
    while len(lengths) < 20000:
        starts = epoch.burst_left == 0
        path, pkts = _take(epoch, ncons, 2, now)
        assert 1 <= pkts <= piece_max
        if starts:
            lengths.append(pkts)
            burst_path = path
        else:
            assert path == burst_path, "a piece left its burst's path"
            lengths[-1] += pkts
        now += 1  # busy: well inside the idle gap
    assert epoch.draws == 1  # one page: one split throughout
    lengths = lengths[:-1]  # the last burst may be unfinished
    assert statistics.fmean(lengths) == pytest.approx(ncons, rel=0.05)
    if ncons == 1:
        assert set(lengths) == {1}
        return
    # as for the bursts themselves (the mean's 5 % is more than 7 standard
    # errors: fails with 1e-12)
    assert_geometric(lengths, ncons, "page bursts")


def _page_with_a_burst_under_way(n: int) -> HywfEpoch:
    """An epoch whose first burst (drawn at t=1000 for n paths) has
    packets left after its first piece."""
    for seed in range(1, 200):
        load_harness().harness_seed(seed)
        epoch = HywfEpoch()
        _take(epoch, 20, n, 1000)
        if epoch.burst_left:
            return epoch
    raise AssertionError("no burst longer than one piece in 200 draws")


def test_fewer_paths_leave_the_page_burst_alone() -> None:
    """A connection with fewer paths than the split numbers them
    differently: its bursts are its own and the page's burst goes on."""
    epoch = _page_with_a_burst_under_way(3)
    left, path = epoch.burst_left, epoch.burst_path
    for now, n in ((1001, 2), (1002, 1)):
        _take(epoch, 20, n, now)
        assert (epoch.burst_left, epoch.burst_path, epoch.draws) == (left, path, 1)
    assert _take(epoch, 20, 3, 1003)[0] == path


def test_an_idle_page_does_not_pass_its_burst_on() -> None:
    """What is left of a page's burst when the page goes idle is dropped:
    the next page draws a split and a burst of its own."""
    epoch = _page_with_a_burst_under_way(2)
    _take(epoch, 20, 2, 1000 + 501)
    assert epoch.draws == 2


@pytest.mark.parametrize("ncons", [20, 100])
def test_a_page_of_small_objects_crosses_in_bursts_of_mean_ncons(ncons: int) -> None:
    """Objects of one to three packets, each on a connection of its own
    that takes a piece and gives back what it did not send: the page's
    packets, in the order they are sent, run on one path for a geometric
    number of packets of mean ncons, as HyWF's bursts. Were the rest of
    each piece dropped, the runs would be a few packets long (three
    objects' worth at ncons 20, about a fifth of the mean at 100)."""
    rng = np.random.default_rng(20261207)
    epoch = HywfEpoch()
    runs: list[int] = []
    run_seq, now = 0, 1000
    while len(runs) < 8001:
        path, pkts, seq = _take_piece(epoch, ncons, 2, now)
        sent = min(pkts, int(rng.integers(1, 4)))
        if seq != run_seq:
            runs.append(0)
            run_seq, run_path = seq, path
        assert path == run_path, "a piece left its burst's path"
        runs[-1] += sent
        if sent < pkts:
            assert _give_back(epoch, 2, seq, pkts - sent, now)
        now += 1  # busy: well inside the idle gap
    runs = runs[:-1]  # the last burst may be unfinished
    assert epoch.draws == 1
    # the mean's 6 % is 5.4 standard errors: fails with 1e-7
    assert statistics.fmean(runs) == pytest.approx(ncons, rel=0.06)
    assert_geometric(runs, ncons, "runs of a page of small objects")


def test_a_piece_goes_back_only_to_the_burst_it_came_from() -> None:
    """What a connection leaves of its piece goes back only while the page
    is on the piece's burst: not once the page has moved on to its next
    burst, not to a page that went idle, not from a burst of the
    connection's own, and not from a connection numbering its paths
    differently."""
    epoch = HywfEpoch()
    seq = _take_piece(epoch, 20, 2, 1000)[2]
    while epoch.burst_left:  # the others take the rest of the burst
        _take_piece(epoch, 20, 2, 1001)
    assert _give_back(epoch, 2, seq, 1, 1002)  # still the page's burst: it goes on
    assert (epoch.burst_left, epoch.burst_seq) == (1, seq)
    _take_piece(epoch, 20, 2, 1003)
    _, _, next_seq = _take_piece(epoch, 20, 2, 1004)  # the burst is spent: the next one
    assert next_seq != seq
    left = epoch.burst_left
    assert not _give_back(epoch, 2, seq, 3, 1005)
    assert not _give_back(epoch, 3, next_seq, 3, 1005)
    assert not _give_back(epoch, 2, 0, 3, 1005)
    assert epoch.burst_left == left
    assert not _give_back(epoch, 2, next_seq, 3, 1004 + 501)  # the page is over
    assert epoch.burst_left == left
    page = HywfEpoch()
    _take_piece(page, 20, 3, 1000)
    # fewer paths than the split, or one: bursts of the connection's own
    assert _take_piece(page, 20, 2, 1001)[2] == 0
    assert _take_piece(page, 20, 1, 1002)[2] == 0


def test_a_connection_takes_back_what_no_other_took() -> None:
    """A sender whose queue ran dry between two writes gives the rest of
    its piece back and takes back, when it sends again, what no other
    connection took meanwhile: nothing once the page moved on."""
    lib = load_harness()
    epoch = HywfEpoch()
    seq = 0
    while not seq or epoch.burst_left < 10:  # a burst with room for a piece and more
        epoch = HywfEpoch()
        seq = _take_piece(epoch, 100, 2, 1000)[2]
    left = epoch.burst_left
    assert _give_back(epoch, 2, seq, 4, 1001)
    assert lib.harness_hywf_take_back(ctypes.byref(epoch), 2, seq, 4, 1002, 500) == 4
    assert epoch.burst_left == left
    assert _give_back(epoch, 2, seq, 4, 1003)
    _take_piece(epoch, 100, 2, 1004)  # another connection takes a piece: all that is left, or more
    assert lib.harness_hywf_take_back(ctypes.byref(epoch), 2, seq, 4, 1005, 500) == min(4, epoch.burst_left)
    assert lib.harness_hywf_take_back(ctypes.byref(epoch), 2, seq + 1, 4, 1006, 500) == 0
    assert lib.harness_hywf_take_back(ctypes.byref(epoch), 2, seq, 4, 1006 + 501, 500) == 0

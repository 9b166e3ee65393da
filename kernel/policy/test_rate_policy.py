"""The delivery-rate estimate bernoulli and delaybal weigh paths by
(rate_policy.h, the code the kernel runs)."""

from __future__ import annotations

from policy_harness import RateEstimate


def mbit(x: float) -> int:
    """Mbit/s in bytes per second."""
    return int(x * 1e6 / 8)


# An initial window of 10 x 1448 B over a 10 ms handshake RTT.
COLD_GUESS = 10 * 1448 * 100


def test_the_cold_start_guess_is_returned_but_never_kept() -> None:
    est = RateEstimate()
    assert est.update(0, COLD_GUESS, 1000) == COLD_GUESS
    assert est.max.value == 0
    # The first sample of a 5 Mbit/s path replaces the 11.6 Mbit/s guess
    # at once, though it is smaller.
    assert est.update(mbit(5), COLD_GUESS, 1050) == mbit(5)
    assert est.update(mbit(4.8), COLD_GUESS, 1100) == mbit(5)


def test_a_larger_sample_raises_the_estimate_at_once() -> None:
    est = RateEstimate()
    est.update(mbit(5), 0, 0)
    assert est.update(mbit(20), 0, 10) == mbit(20)


def test_smaller_samples_keep_the_maximum_for_a_window() -> None:
    """A lightly used subflow's samples show its load, not its capacity."""
    est = RateEstimate()
    est.update(mbit(8), 0, 0)
    for t in range(100, 2000, 100):
        assert est.update(mbit(1), 0, t) == mbit(8)


def test_decay_follows_elapsed_time_not_the_number_of_calls() -> None:
    """A quarter per 2 s window: after 10 s, 8 Mbit/s x (3/4)^5 = 1.9,
    so the latest sample (2 Mbit/s) is the estimate, whether the
    scheduler asked once in that time or every 100 ms."""
    sparse, dense = RateEstimate(), RateEstimate()
    sparse.update(mbit(8), 0, 0)
    dense.update(mbit(8), 0, 0)
    for t in range(100, 10_001, 100):
        dense_rate = dense.update(mbit(2), 0, t)
    sparse_rate = sparse.update(mbit(2), 0, 10_000)
    assert sparse_rate == dense_rate == mbit(2)
    # After one window, one quarter.
    est = RateEstimate()
    est.update(mbit(8), 0, 0)
    assert est.update(mbit(1), 0, 2100) == mbit(8) - mbit(8) // 4


def test_a_long_silence_takes_the_estimate_to_the_sample() -> None:
    est = RateEstimate()
    est.update(mbit(100), 0, 0)
    assert est.update(mbit(1), 0, 600_000) == mbit(1)


def test_wrapping_milliseconds() -> None:
    est = RateEstimate()
    start = 2**32 - 500
    est.update(mbit(8), 0, start)
    assert est.update(mbit(1), 0, start + 1000) == mbit(8)  # 1 s later, across the wrap
    assert est.update(mbit(1), 0, start + 2100) == mbit(6)

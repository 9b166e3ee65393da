"""The thresholds statistical tests derive from their false-failure
probability (braid_eval.analysis.false_failure), against scipy's binomial tails."""

from __future__ import annotations

import math

import pytest
from scipy.stats import binom

from braid_eval.analysis.false_failure import confirm_level, least_count, most_count, prob_below, share_tolerance


@pytest.mark.parametrize(("n", "p", "ffp"), [(20, 0.5, 1e-4), (20, 0.5, 0.025), (40, 0.5, 1e-3),
                                             (16, 0.64, 1e-4), (45, 1 / 8, 1e-4), (5, 0.5, 1e-4)])
def test_counts_are_the_tightest_that_keep_the_probability(n: int, p: float, ffp: float) -> None:
    least = least_count(n, p, ffp)
    assert prob_below(n, p, least) <= ffp
    assert least == n or prob_below(n, p, least + 1) > ffp
    most = most_count(n, p, ffp)
    assert binom.sf(most, n, p) <= ffp
    assert most == 0 or binom.sf(most - 1, n, p) > ffp


def test_known_values() -> None:
    # Binomial(20, 1/2): P(X <= 1) = 21 / 2^20, P(X <= 2) = 211 / 2^20
    assert least_count(20, 0.5, 1e-4) == 2
    assert prob_below(20, 0.5, 5) == pytest.approx(0.0059, abs=1e-4)
    assert least_count(5, 0.5, 1e-4) == 0  # 5 fair coins cannot reach 1e-4
    assert confirm_level(1e-4) == pytest.approx(0.01)


def test_share_tolerance_is_the_binomial_band() -> None:
    tol = share_tolerance(2000, 0.3, 0.01)
    # about 2.58 standard deviations of the share, exact tails
    assert tol == pytest.approx(2.576 * math.sqrt(0.3 * 0.7 / 2000), rel=0.05)
    low, high = round((0.3 - tol) * 2000), round((0.3 + tol) * 2000)
    assert binom.cdf(low - 1, 2000, 0.3) + binom.sf(high, 2000, 0.3) <= 0.01

"""How often a statistical test may fail a correct implementation, and the
thresholds that follow from it, in one place.

braid's tests check random behaviour (HyWF's splits and bursts, the
bernoulli scheduler's draws) against the model it follows. Such a check
can fail a correct kernel by chance; a test that does so fails for no
reason. Every statistical assertion therefore states its false-failure
probability per run, at most FALSE_FAILURE, and derives its threshold from
the model's distribution of what it counts, with these helpers:

* a count of independent events, each with probability at least ``p``
  under the model: :func:`least_count` (``Binomial(n, p)``'s lower tail);
  a count that must stay low: :func:`most_count`;
* a measured share of ``n`` independent decisions: :func:`share_tolerance`;
* a rejection confirmed on an independent, fresh sample before the test
  fails (both samples must reject): each is tested at
  :func:`confirm_level`, and a correct implementation fails with the
  product of the two levels.

Samples must be independent for these to hold: pages that share a HyWF
split (one epoch) are one sample, not several.

Usage::

    from braid_eval.analysis.false_failure import FALSE_FAILURE, least_count

    # at least k of 20 pages at or below 0.5, where each is with
    # probability 1/2: P(Binomial(20, 1/2) < k) <= 1e-4
    k = least_count(20, 0.5, FALSE_FAILURE)
"""

from __future__ import annotations

import math

from scipy.stats import binom

# Per test run, for each statistical assertion.
FALSE_FAILURE = 1e-4


def least_count(n: int, p: float, ffp: float) -> int:
    """The smallest count a correct implementation may show: the largest
    ``k`` with ``P(X < k) <= ffp`` for ``X ~ Binomial(n, p)``. A check
    ``count >= k`` fails a count that is ``X`` (or stochastically larger)
    with probability at most ``ffp``; 0 when no k > 0 qualifies."""
    k = 0
    while k < n and binom.cdf(k, n, p) <= ffp:
        k += 1
    return k


def most_count(n: int, p: float, ffp: float) -> int:
    """The largest count a correct implementation may show: the smallest
    ``k`` with ``P(X > k) <= ffp`` for ``X ~ Binomial(n, p)``."""
    k = n
    while k > 0 and binom.sf(k - 1, n, p) <= ffp:
        k -= 1
    return k


def prob_below(n: int, p: float, k: int) -> float:
    """``P(X < k)`` for ``X ~ Binomial(n, p)``: how often ``count >= k``
    fails."""
    return float(binom.cdf(k - 1, n, p))


def share_tolerance(n: int, p: float, ffp: float) -> float:
    """Half-width of the band around ``p`` that the share of ``n``
    independent decisions, each ``True`` with probability ``p``, leaves
    with probability at most ``ffp`` (exact binomial tails, ``ffp / 2``
    each side)."""
    low = least_count(n, p, ffp / 2)
    high = most_count(n, p, ffp / 2)
    return max(p - low / n, high / n - p)


def confirm_level(ffp: float) -> float:
    """The level at which each of two independent samples is tested when a
    rejection of the first is confirmed on a fresh one and the test fails
    only if both reject: ``sqrt(ffp)``, so that a correct implementation
    fails with probability at most ``ffp``."""
    return math.sqrt(ffp)

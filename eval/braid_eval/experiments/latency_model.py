"""The thesis's latency model (ch. 5) for two paths: Bernoulli splitting of
Poisson traffic over two M/M/1 queues, with its optimum.

Rates are in messages per second: a path of capacity C bit/s serving
messages of mean size S bytes has mu = C / (8 S). With a share p of the
load lambda on path 1, each path is an M/M/1 queue with arrival rate
p lambda (resp. (1 - p) lambda), and the mean delay of a message is

    D(p) = p / (mu1 - p lambda) + (1 - p) / (mu2 - (1 - p) lambda)    (5.3-5.4)

Below lambda0 = mu1 - sqrt(mu1 mu2) (5.8) the faster path alone is best
(p* = 1); above it, p* lambda = (sqrt(mu1) lambda + sqrt(mu1 mu2)
(sqrt(mu1) - sqrt(mu2))) / (sqrt(mu1) + sqrt(mu2)). The static split that
keeps both queues stable at every load is p_lim = mu1 / (mu1 + mu2) (5.5),
the capacity-proportional one.

When the slow path's rate alternates between mu_h and mu_l (exponential
sojourns, leaving rates a_h and a_l: a Markov-modulated M/M/1 queue), its
mean queue length is (B.13), and the optimum is found numerically.
"""

from __future__ import annotations

import math

from scipy import optimize


def mm1_delay(shares: list[float], mu: list[float], lam: float) -> float:
    """Mean sojourn time in seconds of a Bernoulli split over M/M/1 queues
    (any number of paths); inf when a queue is unstable."""
    delay = 0.0
    for share, rate in zip(shares, mu, strict=True):
        if share <= 0:
            continue
        if share * lam >= rate:
            return math.inf
        delay += share / (rate - share * lam)
    return delay


def lambda0(mu1: float, mu2: float) -> float:
    """Load below which the faster path alone beats any split (mu1 >= mu2)."""
    return mu1 - math.sqrt(mu1 * mu2)


def p_lim(mu1: float, mu2: float) -> float:
    """The capacity-proportional split."""
    return mu1 / (mu1 + mu2)


def p_star(mu1: float, mu2: float, lam: float) -> float:
    """The delay-optimal share of path 1 (the faster, mu1 >= mu2) at load lam."""
    if lam <= lambda0(mu1, mu2):
        return 1.0
    r1, r2 = math.sqrt(mu1), math.sqrt(mu2)
    return min(1.0, (r1 * lam + r1 * r2 * (r1 - r2)) / ((r1 + r2) * lam))


def mmpp_queue_length(lam: float, mu_h: float, mu_l: float, a_h: float, a_l: float) -> float:
    """Thesis (B.13): mean length of a queue whose server alternates between
    rates mu_h and mu_l (exponential sojourns, leaving rates a_h, a_l)."""
    if lam <= 0:
        return 0.0
    a = a_h + a_l
    mu = (a_l * mu_h + a_h * mu_l) / a
    if lam >= mu:
        return math.inf
    var = (a_l * mu_h**2 + a_h * mu_l**2) / a - mu**2
    if var == 0:
        return lam / (mu - lam)
    z: float = optimize.brentq(lambda z: a * z * (mu - lam * z) - (1 - z) * (mu_h - lam * z) * (mu_l - lam * z),
                               1e-12, 1 - 1e-12)
    f = (1 - z) / (mu - lam * z)
    return lam / (mu - lam) + lam / (a * (mu - lam)) * f * var


def variable_split_delay(p: float, lam: float, mu1: float,
                         slow: tuple[float, float, float, float]) -> float:
    """Mean delay (s) of share p on an M/M/1 path of rate mu1 and the rest on
    a Markov-modulated path ``slow`` = (mu_h, mu_l, a_h, a_l) (5.3-5.4)."""
    if p * lam >= mu1:
        return math.inf
    fast = p * lam / (mu1 - p * lam)
    return (fast + mmpp_queue_length((1 - p) * lam, *slow)) / lam


def variable_p_star(lam: float, mu1: float, slow: tuple[float, float, float, float]) -> float:
    """The delay-optimal share of the fast path when the slow one varies."""
    mu_h, mu_l, a_h, a_l = slow
    mean_slow = (a_l * mu_h + a_h * mu_l) / (a_h + a_l)
    low = max(0.0, 1 - mean_slow / lam) + 1e-9
    high = min(1.0, mu1 / lam) - 1e-9
    if low >= high:
        return high
    best = optimize.minimize_scalar(lambda p: variable_split_delay(p, lam, mu1, slow),
                                    bounds=(low, high), method="bounded", options={"xatol": 1e-6})
    return float(best.x)

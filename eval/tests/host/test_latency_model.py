"""E2's model curves (latency_model.py) against a numerical optimum, and
its report on made-up points."""

from __future__ import annotations

import math

import pytest
from scipy import optimize

from braid_eval.experiments.latency import Point, model_ms, report, service_rates
from braid_eval.experiments.latency_model import (
    lambda0,
    mm1_delay,
    p_lim,
    p_star,
    variable_p_star,
    variable_split_delay,
)

MU1, MU2 = 2678.6, 446.4  # 30 and 5 Mbit/s in 1400-byte packets


@pytest.mark.parametrize("frac", [0.2, 0.5, 0.6, 0.8, 0.9, 0.95])
def test_p_star_minimises_the_mean_delay(frac: float) -> None:
    lam = frac * (MU1 + MU2)
    low = max(0.0, 1 - MU2 / lam) + 1e-9
    high = min(1.0, MU1 / lam) - 1e-9
    best = optimize.minimize_scalar(lambda p: mm1_delay([p, 1 - p], [MU1, MU2], lam),
                                    bounds=(low, high), method="bounded",
                                    options={"xatol": 1e-10})
    ours = p_star(MU1, MU2, lam)
    assert mm1_delay([ours, 1 - ours], [MU1, MU2], lam) <= best.fun * (1 + 1e-6)
    assert ours == pytest.approx(best.x, abs=1e-3)


def test_lambda0_is_where_the_slow_path_starts_to_help() -> None:
    lam0 = lambda0(MU1, MU2)
    assert p_star(MU1, MU2, lam0 * 0.99) == 1.0
    assert p_star(MU1, MU2, lam0 * 1.05) < 1.0
    assert lam0 == pytest.approx(MU1 - math.sqrt(MU1 * MU2))


def test_thesis_example() -> None:
    """ch. 5 with homogeneous queues: 1.0 ms at 19 Mbit/s, 3.1 ms at 29."""
    for mbit, expect_ms in ((19, 1.02), (29, 3.06)):
        lam = mbit / 35 * (MU1 + MU2)
        p = p_star(MU1, MU2, lam)
        assert 1e3 * mm1_delay([p, 1 - p], [MU1, MU2], lam) == pytest.approx(expect_ms, rel=0.02)


def test_capacity_proportional_split_is_stable_to_saturation_only() -> None:
    p = p_lim(MU1, MU2)
    assert math.isfinite(mm1_delay([p, 1 - p], [MU1, MU2], 0.999 * (MU1 + MU2)))
    assert mm1_delay([p, 1 - p], [MU1, MU2], MU1 + MU2) == math.inf


def test_model_curves_order_and_report() -> None:
    """p*'s curve never lies above p_lim's, and the report shows each
    configuration's measurement beside them."""
    for load in (0.1, 0.5, 0.9):
        pstar_ms, plim_ms = model_ms(load)
        assert pstar_ms <= plim_ms
    mu1, mu2 = service_rates()
    assert mu1 / mu2 == pytest.approx(6.0)
    points = [Point(scenario="steady", config=c, load=0.3, offered_mbit=10.0, messages=100, mean_ms=m, p50_ms=m,
                    p99_ms=2 * m, wan1_share=s, model_pstar_ms=model_ms(0.3)[0],
                    model_plim_ms=model_ms(0.3)[1])
              for c, m, s in (("bernoulli", 7.5, 0.99), ("default", 9.25, 0.7))]
    text = report(points, {"seconds": 8, "kernel": "test"})
    assert "| 0.30 | 7.50 | 9.25 |" in text
    assert "| 0.30 | 0.99 | 0.70 | 1.00 |" in text


def test_variable_slow_link_model_matches_the_thesis_headline() -> None:
    """ch. 5's headline, in its 1400-byte packets: the slow link alternates
    7 <-> 3 Mbit/s (mean sojourn 1 s); at 29 Mbit/s p* gives 3.8 ms and the
    capacity-proportional split 50 ms (thesis: 3.9 and 51)."""
    per_mbit = MU2 / 5
    slow = (7 * per_mbit, 3 * per_mbit, 1.0, 1.0)
    lam = 29 * per_mbit
    best = variable_p_star(lam, MU1, slow)
    assert 1e3 * variable_split_delay(best, lam, MU1, slow) == pytest.approx(3.8, rel=0.05)
    assert 1e3 * variable_split_delay(p_lim(MU1, MU2), lam, MU1, slow) == pytest.approx(50, rel=0.05)


def test_variable_model_without_variation_is_the_steady_one() -> None:
    lam = 0.8 * (MU1 + MU2)
    steady = (MU2, MU2, 1.0, 1.0)
    for p in (0.8, 0.9):
        assert variable_split_delay(p, lam, MU1, steady) == pytest.approx(
            mm1_delay([p, 1 - p], [MU1, MU2], lam), rel=1e-9)
    assert model_ms(0.8, "variable")[1] > model_ms(0.8, "steady")[1]

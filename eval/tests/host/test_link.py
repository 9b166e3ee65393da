"""LinkSpec validation and the netem arguments it produces."""

from __future__ import annotations

import pytest

from braid_testbed.link import LinkSpec, netem_args


def test_netem_args_carry_every_impairment() -> None:
    spec = LinkSpec(rate_mbit=20, delay_ms=10, jitter_ms=2, loss_pct=0.5, queue_pkts=100)
    assert netem_args(spec) == [
        "delay", "10ms", "2ms", "distribution", "normal",
        "loss", "0.5%", "rate", "20mbit", "limit", "100",
    ]


def test_unshaped_link_is_not_emulated() -> None:
    assert not LinkSpec().emulated
    assert netem_args(LinkSpec()) == []


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (LinkSpec(rate_mbit=0), "rate_mbit"),
        (LinkSpec(rate_mbit=-5), "rate_mbit"),
        (LinkSpec(delay_ms=-1), "delay_ms"),
        (LinkSpec(delay_ms=5, jitter_ms=6), "jitter_ms"),
        (LinkSpec(jitter_ms=1), "jitter_ms"),
        (LinkSpec(loss_pct=100), "loss_pct"),
        (LinkSpec(queue_pkts=0), "queue_pkts"),
    ],
)
def test_bad_values_name_the_field(spec: LinkSpec, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        spec.validate()

"""Emulated link properties and how they are applied with tc/netem.

A :class:`LinkSpec` describes one direction's impairments; links are shaped on
both ends' egress so each direction is emulated independently (netem shapes
only what leaves an interface).

Usage::

    wan = LinkSpec(rate_mbit=20, delay_ms=15, jitter_ms=2, loss_pct=0.1)
    wan.validate()
    netem_args(wan)   # -> ["delay", "15ms", "2ms", "loss", "0.1%", ...]
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class LinkSpec:
    """Impairments of one link direction; ``None``/0 means not emulated."""

    rate_mbit: float | None = None
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    # Queue limit in packets. netem's default (1000) is a deep buffer; a WAN
    # modem queue is closer to one bandwidth-delay product.
    queue_pkts: int | None = None

    def validate(self) -> None:
        """Raise ValueError naming the field for impossible values."""
        if self.rate_mbit is not None and not 0 < self.rate_mbit <= 100_000:
            raise ValueError(f"rate_mbit must be in (0, 100000], got {self.rate_mbit}")
        if not 0 <= self.delay_ms <= 10_000:
            raise ValueError(f"delay_ms must be in [0, 10000], got {self.delay_ms}")
        if not 0 <= self.jitter_ms <= self.delay_ms or (self.jitter_ms and not self.delay_ms):
            raise ValueError(f"jitter_ms must be in [0, delay_ms], got {self.jitter_ms}")
        if not 0 <= self.loss_pct < 100:
            raise ValueError(f"loss_pct must be in [0, 100), got {self.loss_pct}")
        if self.queue_pkts is not None and not 1 <= self.queue_pkts <= 1_000_000:
            raise ValueError(f"queue_pkts must be in [1, 1000000], got {self.queue_pkts}")

    @property
    def emulated(self) -> bool:
        return bool(self.rate_mbit or self.delay_ms or self.loss_pct or self.queue_pkts)


def netem_args(spec: LinkSpec) -> list[str]:
    """Arguments after ``tc qdisc replace dev X root netem``."""
    args: list[str] = []
    if spec.delay_ms:
        args += ["delay", f"{spec.delay_ms}ms"]
        if spec.jitter_ms:
            # Pareto-normal jitter reorders packets; a plain normal
            # distribution with rate-based netem keeps order as real links do.
            args += [f"{spec.jitter_ms}ms", "distribution", "normal"]
    if spec.loss_pct:
        args += ["loss", f"{spec.loss_pct}%"]
    if spec.rate_mbit:
        args += ["rate", f"{spec.rate_mbit}mbit"]
    if spec.queue_pkts:
        args += ["limit", str(spec.queue_pkts)]
    return args

"""The conditions braid runs a page load under, for the fingerprinting
collections (``braid-wf collect``) and the page-load benchmark
(``braid_eval.bench.pageload``): the scheduler at both ends, its
settings, braid-proxy's adaptive padding, Tor mode."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

# braid-proxy's padding budget and the kernel's p-drift when a condition
# asks for them and the command line does not say (collect's defaults).
PADDING_BUDGET = 0.4
N_CHP = 100


class Condition(NamedTuple):
    """How a collected condition runs braid: the scheduler at both ends,
    whether the second WAN is used, and HyWF-AP's parts: braid's adaptive
    padding at both ends (collect's --padding-budget) and the kernel's
    p-drift (--n-chp, the thesis's dynamic p)."""

    scheduler: str
    multipath: bool = True
    padded: bool = False
    drift: bool = False
    # net.mptcp.* settings at both ends, with the scheduler
    sysctls: tuple[tuple[str, int], ...] = ()
    # Tor mode: through a private Tor network and the braid bridge
    # (braid_wf.tor_collect), not braid-proxy
    tor: bool = False


# The even split: every segment to either WAN with probability 1/2
# (bernoulli at a fixed 500 per mille, one segment per decision): round
# robin's shares, in random rather than alternating order. braid's kernel
# has no round-robin scheduler (upstream's is a BPF selftest).
EVEN_SPLIT = (("bernoulli_adaptive", 0), ("bernoulli_permille", 500), ("bernoulli_batch", 1))


# hywf with bursts of this many packets on average (net.mptcp.hywf_ncons)
# instead of its 20: each network then carries whole stretches of a
# flight, which the fingerprinting attacks read less well than the
# thinned flights of short bursts (simulated on web-shaped loads).
LONG_BURST = 100


CONDITIONS = {"single": Condition("default", multipath=False), "default": Condition("default"),
              "hywf": Condition("hywf"), "hywf-long": Condition("hywf", sysctls=(("hywf_ncons", LONG_BURST),)),
              "even": Condition("bernoulli", sysctls=EVEN_SPLIT),
              "ap": Condition("default", padded=True),
              "hywf-ap": Condition("hywf", padded=True, drift=True),
              "hywf-ap-long": Condition("hywf", padded=True, drift=True, sysctls=(("hywf_ncons", LONG_BURST),)),
              "tor-hywf": Condition("hywf", tor=True), "tor-default": Condition("default", tor=True)}


def settings(cond: Condition, n_chp: int = N_CHP) -> tuple[tuple[str, int], ...]:
    """The net.mptcp.* settings (without ``net.mptcp.``) both ends get with
    the condition's scheduler."""
    return cond.sysctls + ((("hywf_nchp", n_chp),) if cond.drift else ())


def padding_args(cond: Condition, budget: float = PADDING_BUDGET,
                 histograms: Path | None = None) -> tuple[str, ...]:
    """braid-proxy's options (client and server alike) for the condition's
    padding: none for an unpadded one."""
    if not cond.padded:
        return ()
    return ("-padding-budget", str(budget), *(("-padding-histograms", str(histograms)) if histograms else ()))

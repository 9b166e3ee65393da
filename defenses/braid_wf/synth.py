"""Packet traces of the synthetic websites without a network: the host-only
stand-in for captured loads, so the attacks and the evaluation protocol can
be exercised (and unit-tested) in seconds.

A load's objects (websites.load_waves) are fetched wave by wave, at most six
connections at a time; the requests leave at the wave's start, the
responses share one bottleneck of a per-load rate after one RTT, packets of
the objects in flight interleaved at random. RTT, rate and per-packet jitter
vary per load, so two loads of a site differ in timing as well as sizes.

These traces are synthetic: numbers measured on them say that the attack
code works, not how braid fares. braid's figures come from captures
(``python3 -m braid_wf collect``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from braid_testbed.websites import MSS, load_waves
from braid_wf.parallel import map_chunks, workers
from braid_wf.trace import Dataset, Trace

PARALLEL = 6


def simulate_load(site: int, instance: int, seed: int = 1, profile: str = "small") -> Trace:
    rng = np.random.default_rng([seed, site, instance, 7])
    rtt = rng.uniform(0.04, 0.12)
    rate = rng.uniform(2e6, 6e6)  # bytes/s
    times: list[float] = []
    sizes: list[int] = []
    t = 0.0
    for wave in load_waves(site, instance, seed, profile):
        for c in range(0, len(wave), PARALLEL):
            chunk = wave[c : c + PARALLEL]
            for _size, req in chunk:
                for k in range(0, req, MSS):
                    times.append(t + rng.uniform(0, 0.002))
                    sizes.append(min(MSS, req - k))
            left = [size for size, _ in chunk]
            now = t + rtt
            while any(left):
                live = [i for i, v in enumerate(left) if v > 0]
                i = live[int(rng.integers(len(live)))]
                pkt = min(MSS, left[i])
                left[i] -= pkt
                now += pkt / rate * rng.uniform(0.7, 1.3)
                times.append(now)
                sizes.append(-pkt)
            t = now + rng.uniform(0.005, 0.03)  # parse, then the next wave
    order = np.argsort(times, kind="stable")
    return Trace(np.asarray(times)[order], np.asarray(sizes)[order])


def _loads(which: Sequence[tuple[int, int]], seed: int, profile: str, idx: Sequence[int]) -> list[Trace]:
    return [simulate_load(*which[i], seed, profile) for i in idx]


def synthetic_dataset(sites: int, instances: int, unmonitored: int = 0, seed: int = 1, jobs: int = 1,
                      profile: str = "small") -> Dataset:
    """``sites`` x ``instances`` monitored loads and ``unmonitored`` loads of
    other sites (one each) of websites.py's ``profile``, labelled as a
    published dataset would be; simulated in ``jobs`` processes (the same
    loads whatever ``jobs``)."""
    ds = Dataset([], [], [])
    which: list[tuple[int, int]] = []
    for inst in range(instances):
        for s in range(sites):
            which.append((s, inst))
            ds.labels.append(s)
            ds.names.append(f"{s}-{inst}")
    for n in range(unmonitored):
        which.append((100_000 + n, 0))
        ds.labels.append(-1)
        ds.names.append(str(n))
    with workers(jobs if len(which) >= 200 else 1) as pool:
        ds.traces.extend(map_chunks(pool, partial(_loads, which, seed, profile), len(which), jobs))
    return ds

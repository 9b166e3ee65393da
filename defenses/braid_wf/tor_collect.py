"""Tor mode's page loads: the corpus through a private Tor network, the
client's tor reaching the braid bridge over MPTCP across both WANs.

The same pages as ``wf collect``'s other conditions (braid_wf.corpus),
served next to the exit relay, loaded through the client tor's SOCKS port;
each WAN is captured between the client and the bridge's transport, so a
trace is what one network's observer of a Tor-mode user sees: TLS records
of tor cells on braid-pt's MPTCP connection, split by the scheduler of
both ends. Every load goes over tor's one connection to the bridge, as a
user's pages do::

    c: loader -> tor client + braid-pt ══ WAN1/WAN2 (MPTCP) ══ s: braid-pt -> bridge tor
                                                               s ── d: relays, exit, corpus

Run in braid's kernel (``kernel/vm run -- python3 -m braid_wf collect
--condition tor-hywf ...``): the schedulers and the shaped WANs are its.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from braid_eval.analysis.dss import WIRE_MSS
from braid_testbed.capture import WanCapture
from braid_testbed.privnet import CLIENT_W1, CLIENT_W2, PT_PORT, WEB_IP, LinkSpec, PrivateTorNetwork
from braid_wf import collection
from braid_wf.corpus import PORT, corpus_server, generator_args, load_pages

# A client's tor bootstraps in 15-60 s under braid's emulated VM.
BOOTSTRAP_S = 240
# The first loads after the scheduler's restart of the transport may fail
# while tor notices that its connection closed and opens another.
RECONNECT_S = 180
# Tor's three hops under an emulated CPU: a load takes several times as
# long as through braid-proxy.
PER_LOAD_S = 90


def collect(todo: collection.Plan, scheduler: str, args: argparse.Namespace, log: Callable[[str], None]) -> int:
    """Collects ``todo``'s loads with ``scheduler`` on both ends of the
    client's connection to the bridge."""
    spec = LinkSpec(rate_mbit=args.rate_mbit, delay_ms=args.delay_ms)
    server = f"{WEB_IP}:{PORT}"
    with PrivateTorNetwork(wan1=spec, wan2=spec) as net:
        for role in ("c", "s"):
            net.tb[role].sysctl("net.mptcp.scheduler", scheduler)
        # An accepted connection keeps its listener's scheduler: the
        # bridge's transport listens again under this one.
        net.restart_pt_server()
        with corpus_server(net.tb["d"], server), net.client() as client:
            took = client.wait_bootstrapped(BOOTSTRAP_S)
            log(f"{todo.label}: the client's tor bootstrapped in {took:.0f} s")
            socks = f"127.0.0.1:{client.socks_port}"
            _first_load(net, server, socks, args.gap_ms)
            failed = collection.collect_batches(
                todo, args.batch, lambda: (WanCapture(net.tb["c"], "c-w1", "wan1"),
                                           WanCapture(net.tb["c"], "c-w2", "wan2")),
                lambda batch: load_pages(net.tb["c"], server, socks, batch, args.gap_ms,
                                         generator_args(args.seed, args.profile), per_load_s=PER_LOAD_S),
                {CLIENT_W1, CLIENT_W2}, PT_PORT, WIRE_MSS, {"transport": "tor"}, log, net.stream_failures)
    return 1 if failed else 0


def _first_load(net: PrivateTorNetwork, server: str, socks: str, gap_ms: int) -> None:
    """One load, not recorded, until one succeeds: tor's circuit is built
    and its connection to the bridge open before the first measured load."""
    deadline = time.monotonic() + RECONNECT_S
    while True:
        proc, results = load_pages(net.tb["c"], server, socks, [(0, 0)], gap_ms, per_load_s=PER_LOAD_S)
        if results and results[0]["ok"]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"no load through tor within {RECONNECT_S} s of the transport's restart: "
                               f"{proc.stderr.strip()[-600:]}\n{net.stream_failures()}")
        time.sleep(1)

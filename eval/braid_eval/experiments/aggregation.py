"""E1, Binder's aggregation experiment: goodput of one and of ten upload
flows over two 10 Mbit/s gateways with 80 ms RTT, with loss or extra RTT on
gw1, for each braid scheduler against single-gateway TCP.

Binder (Boccassi, Fayed and Marina, ACM LCDNet 2013) impaired only the
GW1 path: loss swept 0-1 %, RTT 80-120 ms against 80 ms, and compared the
mean goodput of 30 s iperf flows with single-gateway TCP (reported: "perfect
bandwidth aggregation" at low loss; with 10 flows "the total goodput
exceeds 16 Mbps"; per-flow CoV 5-20 %, 17-25 % with unequal RTTs).

Here: the standard testbed, wan1 and wan2 at 10 Mbit/s with 40 ms one way
each (the 80 ms RTT), gw1's link reshaped per scenario on one testbed. Each
point uploads ``--flows`` parallel checksummed transfers (bulk.py) from
the client to the proxy: over MPTCP with the scheduler under test, or over
plain TCP through gw1 (the default route: Binder's baseline). Reported:
aggregate goodput (all bytes over the span from the first start to the last
end), its ratio to single-gateway TCP, and the per-flow coefficient of
variation.

    kernel/vm run -- python3 -m braid_eval.experiments.aggregation                 # quick
    kernel/vm run --timeout 5400 -- python3 -m braid_eval.experiments.aggregation --full --out out/e1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from braid_eval.analysis.provenance import provenance
from braid_eval.measure.transfer import BULK_PORT, BulkServer, bulk_client
from braid_eval.progress import Progress
from braid_testbed import LinkSpec, StandardTestbed, ip, kernel_has_netem
from braid_testbed.standard import scheduler_testbed

TCP_PORT = BULK_PORT + 2
GATEWAY = LinkSpec(rate_mbit=10, delay_ms=40, queue_pkts=100)
CONFIGS = ("tcp-gw1", "default", "hywf", "bernoulli", "delaybal", "redundant")
# (name, loss % on gw1, one-way delay on gw1 in ms)
QUICK_SCENARIOS = (("lossless", 0.0, 40.0),)
FULL_SCENARIOS = (("lossless", 0.0, 40.0), ("loss 0.1%", 0.1, 40.0), ("loss 0.5%", 0.5, 40.0),
                  ("loss 1%", 1.0, 40.0), ("rtt 100 ms", 0.0, 50.0), ("rtt 120 ms", 0.0, 60.0))
BYTES_PER_POINT = 16 << 20


@dataclasses.dataclass
class Point:
    scenario: str
    config: str
    flows: int
    goodput_mbit: float
    vs_tcp: float
    flow_cov: float
    digest_ok: bool


def impair_gw1(tb: StandardTestbed, loss_pct: float, delay_ms: float) -> None:
    """gw1's path, both directions (the client's side up, gw1's side down)."""
    spec = dataclasses.replace(GATEWAY, loss_pct=loss_pct, delay_ms=delay_ms)
    tb.shape("client", "wan1", spec)
    tb.shape("gw1", "lan", spec)


def run_flows(tb: StandardTestbed, port: int, flows: int, tcp: bool) -> tuple[float, float, bool]:
    """``flows`` parallel uploads sharing BYTES_PER_POINT; (aggregate
    goodput in Mbit/s, per-flow coefficient of variation, all intact)."""
    each = BYTES_PER_POINT // flows
    args = ["--tcp"] if tcp else []
    args += ["send", "--host", ip("proxy", "core"), "--port", str(port), "--bytes", str(each),
             "--parallel", str(flows)]
    proc = bulk_client(tb, args, 600)
    results = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    if proc.returncode not in (0, 1) or len(results) != flows:
        raise RuntimeError(f"{len(results)} of {flows} flows finished ({proc.returncode}): "
                           f"{proc.stderr.strip()}")
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    goodput = sum(r["bytes"] for r in results) * 8 / span / 1e6
    per_flow = [r["goodput_mbit"] for r in results]
    cov = statistics.pstdev(per_flow) / statistics.mean(per_flow) if flows > 1 else 0.0
    return goodput, cov, all(r["digest_ok"] for r in results)


def sweep(configs: tuple[str, ...], scenarios: tuple[tuple[str, float, float], ...],
          flow_counts: tuple[int, ...], tag: str = "e1") -> Iterator[Point]:
    """Every configuration, flow count and scenario on one testbed; the
    TCP baseline runs first in each scenario so that ratios can be given."""
    order = ("tcp-gw1", *[c for c in configs if c != "tcp-gw1"])
    progress = Progress("e1", len(order) * len(scenarios) * len(flow_counts))
    with (scheduler_testbed(tag, "default", GATEWAY, GATEWAY) as tb, BulkServer(tb),
          BulkServer(tb, port=TCP_PORT, mptcp=False)):
        for name, loss, delay in scenarios:
            impair_gw1(tb, loss, delay)
            for flows in flow_counts:
                tcp = 0.0
                for config in order:
                    t0 = time.monotonic()
                    if config != "tcp-gw1":
                        tb.set_scheduler(config)
                    goodput, cov, ok = run_flows(tb, TCP_PORT if config == "tcp-gw1" else BULK_PORT,
                                                 flows, tcp=config == "tcp-gw1")
                    tcp = goodput if config == "tcp-gw1" else tcp
                    progress.step(f"{name:10} {flows:2} flow(s) {config:9} "
                                  f"{goodput:6.2f} Mbit/s = {goodput / tcp:4.2f} x TCP, flow CoV {cov:.2f}"
                                  f"{'' if ok else ' CHECKSUM MISMATCH'}, {time.monotonic() - t0:.0f} s")
                    if config in configs:
                        yield Point(name, config, flows, goodput, goodput / tcp, cov, ok)


def report(points: list[Point], params: dict[str, object]) -> str:
    configs = list(dict.fromkeys(p.config for p in points))
    lines = ["# E1: Binder's aggregation experiment", "",
             f"Two gateways of {GATEWAY.rate_mbit:g} Mbit/s, 80 ms RTT; gw1's path impaired per "
             f"scenario; {BYTES_PER_POINT // 2**20} MiB uploaded per point, split over the flows; "
             f"kernel {params['kernel']}. Goodput in Mbit/s (x single-gateway TCP through gw1); "
             "CoV = per-flow coefficient of variation.", "",
             "| scenario | flows | " + " | ".join(configs) + " |", "|---" * (len(configs) + 2) + "|"]
    keyed = {(p.scenario, p.flows, p.config): p for p in points}
    for scenario, flows in dict.fromkeys((p.scenario, p.flows) for p in points):
        cells = []
        for c in configs:
            pt = keyed.get((scenario, flows, c))
            cells.append("-" if pt is None else f"{pt.goodput_mbit:.1f} ({pt.vs_tcp:.2f}x"
                         + (f", CoV {pt.flow_cov:.2f})" if flows > 1 else ")"))
        lines.append(f"| {scenario} | {flows} | " + " | ".join(cells) + " |")
    lines += ["", "Published (Binder, 10 Mbit/s Dummynet paths, 30 s iperf): perfect aggregation at "
              "low loss; 10 flows above 16 Mbit/s in total for RTTs 80-120 ms; per-flow CoV 5-20 % "
              "(17-25 % with unequal RTTs). Target for braid: >= 1.8x single-gateway TCP at <= 0.1 % "
              "loss. braid's numbers are measured in braid's kernel on emulated links."]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true",
                   help="every scenario, 1 and 10 flows (quick: lossless, 1 flow)")
    p.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS),
                   help="tcp-gw1 always runs (it is the baseline)")
    p.add_argument("--scenarios", nargs="+", choices=[s[0] for s in FULL_SCENARIOS],
                   help="only these gw1 scenarios (default: by mode)")
    p.add_argument("--flows", nargs="+", type=int,
                   help="only these flow counts, each 1-64 (default: by mode)")
    p.add_argument("--out", type=Path, default=Path("out/e1"))
    args = p.parse_args()
    if args.flows and not all(1 <= f <= 64 for f in args.flows):
        p.error("--flows: each must be 1-64")
    if not kernel_has_netem():
        print("e1: needs braid's kernel (run through kernel/vm)", file=sys.stderr)
        return 2
    scenarios = (tuple(s for s in FULL_SCENARIOS if s[0] in args.scenarios) if args.scenarios
                 else FULL_SCENARIOS if args.full else QUICK_SCENARIOS)
    flow_counts = tuple(args.flows) if args.flows else (1, 10) if args.full else (1,)
    params: dict[str, object] = {"mode": "full" if args.full else "quick", "bytes": BYTES_PER_POINT,
                                 "scenarios": scenarios, "flows": flow_counts,
                                 "gateway": dataclasses.asdict(GATEWAY), **provenance()}
    points = list(sweep(tuple(args.configs), scenarios, flow_counts))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "e1.json").write_text(json.dumps(
        {"params": params, "points": [dataclasses.asdict(pt) for pt in points]}, indent=1) + "\n")
    text = report(points, params)
    (args.out / "e1.md").write_text(text)
    print("\n" + text)
    return 0 if all(pt.digest_ok for pt in points) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""braid-proxy benchmark: throughput and connection-setup latency of
braid-proxy vs direct MPTCP vs a reference SOCKS proxy (microsocks), side by
side in one run, plus the effect of racing the first subflow when the best
gateway is slow. Prints the numbers and the ratios; never a pass/fail.

Topology: proxy/tests/braidnet.py (two veth WANs, no netem on the host, so
the path RTT is that of veth, ~0.1 ms). Throughput is measured twice: on raw
veth (CPU-bound: every user-space hop competes for the same cores) and with
each WAN shaped by tbf to --wan-mbit (network-bound, like real access links). The "slow gateway" is emulated with
SYN loss on WAN1 (nftables, probability --syn-loss): the only impairment this
host's kernel offers without netem. Rounds are interleaved so background load
(e.g. a kernel build on the same 2 cores) hits every variant alike.

Usage: sudo proxy/bench.sh [--rounds 3] [--bytes 512M] [--setup-conns 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from braidnet import (
    CLIENT_W1,
    CLIENT_W2,
    DEST,
    SERVER_PUBLIC,
    Testbed,
    build_binaries,
    write_secret,
)

SINK = f"{DEST}:9000"
KEY = "bench " + "4b" * 32 + "\n"


def loadgen(tb, lg, *args, timeout=300):
    # No half-close: microsocks cannot forward a FIN; the same for all variants.
    r = tb.run("c", str(lg), "run", "-target", SINK, "-halfclose=false", *args, timeout=timeout, check=False)
    try:
        res = json.loads(r.stdout.splitlines()[0])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"loadgen failed: {r.stdout}\n{r.stderr}") from None
    if res["failed"]:
        print(f"  !! {res['failed']} of {res['conns']} connections failed: {res.get('first_error')}", flush=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved throughput rounds")
    ap.add_argument("--bytes", default="512M", help="bytes downloaded per throughput run")
    ap.add_argument("--setup-conns", type=int, default=300, help="sequential connections per setup-latency variant")
    ap.add_argument("--race-conns", type=int, default=40, help="sequential connections per racing variant")
    ap.add_argument("--syn-loss", type=int, default=50, help="percent of SYNs dropped on the slow gateway (WAN1)")
    ap.add_argument(
        "--wan-mbit",
        type=int,
        default=200,
        help="second throughput scenario: each WAN shaped to this rate with tbf (0 skips it)",
    )
    ap.add_argument("--shaped-bytes", default="128M", help="bytes per run in the shaped scenario")
    ap.add_argument("--json", type=Path, help="also write all results here")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="braid-bench-"))
    proxy, lg = build_binaries(work / "bin")
    results: dict = {"config": vars(args) | {"json": str(args.json) if args.json else None}}
    with Testbed() as tb:
        keys = write_secret(work / "keys", KEY)
        tb.spawn("d", [str(lg), "serve", "-listen", SINK, "-mptcp"])
        tb.spawn(
            "s",
            [
                str(proxy),
                "server",
                "-listen",
                f"{SERVER_PUBLIC}:7443",
                "-key-file",
                str(keys),
                "-allow-cidr",
                "10.9.0.0/24",
                "-allow-plaintext",
                "-metrics-listen",
                "",
                "-log-level",
                "warn",
            ],
            log=work / "server.log",
        )
        tb.spawn("s", ["microsocks", "-i", SERVER_PUBLIC, "-p", "1081"], log=work / "microsocks.log")
        gw_file = work / "gateways.json"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        gw_file.write_text(
            json.dumps(
                {
                    "version": 1,
                    "updated": now,
                    "gateways": [
                        {
                            "id": "gw1",
                            "source": CLIENT_W1,
                            "up": True,
                            "backup": False,
                            "ewma_ms": 1.0,
                            "rtt_ms": 1.0,
                            "last_change": now,
                        },
                        {
                            "id": "gw2",
                            "source": CLIENT_W2,
                            "up": True,
                            "backup": False,
                            "ewma_ms": 2.0,
                            "rtt_ms": 2.0,
                            "last_change": now,
                        },
                    ],
                }
            )
        )
        common = [
            str(proxy),
            "client",
            "-server",
            f"{SERVER_PUBLIC}:7443",
            "-key-file",
            str(keys),
            "-metrics-listen",
            "",
            "-log-level",
            "warn",
        ]
        clients = {
            "braid": (1080, ["-gateway-status-file", str(gw_file)]),
            "braid-plaintext": (1082, ["-gateway-status-file", str(gw_file), "-encrypt=false"]),
            "braid-race": (1083, ["-gateway-status-file", str(gw_file), "-race"]),
        }
        for name, (port, extra) in clients.items():
            tb.spawn("c", [*common, "-socks-listen", f"127.0.0.1:{port}", *extra], log=work / f"client-{name}.log")
        for role, host, port in (
            ("d", DEST, 9000),
            ("s", SERVER_PUBLIC, 7443),
            ("s", SERVER_PUBLIC, 1081),
            ("c", "127.0.0.1", 1080),
            ("c", "127.0.0.1", 1082),
            ("c", "127.0.0.1", 1083),
        ):
            tb.wait_port(role, host, port)

        ping = tb.run("c", "ping", "-q", "-c", "50", "-i", "0.01", SERVER_PUBLIC).stdout
        rtt_ms = float(ping.strip().splitlines()[-1].split("=")[1].split("/")[1])
        results["rtt_ms"] = rtt_ms

        variants = {
            "direct-mptcp": ["-mptcp"],
            "braid": ["-socks", "127.0.0.1:1080"],
            "braid-plaintext": ["-socks", "127.0.0.1:1082"],
            "microsocks": ["-socks", f"{SERVER_PUBLIC}:1081"],
        }
        for flags in variants.values():  # warm-up (page cache, ARP, first-use paths)
            loadgen(tb, lg, *flags, "-down", "16M", "-verify=false", "-timeout", "60s")

        def throughput(label: str, nbytes: str) -> dict[str, float]:
            """One connection downloading nbytes per variant, interleaved rounds."""
            thr: dict[str, list[float]] = {k: [] for k in variants}
            for rnd in range(args.rounds):
                for name, flags in variants.items():
                    r = loadgen(tb, lg, *flags, "-down", nbytes, "-verify=false", "-timeout", "120s")
                    thr[name].append(r["transfer_mbit_per_s"])
                    print(f"  {label} round {rnd + 1} {name:16s} {r['transfer_mbit_per_s']:8.0f} Mbit/s", flush=True)
            results.setdefault("throughput_runs", {})[label] = thr
            return {k: statistics.median(v) for k, v in thr.items()}

        # Scenario 1: raw veth, CPU-bound (every hop competes for the same cores).
        results["throughput_mbit_per_s"] = throughput("veth", args.bytes)
        # Scenario 2: each WAN shaped with tbf in both directions (network-bound).
        if args.wan_mbit:
            for role, dev in (("c", "c-w1"), ("c", "c-w2"), ("s", "s-w1"), ("s", "s-w2")):
                tb.run(
                    role,
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    f"{args.wan_mbit}mbit",
                    "burst",
                    "256kb",
                    "latency",
                    "20ms",
                )
            results["shaped_throughput_mbit_per_s"] = throughput(f"{args.wan_mbit}M-WANs", args.shaped_bytes)
            for role, dev in (("c", "c-w1"), ("c", "c-w2"), ("s", "s-w1"), ("s", "s-w2")):
                tb.run(role, "tc", "qdisc", "del", "dev", dev, "root")

        # Setup latency: sequential tiny transfers, interleaved in chunks.
        setup: dict[str, list[float]] = {k: [] for k in ("direct-mptcp", "braid", "microsocks")}
        ttfb: dict[str, list[float]] = {k: [] for k in setup}
        chunk = max(1, args.setup_conns // 3)
        for _ in range(3):
            for name in setup:
                r = loadgen(tb, lg, *variants[name], "-n", str(chunk), "-down", "1", "-verify=false")
                setup[name].append(r["setup_median_ms"])
                ttfb[name].append(r["ttfb_median_ms"])
        results["setup_median_ms"] = {k: statistics.median(v) for k, v in setup.items()}
        results["ttfb_median_ms"] = {k: statistics.median(v) for k, v in ttfb.items()}

        # Racing with a slow best gateway: drop SYNs leaving via WAN1.
        tb.run(
            "c",
            "nft",
            "add table inet bench; add chain inet bench out { type filter hook output priority 0; }; "
            'add rule inet bench out oifname "c-w1" tcp flags & (syn | ack) == syn '
            f"numgen random mod 100 < {args.syn_loss} drop",
        )
        race = {}
        for name, port in (("no-race", 1080), ("race", 1083)):
            r = loadgen(
                tb,
                lg,
                "-socks",
                f"127.0.0.1:{port}",
                "-n",
                str(args.race_conns),
                "-down",
                "1",
                "-verify=false",
                timeout=args.race_conns * 10 + 30,
            )
            race[name] = r
        results["race"] = race
        tb.run("c", "nft", "delete table inet bench")

        results["mptcp_fallbacks"] = {
            role: tb.run(role, "nstat", "-az", "MPTcpExtMPCapableFallbackACK", "MPTcpExtMPCapableFallbackSYNACK")
            .stdout.split("\n", 1)[1]
            .strip()
            for role in ("c", "s")
        }

    # ---- report -----------------------------------------------------------
    t, s, f = results["throughput_mbit_per_s"], results["setup_median_ms"], results["ttfb_median_ms"]
    print()
    print(
        f"braid-proxy benchmark  (veth RTT {rtt_ms:.3f} ms; {args.rounds} rounds of {args.bytes}; "
        f"{args.setup_conns} setups per variant)"
    )
    print(f"{'variant':18s} {'Mbit/s':>9s} {'setup ms':>9s} {'ttfb ms':>9s}")
    for k in variants:
        print(f"{k:18s} {t[k]:9.0f} {s.get(k, float('nan')):9.3f} {f.get(k, float('nan')):9.3f}")
    if "shaped_throughput_mbit_per_s" in results:
        st = results["shaped_throughput_mbit_per_s"]
        print(f"\nshaped WANs: 2 x {args.wan_mbit} Mbit/s (tbf), {args.shaped_bytes} per run")
        print(f"{'variant':18s} {'Mbit/s':>9s}")
        for k in variants:
            print(f"{k:18s} {st[k]:9.0f}")
    overhead = s["braid"] - s["direct-mptcp"]
    ratios = {
        "throughput braid / direct-mptcp": t["braid"] / t["direct-mptcp"],
        "throughput braid-plaintext / direct-mptcp": t["braid-plaintext"] / t["direct-mptcp"],
        "throughput braid / microsocks": t["braid"] / t["microsocks"],
        "throughput braid-plaintext / microsocks": t["braid-plaintext"] / t["microsocks"],
        "setup braid / microsocks": s["braid"] / s["microsocks"],
    }
    if "shaped_throughput_mbit_per_s" in results:
        st = results["shaped_throughput_mbit_per_s"]
        ratios["shaped: throughput braid / direct-mptcp"] = st["braid"] / st["direct-mptcp"]
        ratios["shaped: throughput braid / microsocks"] = st["braid"] / st["microsocks"]
    results["ratios"] = ratios
    results["setup_overhead_ms"] = overhead
    print()
    for k, v in ratios.items():
        print(f"{k:45s} {v:6.2f}x")
    print(
        f"{'setup overhead braid - direct-mptcp':45s} {overhead:6.3f} ms  "
        f"(target <= 1 RTT + 1 ms = {rtt_ms + 1:.3f} ms)"
    )
    nr, rc = race["no-race"], race["race"]
    print(f"slow gateway ({args.syn_loss}% SYN loss on WAN1, {args.race_conns} conns each):")
    for name, r in (("no-race", nr), ("race", rc)):
        print(
            f"  {name:8s} setup median {r['setup_median_ms']:8.2f} ms  mean {r['setup_mean_ms']:8.2f} ms  "
            f"p90 {r['setup_p90_ms']:8.2f} ms  failed {r['failed']}"
        )
    if rc["setup_median_ms"] > 0:
        results["race_median_speedup"] = nr["setup_median_ms"] / rc["setup_median_ms"]
        print(
            f"  racing cuts median setup time by {results['race_median_speedup']:.1f}x "
            f"(mean {nr['setup_mean_ms'] / max(rc['setup_mean_ms'], 1e-9):.1f}x)"
        )
    print("MPTCP fallbacks to TCP during the run:", results["mptcp_fallbacks"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

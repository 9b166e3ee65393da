#!/usr/bin/env python3
"""braid-proxy benchmark: throughput and connection-setup latency of
braid-proxy vs direct MPTCP vs two reference proxies from apt, side by side
in one interleaved run, plus the effect of racing the first subflow when the
best gateway is slow. Prints numbers and ratios; never a pass/fail.

Variants (all through the same two WANs of eval/braid_testbed/braidnet.py):

* direct-mptcp: the application connects to the destination over MPTCP.
* braid, braid-plaintext: braid-proxy client -> server (AES-256-GCM / none).
* shadowsocks: a reference proxy *pair*, shadowsocks-libev's ``ss-local``
  (SOCKS5 on the client box) -> ``ss-server``, AEAD cipher aes-256-gcm (the
  cipher braid uses), ``--no-delay`` on both ends as braid-proxy does; run
  under ``mptcpize run`` so both ends speak MPTCP (checked on the kernel's
  MPTCP counters and printed).
* microsocks: one SOCKS5 server on the proxy host, plain TCP, no
  encryption (a single proxy, not a pair: the lower bound of proxying).

Where: the host kernel has no netem, so the WAN RTT there is veth's
(~0.06 ms), and "setup overhead <= 1 RTT + 1 ms" is not judged against a real
RTT. ``proxy/bench.sh --vm`` runs the setup-latency part in braid's VM kernel,
where netem delays each WAN (``--wan-delay-ms`` each way, 10 ms RTT by
default) and the slow gateway is a WAN with a long delay. The VM's CPU is
emulated (TCG), which inflates every CPU cost several times: read its
milliseconds as an upper bound of processing cost plus exact round trips. On
the host, the slow gateway is emulated by dropping SYNs on WAN1 (nftables).

Setup = until the SOCKS reply (or connect, direct) arrives; ttfb = until the
first byte of the response to the first request arrives. ss-local answers
SOCKS before it contacts its server (optimistic reply), so its "setup" is
local only; braid answers once its server connection is up (a spare one is
ready after the first connection), braid-connected once the server reached
the destination; compare ttfb across all variants. CPU us/conn and switches
are the proxy processes' CPU time and thread switches (client and server
side, every thread) per connection while their variant ran.

braid-proxy runs with the environment its systemd units set (contrib/) and
its default max_procs; --runtime go-defaults measures it with Go's defaults
instead (see proxy/README.md, "Runtime settings").

Usage: sudo proxy/bench.sh [--rounds 3] [--bytes 512M] [--setup-conns 300]
       sudo proxy/bench.sh --vm            (setup latency over netem WANs in the VM)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from braid_eval.progress import Progress
from braid_testbed.braidnet import (
    DEST,
    SERVER_PUBLIC,
    UNITS,
    LinkSpec,
    Testbed,
    build_binaries,
    gateway_file,
    unit_environment,
    write_secret,
)
from braid_testbed.wait import IN_VM

SINK = f"{DEST}:9000"
KEY = "bench " + "4b" * 32 + "\n"
SS_CIPHER, SS_PASSWORD = "aes-256-gcm", "braid-bench-" + "5a" * 16
BRAID_PORT, MICROSOCKS_PORT, SS_SERVER_PORT = 7443, 1081, 8388
SOCKS = {
    "braid": 1080,
    "braid-plaintext": 1082,
    "braid-race": 1083,
    "shadowsocks": 1084,
    "braid-fastopen": 1085,
    "braid-connected": 1086,
    "braid-norace": 1087,
}
VARIANTS = {
    "direct-mptcp": ["-mptcp"],
    "braid": ["-socks", f"127.0.0.1:{SOCKS['braid']}"],
    "braid-plaintext": ["-socks", f"127.0.0.1:{SOCKS['braid-plaintext']}"],
    "shadowsocks": ["-socks", f"127.0.0.1:{SOCKS['shadowsocks']}"],
    "microsocks": ["-socks", f"{SERVER_PUBLIC}:{MICROSOCKS_PORT}"],
}
# Setup latency also measures braid with its experimental fast_open (hello
# in the SYN, so the exchange costs no round trip after the first
# connection has fetched a Fast Open cookie), and braid answering SOCKS only
# once the server has connected (socks_reply "connected": real reply codes,
# one round trip more than the default early answer).
SETUP_VARIANTS = {
    **VARIANTS,
    "braid-fastopen": ["-socks", f"127.0.0.1:{SOCKS['braid-fastopen']}"],
    "braid-connected": ["-socks", f"127.0.0.1:{SOCKS['braid-connected']}"],
}
Result = dict[str, Any]
UNIT = UNITS / "braid-proxy-client.service"


def loadgen(tb: Testbed, lg: Path, *args: str, timeout: float = 300) -> Result:
    # No half-close: microsocks cannot forward a FIN; the same for all variants.
    r = tb.run("c", str(lg), "run", "-target", SINK, "-halfclose=false", *args, timeout=timeout, check=False)
    try:
        res: Result = json.loads(r.stdout.splitlines()[0])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"loadgen failed: {r.stdout}\n{r.stderr}") from None
    if res["failed"]:
        print(f"  !! {res['failed']} of {res['conns']} connections failed: {res.get('first_error')}", flush=True)
    return res


def mptcp_counter(tb: Testbed, role: str, name: str) -> int:
    """One MPTCP MIB counter of a namespace (absolute, history untouched)."""
    out = tb.run(role, "nstat", "-asz", name).stdout
    for line in out.splitlines():
        if line.startswith(name):
            return int(line.split()[1])
    return 0


Procs = dict[str, list[subprocess.Popen[bytes]]]


def cpu_and_switches(procs: list[subprocess.Popen[bytes]]) -> tuple[int, int]:
    """CPU time (ns) and thread switches so far, summed over every thread of
    procs. CPU comes from schedstat (exact) where the kernel has it, else
    from the process's tick counts (utime + stime)."""
    cpu_ns = switches = 0
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    for p in procs:
        proc = Path(f"/proc/{p.pid}")
        exact = (proc / "schedstat").exists()
        if not exact:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            cpu_ns += (int(stat[11]) + int(stat[12])) * tick_ns
        for task in (proc / "task").iterdir():
            try:
                if exact:
                    cpu_ns += int((task / "schedstat").read_text().split()[0])
                for line in (task / "status").read_text().splitlines():
                    if "ctxt_switches:" in line:
                        switches += int(line.split()[1])
            except (FileNotFoundError, ProcessLookupError):
                pass  # a thread that just exited
    return cpu_ns, switches


def start_proxies(tb: Testbed, work: Path, proxy: Path, lg: Path, runtime: str) -> tuple[str, Procs]:
    """Start every proxy; return how shadowsocks is carried ("MPTCP"/"TCP")
    and, per setup variant, the proxy processes that serve it. runtime
    "go-defaults" runs braid-proxy without the units' environment and with
    one Go thread per CPU on both ends (for comparison)."""
    keys = write_secret(work / "keys", KEY)
    tb.spawn("d", [str(lg), "serve", "-listen", SINK, "-mptcp"])
    server = [str(proxy), "server", "-listen", f"{SERVER_PUBLIC}:{BRAID_PORT}", "-key-file", str(keys)]
    server += ["-allow-cidr", "10.9.0.0/24", "-allow-plaintext", "-metrics-listen", "", "-log-level", "warn"]
    if runtime == "go-defaults":
        server += ["-max-procs", "0"]
    unit_env = unit_environment() if runtime == "deployed" else {}
    braid_server = tb.spawn("s", server, log=work / "server.log", env=unit_env)
    procs: Procs = {
        "direct-mptcp": [],
        "microsocks": [
            tb.spawn("s", ["microsocks", "-i", SERVER_PUBLIC, "-p", str(MICROSOCKS_PORT)], log=work / "microsocks.log")
        ],
    }
    mptcpize = ["mptcpize", "run"] if shutil.which("mptcpize") else []
    ss = ["-k", SS_PASSWORD, "-m", SS_CIPHER, "--no-delay", "-t", "60"]
    ss_server = tb.spawn(
        "s",
        [*mptcpize, "ss-server", "-s", SERVER_PUBLIC, "-p", str(SS_SERVER_PORT), *ss],
        log=work / "ss-server.log",
    )
    ss_local = tb.spawn(
        "c",
        [
            *mptcpize,
            "ss-local",
            "-s",
            SERVER_PUBLIC,
            "-p",
            str(SS_SERVER_PORT),
            "-b",
            "127.0.0.1",
            "-l",
            str(SOCKS["shadowsocks"]),
            *ss,
        ],
        log=work / "ss-local.log",
    )
    procs["shadowsocks"] = [ss_local, ss_server]
    gw_file = work / "gateways.json"
    gateway_file(gw_file)
    client = [str(proxy), "client", "-server", f"{SERVER_PUBLIC}:{BRAID_PORT}", "-key-file", str(keys)]
    client += ["-metrics-listen", "", "-log-level", "warn", "-gateway-status-file", str(gw_file)]
    if runtime == "go-defaults":
        client += ["-max-procs", "0"]
    extra = {
        "braid": [],
        "braid-plaintext": ["-encrypt=false"],
        # Racing is measured without spare connections, which would
        # otherwise absorb a slow handshake for sequential connections.
        "braid-race": ["-race", "-preconnect", "0"],
        "braid-norace": ["-preconnect", "0"],
        "braid-fastopen": ["-fast-open"],
        "braid-connected": ["-socks-reply", "connected"],
    }
    for name, flags in extra.items():
        braid_client = tb.spawn(
            "c",
            [*client, "-socks-listen", f"127.0.0.1:{SOCKS[name]}", *flags],
            log=work / f"client-{name}.log",
            env=unit_env,
        )
        procs[name] = [braid_client, braid_server]
    for role, host, port in (
        ("d", DEST, 9000),
        ("s", SERVER_PUBLIC, BRAID_PORT),
        ("s", SERVER_PUBLIC, MICROSOCKS_PORT),
        ("s", SERVER_PUBLIC, SS_SERVER_PORT),
        *(("c", "127.0.0.1", p) for p in SOCKS.values()),
    ):
        tb.wait_port(role, host, port)
    # Which transport does the shadowsocks pair really use? One connection,
    # counted by the server host's kernel.
    syn_rx = mptcp_counter(tb, "s", "MPTcpExtMPCapableSYNRX")
    loadgen(tb, lg, *VARIANTS["shadowsocks"], "-down", "1K")
    mptcp = mptcp_counter(tb, "s", "MPTcpExtMPCapableSYNRX") > syn_rx
    return "MPTCP (mptcpize)" if mptcp else "plain TCP", procs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved throughput rounds")
    ap.add_argument("--bytes", default="512M", help="bytes downloaded per throughput run")
    ap.add_argument("--setup-conns", type=int, default=300, help="sequential connections per setup-latency variant")
    ap.add_argument("--race-conns", type=int, default=40, help="sequential connections per racing variant")
    ap.add_argument(
        "--syn-loss",
        type=int,
        default=80,
        help="no netem: percent of SYNs dropped on WAN1 (slow gateway); well above 50, or the median without "
        "racing sits on the edge between connections whose first SYN passed and those that waited a second",
    )
    ap.add_argument(
        "--wan-mbit",
        type=int,
        default=200,
        help="second throughput scenario: each WAN shaped to this rate with tbf (0 skips it)",
    )
    ap.add_argument("--shaped-bytes", default="128M", help="bytes per run in the shaped scenario")
    ap.add_argument("--setup-only", action="store_true", help="skip throughput (the VM mode: TCG makes it meaningless)")
    ap.add_argument(
        "--wan-delay-ms",
        type=float,
        default=0,
        help="netem delay on each WAN, each way (RTT = 2x); needs netem (braid's VM kernel)",
    )
    ap.add_argument(
        "--slow-delay-ms",
        type=float,
        default=100,
        help="with --wan-delay-ms: extra delay each way on WAN1 for the slow-gateway racing test",
    )
    ap.add_argument(
        "--runtime",
        choices=("deployed", "go-defaults"),
        default="deployed",
        help="braid-proxy's Go runtime settings: as the systemd units run it, or Go's defaults (for comparison)",
    )
    ap.add_argument("--json", type=Path, help="also write all results here")
    args = ap.parse_args()
    if args.json and not args.json.resolve().parent.is_dir():
        ap.error(f"--json {args.json}: no directory {args.json.resolve().parent} to write it in")

    in_vm = IN_VM
    work = Path(tempfile.mkdtemp(prefix="braid-bench-"))
    proxy, lg = build_binaries(work / "bin")
    results: Result = {"config": vars(args) | {"json": str(args.json) if args.json else None}, "in_vm": in_vm}
    wan = LinkSpec(delay_ms=args.wan_delay_ms) if args.wan_delay_ms else None
    with Testbed(wan1=wan, wan2=wan) as tb:
        ss_transport, procs = start_proxies(tb, work, proxy, lg, args.runtime)
        results["braid_runtime"] = (
            f"as deployed (max_procs 1 on both ends, {UNIT.name} environment {unit_environment()})"
            if args.runtime == "deployed"
            else "Go defaults (max_procs 0 on both ends, no GODEBUG)"
        )
        results["shadowsocks_transport"] = ss_transport
        print(f"shadowsocks-libev pair ({SS_CIPHER}) carried over {ss_transport}", flush=True)

        ping = tb.run("c", "ping", "-q", "-c", "50", "-i", "0.01", SERVER_PUBLIC).stdout
        rtt_ms = float(ping.strip().splitlines()[-1].split("=")[1].split("/")[1])
        results["rtt_ms"] = rtt_ms
        print(f"WAN RTT (ping, client -> proxy): {rtt_ms:.3f} ms", flush=True)

        for flags in VARIANTS.values():  # warm-up (page cache, ARP, first-use paths)
            loadgen(tb, lg, *flags, "-down", "1M" if args.setup_only else "16M", "-verify=false", "-timeout", "60s")

        def throughput(label: str, nbytes: str) -> dict[str, float]:
            """One connection downloading nbytes per variant, interleaved rounds."""
            thr: dict[str, list[float]] = {k: [] for k in VARIANTS}
            for rnd in range(args.rounds):
                for name, flags in VARIANTS.items():
                    r = loadgen(tb, lg, *flags, "-down", nbytes, "-verify=false", "-timeout", "120s")
                    thr[name].append(r["transfer_mbit_per_s"])
                    print(f"  {label} round {rnd + 1} {name:16s} {r['transfer_mbit_per_s']:8.0f} Mbit/s", flush=True)
            results.setdefault("throughput_runs", {})[label] = thr
            return {k: statistics.median(v) for k, v in thr.items()}

        if not args.setup_only:
            # Scenario 1: raw veth, CPU-bound (every hop competes for the same cores).
            results["throughput_mbit_per_s"] = throughput("veth", args.bytes)
            # Scenario 2: each WAN shaped with tbf in both directions (network-bound).
            if args.wan_mbit:
                wans = (("c", "c-w1"), ("c", "c-w2"), ("s", "s-w1"), ("s", "s-w2"))
                for role, dev in wans:
                    tb.run(role, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{args.wan_mbit}mbit",
                           "burst", "256kb", "latency", "20ms")
                label = f"{args.wan_mbit}M-WANs"
                results["shaped_throughput_mbit_per_s"] = throughput(label, args.shaped_bytes)
                for role, dev in wans:
                    tb.run(role, "tc", "qdisc", "del", "dev", dev, "root")

        # Setup latency: sequential tiny transfers, interleaved in chunks.
        # Each chunk is bounded in time (a variant whose connections time out
        # must not stall the run); failures are counted and printed.
        setup: dict[str, list[float]] = {k: [] for k in SETUP_VARIANTS}
        ttfb: dict[str, list[float]] = {k: [] for k in SETUP_VARIANTS}
        failed = dict.fromkeys(SETUP_VARIANTS, 0)
        # CPU time and thread switches of the proxy processes (client and
        # server side) while their own variant runs.
        cost = {k: [0, 0, 0] for k in SETUP_VARIANTS}  # cpu ns, switches, connections
        chunk = max(1, args.setup_conns // 3)
        progress = Progress("setup latency", 3 * len(SETUP_VARIANTS))
        for _ in range(3):
            for name, flags in SETUP_VARIANTS.items():
                cpu0, sw0 = cpu_and_switches(procs[name])
                r = loadgen(tb, lg, *flags, "-n", str(chunk), "-down", "1", "-verify=false", "-timeout", "60s")
                cpu1, sw1 = cpu_and_switches(procs[name])
                cost[name][0] += cpu1 - cpu0
                cost[name][1] += sw1 - sw0
                cost[name][2] += r["conns"]
                failed[name] += r["failed"]
                if r["failed"] < r["conns"]:
                    setup[name].append(r["setup_median_ms"])
                    ttfb[name].append(r["ttfb_median_ms"])
                progress.step(f"{name}: {r['conns']} connections")
        nan = float("nan")
        results["setup_median_ms"] = {k: statistics.median(v) if v else nan for k, v in setup.items()}
        results["ttfb_median_ms"] = {k: statistics.median(v) if v else nan for k, v in ttfb.items()}
        results["setup_failed"] = failed
        results["proxy_cpu_us_per_conn"] = {k: v[0] / 1000 / max(v[2], 1) for k, v in cost.items()}
        results["proxy_switches_per_conn"] = {k: v[1] / max(v[2], 1) for k, v in cost.items()}

        # Racing with a slow best gateway (gw1 = WAN1 is rated best).
        if wan:
            slow = LinkSpec(delay_ms=args.wan_delay_ms + args.slow_delay_ms)
            tb.topo.shape("c", "c-w1", slow)
            tb.topo.shape("s", "s-w1", slow)
            slow_desc = f"WAN1 delayed to {2 * slow.delay_ms:.0f} ms RTT (netem)"
        else:
            tb.run(
                "c",
                "nft",
                "add table inet bench; add chain inet bench out { type filter hook output priority 0; }; "
                'add rule inet bench out oifname "c-w1" tcp flags & (syn | ack) == syn '
                f"numgen random mod 100 < {args.syn_loss} drop",
            )
            slow_desc = f"{args.syn_loss}% SYN loss on WAN1 (nftables)"
        race = {}
        for name, port in (("no-race", SOCKS["braid-norace"]), ("race", SOCKS["braid-race"])):
            race[name] = loadgen(
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
        results["race"] = race
        results["slow_gateway"] = slow_desc

        results["mptcp_fallbacks"] = {
            role: {
                k: mptcp_counter(tb, role, k)
                for k in ("MPTcpExtMPCapableFallbackACK", "MPTcpExtMPCapableFallbackSYNACK")
            }
            for role in ("c", "s")
        }

    report(args, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def report(args: argparse.Namespace, results: Result) -> None:
    s, f, rtt_ms = results["setup_median_ms"], results["ttfb_median_ms"], results["rtt_ms"]
    print()
    where = "braid VM kernel, TCG-emulated CPU" if results["in_vm"] else "host kernel"
    print(
        f"braid-proxy benchmark ({where}; WAN RTT {rtt_ms:.3f} ms; {args.setup_conns} setups per variant; "
        f"shadowsocks over {results['shadowsocks_transport']})"
    )
    print(f"braid-proxy runtime: {results['braid_runtime']}")
    if results["in_vm"]:
        print("NOTE: TCG emulation inflates every CPU cost several times; round trips are exact (netem).")
    t = results.get("throughput_mbit_per_s", {})
    st = results.get("shaped_throughput_mbit_per_s", {})
    nan = float("nan")
    cpu, sw = results["proxy_cpu_us_per_conn"], results["proxy_switches_per_conn"]
    head = f"{'variant':18s} {'failed':>6s} {'setup ms':>9s} {'ttfb ms':>9s} {'CPU us/conn':>12s} {'switches':>9s}"
    if t:
        head += f" {'Mbit/s veth':>12s}"
    if st:
        head += f" {'Mbit/s ' + str(args.wan_mbit) + 'M WANs':>18s}"
    print(head)
    for k in SETUP_VARIANTS:
        line = f"{k:18s} {results['setup_failed'][k]:6d} {s[k]:9.3f} {f[k]:9.3f} {cpu[k]:12.0f} {sw[k]:9.1f}"
        if t and k in t:
            line += f" {t[k]:12.0f}"
        if st and k in st:
            line += f" {st[k]:18.0f}"
        print(line)
    ratios: dict[str, float] = {}
    for base in ("direct-mptcp", "shadowsocks", "microsocks"):
        if t:
            ratios[f"throughput veth braid / {base}"] = t["braid"] / t[base]
        if st:
            ratios[f"throughput shaped braid / {base}"] = st["braid"] / st[base]
    if t:
        ratios["throughput veth braid-plaintext / direct-mptcp"] = t["braid-plaintext"] / t["direct-mptcp"]
    for base in ("shadowsocks", "microsocks"):
        ratios[f"ttfb braid / {base}"] = f["braid"] / f[base] if f[base] else nan
    ratios["ttfb braid-connected / shadowsocks"] = f["braid-connected"] / f["shadowsocks"] if f["shadowsocks"] else nan
    ratios["setup braid / microsocks"] = s["braid"] / s["microsocks"] if s["microsocks"] else nan
    results["ratios"] = ratios
    overhead = s["braid"] - s["direct-mptcp"]
    ttfb_overhead = f["braid"] - f["direct-mptcp"]
    results["setup_overhead_ms"] = overhead
    results["ttfb_overhead_ms"] = ttfb_overhead
    print()
    for k, v in ratios.items():
        print(f"{k:48s} {v:6.2f}x")
    target = rtt_ms + 1
    print(f"{'setup overhead braid - direct-mptcp':48s} {overhead:7.3f} ms  (target <= 1 RTT + 1 ms = {target:.3f} ms)")
    print(f"{'ttfb overhead braid - direct-mptcp':48s} {ttfb_overhead:7.3f} ms")
    fo = s["braid-fastopen"] - s["direct-mptcp"]
    results["setup_overhead_fastopen_ms"] = fo
    print(f"{'setup overhead braid-fastopen - direct-mptcp':48s} {fo:7.3f} ms")
    race = results["race"]
    print(f"slow best gateway: {results['slow_gateway']}, {args.race_conns} conns each (no spare connections):")
    for name in ("no-race", "race"):
        r = race[name]
        print(
            f"  {name:8s} setup median {r['setup_median_ms']:8.2f} ms  mean {r['setup_mean_ms']:8.2f} ms  "
            f"p90 {r['setup_p90_ms']:8.2f} ms  failed {r['failed']}"
        )
    nr, rc = race["no-race"], race["race"]
    if rc["setup_median_ms"] > 0:
        results["race_median_speedup"] = nr["setup_median_ms"] / rc["setup_median_ms"]
        print(
            f"  racing cuts median setup time by {results['race_median_speedup']:.1f}x "
            f"(mean {nr['setup_mean_ms'] / max(rc['setup_mean_ms'], 1e-9):.1f}x)"
        )
    print("MPTCP fallbacks to TCP during the run:", results["mptcp_fallbacks"])


if __name__ == "__main__":
    sys.exit(main())

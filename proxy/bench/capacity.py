#!/usr/bin/env python3
"""braid-proxy relay capacity: what one `braid-proxy server` holds on one core.

Measures, never judges:

* connections per second relayed end to end (SOCKS5 into a braid-proxy
  client, the v3 handshake to the relay, the relay's dial to a sink, a
  64-byte request and a 512-byte response, every byte verified, half-close,
  close), at increasing offered rates (open loop) until the rate achieved
  falls below 90 % of the offered, connections fail, or the generator's
  in-flight cap is reached;
* concurrent connections held (N at once, each echoing 16 bytes every few
  seconds so it is live), with the relay's RSS and CPU while it holds them;
* the relay's CPU time per connection (utime + stime from /proc/PID/stat,
  every thread) and its resident memory per held connection;
* the cost of the key file's size: the relay tries every configured key
  on each hello, so the same load runs with 1, 10, 100, 1000 keys.

Testbed: the network namespaces of eval/braid_testbed/braidnet.py (client
box "c", relay "s", destination "d", two veth WANs, MPTCP with a subflow
per WAN), nothing outside them. The relay's key file names --clients client
boxes, each with its own key; as many braid-proxy client processes run in
"c", one per key, and the load generator spreads connections over their
SOCKS ports in turn.

Pinning: the relay runs under `taskset -c 0` with braid-proxy's default
max_procs 1 (GOMAXPROCS 1), in the environment its systemd unit sets; the
client boxes, the load generator and the sink run under `taskset -c 1`.
The other core therefore plays every client box at once: where it is busy
first, the rates measured are what the generator reached, and the relay's
CPU per connection gives the rate its core would allow (1 s / CPU per
connection). Kernel work done in softirq context is not in the relay's
utime + stime. Both cores' busy shares (everything on the core, other
work on the machine included) and the load average are recorded: on a
shared machine, read the CPU times per connection, which do not depend
on what else runs, before the rates.

Needs root (namespaces) and Go (builds braid-proxy and braid-loadgen, or
BRAID_PROXY_BIN). Raises the open-file limit to --nofile for itself and
every process it starts.

Usage: sudo python3 proxy/bench/capacity.py [--quick] [--json results/relay-capacity.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from braid_eval.analysis.provenance import provenance
from braid_testbed.braidnet import (
    DEST,
    SERVER_PUBLIC,
    Testbed,
    build_binaries,
    gateway_file,
    unit_environment,
    write_secret,
)

SINK = f"{DEST}:9000"
RELAY = f"{SERVER_PUBLIC}:7443"
SOCKS_BASE = 20000  # client box i listens for SOCKS on 127.0.0.1:SOCKS_BASE+i
RELAY_CORE, GEN_CORE = 0, 1
REQUEST, RESPONSE = 64, 512
SERVER_UNIT = "braid-proxy-server.service"
Result = dict[str, Any]


def ids(n: int) -> list[str]:
    return [f"box{i:04d}" for i in range(n)]


def key_lines(names: list[str]) -> dict[str, str]:
    """One `id key` line per client, as `braid-proxy genkey` writes them."""
    return {n: f"{n} {secrets.token_hex(32)}\n" for n in names}


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process, every thread, in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def core_ticks() -> dict[int, tuple[int, int]]:
    """Per core: (busy, total) ticks from /proc/stat."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *vals = line.split()
            v = [int(x) for x in vals]
            out[int(name[3:])] = (sum(v) - v[3] - v[4], sum(v))
    return out


def busy_pct(t0: dict[int, tuple[int, int]], t1: dict[int, tuple[int, int]], core: int) -> float:
    busy, total = t1[core][0] - t0[core][0], t1[core][1] - t0[core][1]
    return 100 * busy / total if total else 0.0


class Bench:
    """The testbed with its relay, client boxes and sink running."""

    def __init__(self, tb: Testbed, work: Path, proxy: Path, lg: Path, clients: int) -> None:
        self.tb, self.work, self.proxy, self.lg = tb, work, proxy, lg
        self.keys = key_lines(ids(max(clients, 1000)))
        self.clients = ids(clients)
        self.key_file = work / "server.keys"
        self.use_keys(self.clients)
        for role in ("c", "s", "d"):
            tb[role].sysctls([("net.ipv4.ip_local_port_range", "1024 65535"), ("net.ipv4.tcp_tw_reuse", 1),
                              ("net.core.somaxconn", 8192), ("net.ipv4.tcp_max_syn_backlog", 8192)])
        pin_gen = ["taskset", "-c", str(GEN_CORE)]
        tb.spawn("d", [*pin_gen, str(lg), "serve", "-listen", SINK], log=work / "sink.log")
        server = ["taskset", "-c", str(RELAY_CORE), str(proxy), "server", "-listen", RELAY,
                  "-key-file", str(self.key_file), "-allow-cidr", "10.9.0.0/24", "-metrics-listen", "",
                  "-log-level", "warn", "-max-conns", "65536"]
        self.relay = tb.spawn("s", server, log=work / "server.log", env=unit_environment(SERVER_UNIT))
        gw = work / "gateways.json"
        gateway_file(gw)
        for i, name in enumerate(self.clients):
            kf = write_secret(work / f"{name}.keys", self.keys[name])
            tb.spawn("c", [*pin_gen, str(proxy), "client", "-server", RELAY, "-key-file", str(kf),
                           "-socks-listen", f"127.0.0.1:{SOCKS_BASE + i}", "-metrics-listen", "",
                           "-log-level", "warn", "-gateway-status-file", str(gw)],
                     log=work / f"{name}.log" if i < 3 else None, env=unit_environment())
        tb.wait_port("d", DEST, 9000)
        tb.wait_port("s", SERVER_PUBLIC, 7443)
        self.wait_socks(len(self.clients))
        comm = Path(f"/proc/{self.relay.pid}/comm").read_text().strip()
        if comm != "braid-proxy":
            raise RuntimeError(f"relay pid {self.relay.pid} is {comm!r}, not braid-proxy: CPU would be misread")

    def use_keys(self, names: list[str]) -> None:
        write_secret(self.key_file, "".join(self.keys[n] for n in names))

    def reload(self) -> None:
        """SIGHUP: the relay re-reads its key file."""
        self.relay.send_signal(signal.SIGHUP)
        time.sleep(1)

    def wait_socks(self, n: int) -> None:
        want = {SOCKS_BASE + i for i in range(n)}
        deadline = time.monotonic() + 60
        while True:
            out = self.tb.run("c", "ss", "-ltnH").stdout.splitlines()
            up = {int(line.split()[3].rsplit(":", 1)[1]) for line in out}
            if want <= up:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(want - up)} of {n} client boxes not listening after 60 s")
            time.sleep(0.2)

    def socks(self, n: int | None = None) -> str:
        return ",".join(f"127.0.0.1:{SOCKS_BASE + i}" for i in range(n or len(self.clients)))

    def drain(self, base: int, limit: float = 60) -> float:
        """Wait (at most limit s) until the relay's namespace is back to
        about base TCP sockets: the last load's connections torn down.
        Returns the seconds waited."""
        t0 = time.monotonic()
        while self.tcp_inuse("s") > base + 50 and time.monotonic() - t0 < limit:
            time.sleep(0.5)
        return round(time.monotonic() - t0, 1)

    def tcp_inuse(self, role: str) -> int:
        for line in self.tb.run(role, "cat", "/proc/net/sockstat").stdout.splitlines():
            if line.startswith("TCP:"):
                f = line.split()
                return int(f[f.index("inuse") + 1])
        return 0

    def idle_core_pct(self, seconds: float = 3) -> float:
        """The relay's CPU share with no load: the client boxes' spare
        connections (preconnect) being replaced, timers, the GC."""
        c0, t0 = proc_cpu_s(self.relay.pid), time.monotonic()
        time.sleep(seconds)
        return 100 * (proc_cpu_s(self.relay.pid) - c0) / (time.monotonic() - t0)

    def rate_step(self, rate: float, seconds: float, socks: str, idle_pct: float = 0) -> Result:
        """One offered rate: the loadgen's summary plus the relay's CPU and both cores' load."""
        c0, k0, t0 = proc_cpu_s(self.relay.pid), core_ticks(), time.monotonic()
        r = self.tb.run("c", "taskset", "-c", str(GEN_CORE), str(self.lg), "rate", "-target", SINK, "-socks", socks,
                        "-rate", f"{rate:g}", "-duration", f"{seconds:g}s", "-down", str(RESPONSE),
                        "-up", str(REQUEST), timeout=seconds + 60)
        c1, k1, t1 = proc_cpu_s(self.relay.pid), core_ticks(), time.monotonic()
        res: Result = json.loads(r.stdout)
        cpu, conns = c1 - c0, max(res["ok"] + res["failed"], 1)
        net = max(cpu - idle_pct / 100 * (t1 - t0), 0)
        res |= {"relay_cpu_s": round(cpu, 3), "relay_core_pct": round(100 * cpu / (t1 - t0), 1),
                "relay_cpu_us_per_conn": round(1e6 * cpu / conns, 1),
                "relay_cpu_us_per_conn_net": round(1e6 * net / conns, 1),
                "relay_core_busy_pct": round(busy_pct(k0, k1, RELAY_CORE), 1),
                "generator_core_busy_pct": round(busy_pct(k0, k1, GEN_CORE), 1),
                "relay_rss_kib": rss_kib(self.relay.pid)}
        return res

    def hold(self, n: int, seconds: float, interval: float, open_rate: float, idle_rss: int) -> Result:
        """Hold n echo connections; the relay's RSS and CPU while all are held.
        Memory per connection is counted from idle_rss, the relay's RSS
        before any load (Go keeps freed memory a while: the RSS left by an
        earlier hold would hide part of this one's)."""
        rss0, sock0 = rss_kib(self.relay.pid), self.tcp_inuse("s")
        cmd = ["taskset", "-c", str(GEN_CORE), str(self.lg), "hold", "-target", SINK, "-socks", self.socks(),
               "-n", str(n), "-open-rate", f"{open_rate:g}", "-interval", f"{interval:g}s", "-hold", f"{seconds:g}s",
               "-timeout", f"{n / open_rate + seconds + 120:.0f}s"]
        p = self.tb["c"].popen(cmd, stdout=subprocess.PIPE)
        assert p.stdout is not None
        res: Result = {"n": n, "relay_rss_before_kib": rss0, "relay_tcp_sockets_before": sock0}
        c0 = t0 = 0.0
        for raw in p.stdout:
            ev = json.loads(raw)
            kind = ev.pop("event")
            if kind == "progress":
                print(f"  hold {n}: opened {ev['opened']}/{n}, failed {ev['failed']}", flush=True)
            elif kind == "held":
                c0, t0 = proc_cpu_s(self.relay.pid), time.monotonic()
                print(f"  hold {n}: {ev['open']} open, holding {seconds:g} s", flush=True)
            elif kind == "release":
                cpu, el = proc_cpu_s(self.relay.pid) - c0, time.monotonic() - t0
                rss = rss_kib(self.relay.pid)
                res |= {"relay_rss_held_kib": rss, "relay_core_pct_holding": round(100 * cpu / el, 2),
                        "relay_tcp_sockets_held": self.tcp_inuse("s")}
            elif kind == "done":
                res |= ev
        if p.wait(timeout=60) != 0:
            raise RuntimeError(f"loadgen hold exited {p.returncode}")
        held = max(res.get("opened", 0), 1)
        res["relay_rss_kib_per_conn"] = round((res.get("relay_rss_held_kib", idle_rss) - idle_rss) / held, 2)
        return res


def saturated(step: Result) -> str:
    """Why a rate step shows saturation ("" if it does not)."""
    started = step["ok"] + step["failed"]
    if step["skipped"]:
        return f"{step['skipped']} connections skipped (in-flight cap)"
    if step["failed"] > 0.01 * max(started, 1):
        return f"{step['failed']} of {started} failed ({step.get('first_error', '')})"
    if step["achieved_per_s"] < 0.9 * step["offered_per_s"]:
        return f"achieved {step['achieved_per_s']:.0f}/s < 90 % of offered"
    return ""


def raise_nofile(n: int) -> int:
    """Raise the open-file limit to n, or as far as the hard limit goes
    where it may not be raised (no CAP_SYS_RESOURCE, e.g. in a container)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(n, soft), max(n, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(min(n, hard), soft), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def floats(s: str) -> list[float]:
    return [float(x) for x in s.split(",") if x]


def ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run, under 30 s: 10 client boxes, 3 short rate steps, one hold of 500, keys 1 and 100")
    ap.add_argument("--clients", type=int, help="client boxes (keys in the relay's file, client processes); 100")
    ap.add_argument("--rates", type=floats, help="offered connections/s, ascending, comma-separated; "
                    "100,200,300,400,500,600,800,1000,1500,2000,3000 (stops at the first saturated step)")
    ap.add_argument("--step-s", type=float, help="seconds per rate step; 4")
    ap.add_argument("--holds", type=ints, help="concurrent connections held, comma-separated; 1000,5000,10000")
    ap.add_argument("--hold-s", type=float, help="seconds each hold lasts once open; 10")
    ap.add_argument("--echo-interval-s", type=float, default=5,
                    help="seconds between a held connection's echoes; 5 (quick: 1)")
    ap.add_argument("--open-rate", type=float, default=300,
                    help="held connections opened per second; 300 (below the relay's rate with 100 keys: opening "
                    "faster than it handshakes makes client boxes time out, which is the rate test's job)")
    ap.add_argument("--key-counts", type=ints, help="key-file sizes for the key-cost sweep; 1,10,100,1000")
    ap.add_argument("--keys-rate", type=float, default=50, help="offered connections/s in the key-cost sweep; 50")
    ap.add_argument("--nofile", type=int, default=65536,
                    help="open-file limit for every process; 65536, the systemd units' LimitNOFILE (or the hard limit "
                    "where it may not be raised; holds are capped to fit: the relay needs 2 per connection)")
    ap.add_argument("--json", type=Path, help="write the result here (e.g. results/relay-capacity.json)")
    args = ap.parse_args()
    q = args.quick
    defaults: dict[str, Any] = {
        "clients": 10 if q else 100,
        "rates": [200.0, 400.0, 800.0] if q else [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 800.0, 1000.0, 1500.0,
                                                  2000.0, 3000.0],
        "step_s": 2.0 if q else 4.0, "holds": [500] if q else [1000, 5000, 10000], "hold_s": 3.0 if q else 10.0,
        "key_counts": [1, 100] if q else [1, 10, 100, 1000]}
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if q and args.echo_interval_s == 5:
        args.echo_interval_s = 1.0
    if max(args.key_counts) > 1000 or args.clients > 1000 or args.clients < 1:
        ap.error("--clients and --key-counts: 1 to 1000")
    if args.json and not args.json.resolve().parent.is_dir():
        ap.error(f"--json {args.json}: no directory to write it in")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces)")
    return args


def main() -> int:
    args = parse_args()
    nofile = raise_nofile(args.nofile)
    # The relay holds two descriptors per relayed connection.
    fit = (nofile - 100) // 2
    if max(args.holds) > fit:
        print(f"open-file limit {nofile}: holds capped at {fit} (the relay needs 2 per connection)", flush=True)
        args.holds = sorted({min(n, fit) for n in args.holds})
    work = Path(tempfile.mkdtemp(prefix="braid-capacity-"))
    print(f"[build] braid-proxy, braid-loadgen -> {work / 'bin'}", flush=True)
    proxy, lg = build_binaries(work / "bin")
    params: Result = {
        "mode": "quick" if args.quick else "full", "clients": args.clients, "rates": args.rates,
        "step_s": args.step_s, "holds": args.holds, "hold_s": args.hold_s, "echo_interval_s": args.echo_interval_s,
        "echo_bytes": 16, "open_rate": args.open_rate, "key_counts": args.key_counts, "keys_rate": args.keys_rate,
        "request_bytes": REQUEST, "response_bytes": RESPONSE,
        "pinning": f"relay: taskset -c {RELAY_CORE}, max_procs 1 (GOMAXPROCS 1), {SERVER_UNIT}'s environment "
                   f"{' '.join(f'{k}={v}' for k, v in unit_environment(SERVER_UNIT).items())}; "
                   f"client boxes, load generator, sink: taskset -c {GEN_CORE}",
        "machine_cores": os.cpu_count(), "nofile": nofile, "nice": os.nice(0),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "testbed": "network namespaces (braidnet: client box, relay, destination; two veth WANs, MPTCP)",
        **provenance()}
    results: Result = {}
    t_start = time.monotonic()
    with Testbed() as tb:
        print(f"[start] relay on core {RELAY_CORE}, {args.clients} client boxes + sink on core {GEN_CORE}", flush=True)
        b = Bench(tb, work, proxy, lg, args.clients)
        b.rate_step(100, 1, b.socks())  # warm-up: first-use paths, each box's "connected" first reply
        results["relay_idle_rss_kib"] = rss_kib(b.relay.pid)
        idle_sockets = b.tcp_inuse("s")  # the client boxes' spare connections

        holds = []
        for i, n in enumerate(args.holds):
            print(f"[hold {i + 1}/{len(args.holds)}] {n} connections over {args.clients} client boxes", flush=True)
            waited = b.drain(idle_sockets)
            h = b.hold(n, args.hold_s, args.echo_interval_s, args.open_rate, results["relay_idle_rss_kib"])
            print(f"  live {h['live']}/{n}, relay RSS {h.get('relay_rss_held_kib', 0) / 1024:.0f} MiB "
                  f"({h['relay_rss_kib_per_conn']:.1f} KiB/conn), relay core {h.get('relay_core_pct_holding', 0)}% "
                  f"holding", flush=True)
            h["drain_wait_s"] = waited
            holds.append(h)
        results["hold"] = holds
        results["drain_wait_s_before_rates"] = b.drain(idle_sockets)
        print("[idle] the relay's CPU with no load, 3 s", flush=True)
        idle = results["relay_idle_core_pct"] = round(b.idle_core_pct(), 2)

        steps = []
        for i, rate in enumerate(args.rates):
            print(f"[rate {i + 1}/{len(args.rates)}] offered {rate:g} conn/s for {args.step_s:g} s", flush=True)
            s = b.rate_step(rate, args.step_s, b.socks(), idle)
            s["saturated"] = saturated(s)
            steps.append(s)
            print(f"  achieved {s['achieved_per_s']:.0f}/s, failed {s['failed']}, p99 {s['latency_p99_ms']:.1f} ms, "
                  f"relay {s['relay_cpu_us_per_conn']:.0f} us/conn, core {RELAY_CORE} {s['relay_core_busy_pct']}% / "
                  f"core {GEN_CORE} {s['generator_core_busy_pct']}% busy" + (f"; SATURATED: {s['saturated']}"
                                                                         if s["saturated"] else ""), flush=True)
            if s["saturated"]:
                break
        results["rate"] = steps

        keys = []
        for i, k in enumerate(args.key_counts):
            print(f"[keys {i + 1}/{len(args.key_counts)}] key file of {k}, {args.keys_rate:g} conn/s through one box",
                  flush=True)
            b.use_keys(ids(k))
            b.reload()
            s = b.rate_step(args.keys_rate, args.step_s, b.socks(1), idle)
            s["keys"] = k
            keys.append(s)
            print(f"  relay {s['relay_cpu_us_per_conn']:.0f} us/conn "
                  f"({s['relay_cpu_us_per_conn_net']:.0f} net of idle), failed {s['failed']}", flush=True)
        results["keys"] = keys
    results["headline"] = headline(steps, holds)
    results["elapsed_s"] = round(time.monotonic() - t_start, 1)
    results["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    data = {"params": params, "results": results}
    report(data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def headline(steps: list[Result], holds: list[Result]) -> Result:
    ok = [s for s in steps if not s["saturated"]] or steps
    best = max(steps, key=lambda s: s["achieved_per_s"])
    busiest = max(ok, key=lambda s: s["relay_core_pct"])
    us = busiest["relay_cpu_us_per_conn_net"]
    sat = next((s for s in steps if s["saturated"]), None)
    if sat is None:
        limited = "no limit reached (every offered rate was carried)"
    elif sat["relay_core_busy_pct"] >= 85 and sat["generator_core_busy_pct"] >= 85:
        limited = (f"both cores full (the relay process had {sat['relay_core_pct']:.0f} % of its core, the rest "
                   "its softirq work and any other load)")
    elif sat["relay_core_busy_pct"] >= 85:
        limited = "limited by the relay's core"
    elif sat["generator_core_busy_pct"] >= 85:
        limited = "limited by the generator's core (the relay's core had room)"
    else:
        limited = "limited with neither core full: " + sat["saturated"]
    top = max(holds, key=lambda h: h.get("live", 0)) if holds else {}
    return {"max_conns_per_s": round(best["achieved_per_s"]),
            "max_at_relay_core_pct": best["relay_core_pct"],
            "limit": limited,
            "relay_cpu_us_per_conn": us,
            "relay_core_conns_per_s_estimate": round(1e6 / us) if us else None,
            "max_held_live": top.get("live", 0), "held_rss_kib_per_conn": top.get("relay_rss_kib_per_conn"),
            "held_relay_core_pct": top.get("relay_core_pct_holding")}


def report(data: Result) -> None:
    p, r = data["params"], data["results"]
    h = r["headline"]
    print(f"\nbraid-proxy relay capacity ({p['mode']} mode, kernel {p['kernel']}, braid {p['braid']}, "
          f"{p['clients']} client boxes; {p['pinning']})")
    print(f"{'offered/s':>9s} {'achieved/s':>10s} {'failed':>6s} {'p50 ms':>7s} {'p99 ms':>7s} {'relay us/conn':>13s} "
          f"{'relay core%':>11s} {'gen core%':>9s}")
    for s in r["rate"]:
        print(f"{s['offered_per_s']:9.0f} {s['achieved_per_s']:10.0f} {s['failed']:6d} {s['latency_median_ms']:7.2f} "
              f"{s['latency_p99_ms']:7.2f} {s['relay_cpu_us_per_conn']:13.0f} {s['relay_core_pct']:11.1f} "
              f"{s['generator_core_busy_pct']:9.1f}")
    print(f"{'held':>6s} {'live':>6s} {'RSS MiB':>8s} {'KiB/conn':>9s} {'relay core%':>11s} {'echoes/s':>9s}")
    for x in r["hold"]:
        print(f"{x['n']:6d} {x.get('live', 0):6d} {x.get('relay_rss_held_kib', 0) / 1024:8.1f} "
              f"{x['relay_rss_kib_per_conn']:9.2f} {x.get('relay_core_pct_holding', 0):11.2f} "
              f"{x.get('echoes_per_s', 0):9.0f}")
    print(f"{'keys':>6s} {'relay us/conn':>13s} {'net of idle':>11s} {'achieved/s':>10s}")
    for k in r["keys"]:
        print(f"{k['keys']:6d} {k['relay_cpu_us_per_conn']:13.0f} {k['relay_cpu_us_per_conn_net']:11.0f} "
              f"{k['achieved_per_s']:10.0f}")
    print(f"relay idle: {r['relay_idle_core_pct']} % of its core")
    print(f"max {h['max_conns_per_s']} conn/s ({h['limit']}); relay {h['relay_cpu_us_per_conn']} us "
          f"CPU/conn net of idle -> ~{h['relay_core_conns_per_s_estimate']} conn/s per core; "
          f"held {h['max_held_live']} live at {h['held_rss_kib_per_conn']} KiB RSS each")


if __name__ == "__main__":
    sys.exit(main())

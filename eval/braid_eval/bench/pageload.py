"""Benchmark: page-load time and bytes on the wire through braid-proxy,
hywf (one split per page load), and with ``--conditions`` the
fingerprinting defences (braid-proxy's adaptive padding: ``ap``,
``hywf-ap``), against the kernel's ``default``, interleaved on the same
pages.

On the standard topology, one testbed for the whole run: in each round every
scheduler, in turn (the order alternates from round to round), runs on both
ends with a fresh braid-proxy pair (its spares made under that scheduler) and
loads the round's pages. So each scheduler loads the same pages, and a
change in the machine's load during the run (TCG shares the host) falls on
every scheduler alike; the sequential runs this replaced put one
scheduler's pages in one stretch of time and the other's in another.

Conditions are ``braid-wf collect``'s (``braid_wf.conditions``: the
scheduler and its settings at both ends, braid-proxy's padding with its
budget, hywf-ap's p-drift) or any scheduler's name. Bytes on the wire are
the client's two WAN interfaces' counters, both directions, over each
block of pages and the pause after its last page (a padded page's
padding goes on after its data), divided by the pages: with the page-load
time, a defence's bandwidth and time overhead over ``default``.

Pages: ``pages.py``'s seeded pages (8 objects of 2-150 KB over parallel
connections, a pause between pages so that each is a new hywf epoch; with
captures, for the per-page wan1 share), or with ``--corpus`` loads of the
website-fingerprinting corpus (``websites.py``: an HTML document, then 1-3
waves of objects over up to 6 connections), as ``wf collect`` loads them.
Prints median, mean and p90 page-load time per scheduler and the ratio to
the first one, and the median of the per-page ratios to the first one
with its confidence interval (every condition loads the same pages, so
the ratio page by page leaves out how long a page takes anyway; the JSON
keeps each page's time, ``page_times_s``); with pages, also the per-page
wan1 share spread and the proxy's join-wait counters. Nothing here
asserts a target.

Run inside braid's kernel::

    kernel/vm run --timeout 2400 -- python3 -m braid_eval.bench.pageload
    kernel/vm run --timeout 2400 -- python3 -m braid_eval.bench.pageload --corpus --pages 100
    kernel/vm run -- python3 -m braid_eval.bench.pageload --quick
    kernel/vm run --timeout 3000 -- python3 -m braid_eval.bench.pageload --corpus \
        --conditions default hywf ap hywf-ap hywf-long hywf-ap-long --pages 80 --rounds 8 \
        --out out/bench-pageload-defences.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from braid_eval.analysis.provenance import provenance
from braid_eval.bench.comparison import paired_ratio, text_table
from braid_eval.measure.page_split import PageServer, traced_pages
from braid_eval.measure.proxy_pair import BraidProxyPair
from braid_eval.measure.transfer import read_mib
from braid_eval.progress import Progress
from braid_testbed import LinkSpec, StandardTestbed, kernel_has_netem
from braid_testbed.topology import interface_counters
from braid_wf import conditions
from braid_wf.conditions import Condition
from braid_wf.corpus import corpus_server, load_pages, server_address

WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)
CORPUS_GAP_MS = 1500  # as wf collect


def condition(name: str) -> Condition:
    """A collection condition by name, or a scheduler's name: that
    scheduler at both ends, nothing else."""
    cond = conditions.CONDITIONS.get(name, Condition(name))
    if cond.tor or not cond.multipath:
        raise ValueError(f"{name}: the benchmark loads pages through braid-proxy over both WANs "
                         "(not Tor mode, not one WAN)")
    return cond


def wire_bytes(tb: StandardTestbed) -> int:
    """Bytes the client's WAN interfaces sent and received so far."""
    return sum(sum(interface_counters(tb.client, f"wan{w}")) for w in (1, 2))


def corpus_block(tb: StandardTestbed, socks: str, loads: list[tuple[int, int]]) -> list[float]:
    """Load times (s) of corpus ``loads`` (site, instance) through ``socks``."""
    proc, results = load_pages(tb.client, server_address(), socks, loads, CORPUS_GAP_MS)
    if proc.returncode != 0 or len(results) != len(loads) or not all(r["ok"] for r in results):
        raise RuntimeError(f"corpus loads failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    return [float(r["seconds"]) for r in results]


def summary(times: list[float], shares: list[float], wire: int, held: int, gave_up: int) -> dict[str, float]:
    ordered = sorted(times)
    figures = {"pages": len(times), "median_s": statistics.median(times), "mean_s": statistics.fmean(times),
               "p90_s": ordered[int(0.9 * (len(ordered) - 1))], "wire_kb_per_page": wire / len(times) / 1000,
               "join_waits": held, "join_wait_timeouts": gave_up}
    # only pages.py's pages are captured per page; a row of NaN says nothing (and is not JSON)
    if shares:
        figures["wan1_down_share_sd"] = statistics.pstdev(shares)
    return figures


def run(names: list[str], pages: int, rounds: int, corpus: bool, workdir: Path,
        padding_budget: float = conditions.PADDING_BUDGET,
        n_chp: int = conditions.N_CHP) -> tuple[dict[str, dict[str, float]], dict[str, list[float]]]:
    """Every condition loads ``pages`` pages, ``pages // rounds`` per round:
    the figures per condition, and each condition's load times (s) in
    page order, the same pages in the same order for every condition."""
    per_round = max(1, pages // rounds)
    times: dict[str, list[float]] = {n: [] for n in names}
    shares: dict[str, list[float]] = {n: [] for n in names}
    wire = dict.fromkeys(names, 0)
    counters = {n: [0, 0] for n in names}
    with StandardTestbed("bpl", wan1=WAN, wan2=WAN) as tb, contextlib.ExitStack() as servers:
        tb.enable_kernel_pm()
        if corpus:
            servers.enter_context(corpus_server(tb.server, server_address()))
        else:
            servers.enter_context(PageServer(tb))
        progress = Progress("bench", rounds * len(names))
        for r in range(rounds):
            order = names if r % 2 == 0 else names[::-1]
            # corpus: sites 0.. at instance r; pages: the round's seed
            loads = [(k, r) for k in range(per_round)]
            for name in order:
                cond = condition(name)
                tb.set_scheduler(cond.scheduler)
                pad = conditions.padding_args(cond, padding_budget)
                settings = {f"net.mptcp.{k}": v for k, v in conditions.settings(cond, n_chp)}
                before = tb.proxy.run(["nstat", "-az"])
                with tb.changed_sysctls(("client", "proxy"), settings), \
                        BraidProxyPair(tb, workdir / f"{name}-{r}",
                                       client_args=BraidProxyPair.DEFAULT_CLIENT_ARGS + pad, server_args=pad) as pair:
                    sent = wire_bytes(tb)
                    if corpus:
                        times[name] += corpus_block(tb, pair.socks, loads)
                    else:
                        traces = traced_pages(tb, pair.socks, per_round, ["--seed", str(r + 1)])
                        if not all(t.result["ok"] for t in traces):
                            raise RuntimeError(f"{name}: a page failed its checksum")
                        times[name] += [t.seconds for t in traces]
                        shares[name] += [t.share(1, "down") for t in traces]
                    # the pause after the last page, as between pages: its padding ends there
                    time.sleep(CORPUS_GAP_MS / 1000)
                    wire[name] += wire_bytes(tb) - sent
                after = tb.proxy.run(["nstat", "-az"])
                for i, mib in enumerate(("MPTcpExtSchedJoinWait", "MPTcpExtSchedJoinWaitTimeout")):
                    counters[name][i] += read_mib(after, mib) - read_mib(before, mib)
                block = times[name][-per_round:]
                progress.step(f"round {r + 1}/{rounds}, {name}: {len(block)} pages, "
                              f"median {statistics.median(block):.2f} s")
    return {n: summary(times[n], shares[n], wire[n], *counters[n]) for n in names}, times


# Figures per scheduler, side by side with their ratios to the baseline.
ROWS = [("page-load time median (s)", "median_s"), ("page-load time mean (s)", "mean_s"),
        ("page-load time p90 (s)", "p90_s"), ("bytes on the wire per page (kB)", "wire_kb_per_page"),
        ("wan1 share sd, per page (down)", "wan1_down_share_sd"),
        ("first flights held for a join", "join_waits"), ("  of which no join in time", "join_wait_timeouts")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conditions", "--schedulers", dest="conditions", nargs="+", default=["default", "hywf"],
                   metavar="NAME",
                   help="schedulers or collection conditions (" + " ".join(
                       n for n, c in conditions.CONDITIONS.items() if c.multipath and not c.tor)
                   + "); the first is the baseline (default: default hywf)")
    p.add_argument("--pages", type=int, default=60, help="page loads per condition (default 60)")
    p.add_argument("--rounds", type=int, default=5, help="rounds the pages are interleaved in (default 5)")
    p.add_argument("--corpus", action="store_true",
                   help="the website-fingerprinting corpus's loads instead of pages.py's pages")
    p.add_argument("--padding-budget", type=float, default=conditions.PADDING_BUDGET,
                   help=f"padded conditions: braid-proxy's padding budget (default {conditions.PADDING_BUDGET})")
    p.add_argument("--n-chp", type=int, default=conditions.N_CHP,
                   help=f"hywf-ap and hywf-ap-long: the kernel's p-drift, net.mptcp.hywf_nchp "
                   f"(default {conditions.N_CHP})")
    p.add_argument("--quick", action="store_true", help="12 pages per condition in 2 rounds, for a smoke run")
    p.add_argument("--out", type=Path, default=Path("out/bench-pageload.json"))
    args = p.parse_args()
    for name in args.conditions:
        try:
            condition(name)
        except ValueError as err:
            p.error(str(err))
    if len(set(args.conditions)) != len(args.conditions):
        p.error("--conditions: each name once")
    if args.padding_budget < 0 or args.n_chp < 0:
        p.error("--padding-budget and --n-chp must be >= 0")
    if not kernel_has_netem():
        print("bench: needs braid's kernel (run through kernel/vm)", file=sys.stderr)
        return 2
    pages, rounds = (12, 2) if args.quick else (args.pages, args.rounds)
    if not 1 <= rounds <= pages:
        p.error("--rounds must be between 1 and --pages")
    with tempfile.TemporaryDirectory(prefix="braid-bench-pl-") as tmp:
        results, times = run(args.conditions, pages, rounds, args.corpus, Path(tmp), args.padding_budget,
                             args.n_chp)
    base = args.conditions[0]
    what = "corpus loads (HTML, then 1-3 waves over up to 6 connections)" if args.corpus \
        else "8 objects per page"
    print(f"\npage-load benchmark: 2 x {WAN.rate_mbit:g} Mbit/s, {WAN.delay_ms:g} ms WANs, {what} through "
          f"braid-proxy, {results[base]['pages']} pages per condition interleaved in {rounds} rounds; "
          "both ends run the scheduler")
    print("\n".join(text_table(results, args.conditions, ROWS, digits=3)))
    for name in args.conditions[1:]:
        r = paired_ratio(times[name], times[base])
        print(f"page-load time {name}/{base}, median of the per-page ratios: {r.median:.3f} "
              f"({100 * r.level:.0f} % CI {r.low:.3f}-{r.high:.3f}, {r.items} pages)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    params = {"conditions": args.conditions, "pages": pages, "rounds": rounds, "corpus": args.corpus,
              "padding_budget": args.padding_budget, "n_chp": args.n_chp, "quick": args.quick, **provenance()}
    page_times = {n: [round(t, 4) for t in times[n]] for n in args.conditions}
    args.out.write_text(json.dumps({"params": params, "results": results, "page_times_s": page_times},
                                   indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

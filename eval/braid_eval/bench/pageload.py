"""Benchmark: page-load time through braid-proxy, hywf (one split per page
load) against the kernel's ``default``, interleaved on the same pages.

On the standard topology, one testbed for the whole run: in each round every
scheduler, in turn (the order alternates from round to round), runs on both
ends with a fresh braid-proxy pair (its spares made under that scheduler) and
loads the round's pages. So each scheduler loads the same pages, and a
change in the machine's load during the run (TCG shares the host) falls on
every scheduler alike; the sequential runs this replaced put one
scheduler's pages in one stretch of time and the other's in another.

Pages: ``pages.py``'s seeded pages (8 objects of 2-150 KB over parallel
connections, a pause between pages so that each is a new hywf epoch; with
captures, for the per-page wan1 share), or with ``--corpus`` loads of the
website-fingerprinting corpus (``websites.py``: an HTML document, then 1-3
waves of objects over up to 6 connections), as ``wf collect`` loads them.
Prints median, mean and p90 page-load time per scheduler and the ratio to
the first one; with pages, also the per-page wan1 share spread and the
proxy's join-wait counters. Nothing here asserts a target.

Run inside braid's kernel::

    kernel/vm run --timeout 2400 -- python3 -m braid_eval.bench.pageload
    kernel/vm run --timeout 2400 -- python3 -m braid_eval.bench.pageload --corpus --pages 100
    kernel/vm run -- python3 -m braid_eval.bench.pageload --quick
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

from braid_eval.analysis.provenance import provenance
from braid_eval.bench.comparison import text_table
from braid_eval.measure.page_split import PageServer, traced_pages
from braid_eval.measure.proxy_pair import BraidProxyPair
from braid_eval.measure.transfer import read_mib
from braid_eval.progress import Progress
from braid_testbed import LinkSpec, StandardTestbed, kernel_has_netem
from braid_wf.corpus import corpus_server, load_pages, server_address

WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)
CORPUS_GAP_MS = 1500  # as wf collect


def corpus_block(tb: StandardTestbed, socks: str, loads: list[tuple[int, int]]) -> list[float]:
    """Load times (s) of corpus ``loads`` (site, instance) through ``socks``."""
    proc, results = load_pages(tb.client, server_address(), socks, loads, CORPUS_GAP_MS)
    if proc.returncode != 0 or len(results) != len(loads) or not all(r["ok"] for r in results):
        raise RuntimeError(f"corpus loads failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    return [float(r["seconds"]) for r in results]


def summary(times: list[float], shares: list[float], held: int, gave_up: int) -> dict[str, float]:
    ordered = sorted(times)
    return {"pages": len(times), "median_s": statistics.median(times), "mean_s": statistics.fmean(times),
            "p90_s": ordered[int(0.9 * (len(ordered) - 1))],
            "wan1_down_share_sd": statistics.pstdev(shares) if shares else float("nan"),
            "join_waits": held, "join_wait_timeouts": gave_up}


def run(schedulers: list[str], pages: int, rounds: int, corpus: bool, workdir: Path) -> dict[str, dict[str, float]]:
    """Every scheduler loads ``pages`` pages, ``pages // rounds`` per round."""
    per_round = max(1, pages // rounds)
    times: dict[str, list[float]] = {n: [] for n in schedulers}
    shares: dict[str, list[float]] = {n: [] for n in schedulers}
    counters = {n: [0, 0] for n in schedulers}
    with StandardTestbed("bpl", wan1=WAN, wan2=WAN) as tb, contextlib.ExitStack() as servers:
        tb.enable_kernel_pm()
        if corpus:
            servers.enter_context(corpus_server(tb.server, server_address()))
        else:
            servers.enter_context(PageServer(tb))
        progress = Progress("bench", rounds * len(schedulers))
        for r in range(rounds):
            order = schedulers if r % 2 == 0 else schedulers[::-1]
            # corpus: sites 0.. at instance r; pages: the round's seed
            loads = [(k, r) for k in range(per_round)]
            for name in order:
                tb.set_scheduler(name)
                before = tb.proxy.run(["nstat", "-az"])
                with BraidProxyPair(tb, workdir / f"{name}-{r}") as pair:
                    if corpus:
                        times[name] += corpus_block(tb, pair.socks, loads)
                    else:
                        traces = traced_pages(tb, pair.socks, per_round, ["--seed", str(r + 1)])
                        if not all(t.result["ok"] for t in traces):
                            raise RuntimeError(f"{name}: a page failed its checksum")
                        times[name] += [t.seconds for t in traces]
                        shares[name] += [t.share(1, "down") for t in traces]
                after = tb.proxy.run(["nstat", "-az"])
                for i, mib in enumerate(("MPTcpExtSchedJoinWait", "MPTcpExtSchedJoinWaitTimeout")):
                    counters[name][i] += read_mib(after, mib) - read_mib(before, mib)
                block = times[name][-per_round:]
                progress.step(f"round {r + 1}/{rounds}, scheduler {name}: {len(block)} pages, "
                              f"median {statistics.median(block):.2f} s")
    return {n: summary(times[n], shares[n], *counters[n]) for n in schedulers}


# Figures per scheduler, side by side with their ratios to the baseline.
ROWS = [("page-load time median (s)", "median_s"), ("page-load time mean (s)", "mean_s"),
        ("page-load time p90 (s)", "p90_s"), ("wan1 share sd, per page (down)", "wan1_down_share_sd"),
        ("first flights held for a join", "join_waits"), ("  of which no join in time", "join_wait_timeouts")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedulers", nargs="+", default=["default", "hywf"],
                   help="first one is the baseline (default: default hywf)")
    p.add_argument("--pages", type=int, default=60, help="page loads per scheduler (default 60)")
    p.add_argument("--rounds", type=int, default=5, help="rounds the pages are interleaved in (default 5)")
    p.add_argument("--corpus", action="store_true",
                   help="the website-fingerprinting corpus's loads instead of pages.py's pages")
    p.add_argument("--quick", action="store_true", help="12 pages per scheduler in 2 rounds, for a smoke run")
    p.add_argument("--out", type=Path, default=Path("out/bench-pageload.json"))
    args = p.parse_args()
    if not kernel_has_netem():
        print("bench: needs braid's kernel (run through kernel/vm)", file=sys.stderr)
        return 2
    pages, rounds = (12, 2) if args.quick else (args.pages, args.rounds)
    if not 1 <= rounds <= pages:
        p.error("--rounds must be between 1 and --pages")
    with tempfile.TemporaryDirectory(prefix="braid-bench-pl-") as tmp:
        results = run(args.schedulers, pages, rounds, args.corpus, Path(tmp))
    base = args.schedulers[0]
    what = "corpus loads (HTML, then 1-3 waves over up to 6 connections)" if args.corpus \
        else "8 objects per page"
    print(f"\npage-load benchmark: 2 x {WAN.rate_mbit:g} Mbit/s, {WAN.delay_ms:g} ms WANs, {what} through "
          f"braid-proxy, {results[base]['pages']} pages per scheduler interleaved in {rounds} rounds; "
          "both ends run the scheduler")
    print("\n".join(text_table(results, args.schedulers, ROWS, digits=3)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    params = {"schedulers": args.schedulers, "pages": pages, "rounds": rounds, "corpus": args.corpus,
              "quick": args.quick, **provenance()}
    args.out.write_text(json.dumps({"params": params, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Synthetic websites for website-fingerprinting experiments, and a loader
that fetches a site's objects the way a browser does.

Standalone on purpose, like pages.py (whose server and wire protocol it
uses): it runs inside namespaces and the VM as
``python3 eval/braid_testbed/websites.py``.

A site is stable but noisy, as real ones are. Its seed
fixes an HTML document and 1-3 waves of sub-resources (scripts and styles
the HTML names, then images and fonts they name), each with a base size
(log-uniform, 300 B - 400 KB) and a request size. Each load of the site
(its instance) varies: every size is scaled by a log-normal factor (sd
0.12), a sub-resource is left out with probability 0.08 (a cached or
A/B-tested object), and 0-2 third-party objects (ads, trackers) of random
size are added to the last wave. Sites 0..M-1 are the monitored ones;
unmonitored sites use the same generator with other seeds.

Loading: the HTML first on one connection; then each wave's objects in
parallel, at most ``--parallel`` connections at a time (browsers open six
per host, over HTTP/1.1), through a SOCKS5 proxy when ``--socks`` is given.
With ``--one-connection`` a load is one connection instead, as a browser's
HTTP/2 connection to a site: the HTML, then each wave's requests at once
and its answers in order. One JSON line per load::

    {"name": "3-7", "site": 3, "instance": 7, "start": ..., "end": ...,
     "seconds": 0.41, "objects": 17, "down": 812345, "up": 9120, "ok": true}

Usage::

    websites.py serve --listen 10.10.0.2:8080 &
    websites.py load --server 10.10.0.2:8080 --socks 127.0.0.1:1080 --loads 0-0 1-0 0-1
    websites.py describe --site 3          # the site's objects, as JSON
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

if __package__:
    from . import pages
else:  # run as a script: pages.py sits beside this file
    import pages  # type: ignore[no-redef]

SIZE_NOISE = 0.12
DROP_P = 0.08
MAX_EXTRA = 2
MSS = 1448

Wave = list[tuple[int, int]]  # (response bytes, request bytes) per object


def site_waves(site: int, seed: int = 1) -> list[Wave]:
    """The site's base objects: wave 0 is the HTML, then 1-3 waves."""
    rng = random.Random(f"{seed}:site:{site}")
    html = (int(math.exp(rng.uniform(math.log(8_000), math.log(120_000)))), rng.randint(300, 900))
    waves: list[Wave] = [[html]]
    lo, hi = math.log(300), math.log(400_000)
    for _ in range(rng.randint(1, 3)):
        count = rng.randint(1, 14)
        waves.append([(int(math.exp(rng.uniform(lo, hi))), rng.randint(250, 1_200)) for _ in range(count)])
    return waves


def load_waves(site: int, instance: int, seed: int = 1) -> list[Wave]:
    """The objects one load of ``site`` fetches: the base objects with this
    instance's noise (sizes, left-out objects, third-party extras)."""
    rng = random.Random(f"{seed}:load:{site}:{instance}")
    out: list[Wave] = []
    for w, wave in enumerate(site_waves(site, seed)):
        noisy = []
        for size, req in wave:
            if w > 0 and rng.random() < DROP_P:
                continue
            noisy.append((max(64, int(size * math.exp(rng.gauss(0, SIZE_NOISE)))), req))
        out.append(noisy)
    for _ in range(rng.randint(0, MAX_EXTRA)):
        out[-1].append((int(math.exp(rng.uniform(math.log(200), math.log(60_000)))), rng.randint(300, 2_000)))
    return [w for w in out if w]


def parse_load(text: str) -> tuple[int, int]:
    """``site-instance`` (a monitored load) or ``site`` (instance 0)."""
    site, _, inst = text.partition("-")
    if not site.isdigit() or (inst and not inst.isdigit()):
        raise argparse.ArgumentTypeError(f"expected SITE-INSTANCE, got {text!r}")
    return int(site), int(inst or 0)


def load_site(server: tuple[str, int], socks: tuple[str, int] | None, waves: list[Wave],
              pool: ThreadPoolExecutor, one_connection: bool = False) -> bool:
    ok = True
    if one_connection:
        with pages.connect(server, socks) as sock:
            for wave in waves:
                ok &= pages.fetch_pipelined(sock, wave)
        return ok
    for wave in waves:  # a wave starts when the one that names it is in
        ok &= all(pool.map(lambda o: pages.fetch(server, socks, *o), wave))
    return ok


def load(args: argparse.Namespace) -> int:
    ok_all = True
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        for n, (site, instance) in enumerate(args.loads):
            if n:
                time.sleep(args.gap_ms / 1000)
            waves = load_waves(site, instance, args.seed)
            start = time.time()
            try:
                ok = load_site(args.server, args.socks, waves, pool, args.one_connection)
            except (OSError, ConnectionError) as err:
                print(f"load {site}-{instance}: {err}", file=sys.stderr)
                ok = False
            end = time.time()
            ok_all &= ok
            objs = [o for w in waves for o in w]
            print(json.dumps({"name": f"{site}-{instance}", "site": site, "instance": instance,
                              "start": start, "end": end, "seconds": round(end - start, 4),
                              "objects": len(objs), "down": sum(o[0] for o in objs),
                              "up": sum(o[1] for o in objs), "ok": ok}), flush=True)
            print(f"load {n + 1}/{len(args.loads)} ({site}-{instance}): {end - start:.2f} s",
                  file=sys.stderr, flush=True)
    return 0 if ok_all else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve objects until killed (pages.py's server)")
    s.add_argument("--listen", type=pages.parse_hostport, required=True, help="HOST:PORT")
    ld = sub.add_parser("load", help="load sites, one JSON line per load")
    ld.add_argument("--server", type=pages.parse_hostport, required=True, help="object server HOST:PORT")
    ld.add_argument("--socks", type=pages.parse_hostport, help="SOCKS5 proxy HOST:PORT (default: direct)")
    ld.add_argument("--loads", type=parse_load, nargs="+", required=True,
                    help="loads in order, each SITE-INSTANCE (e.g. 0-0 1-0 0-1)")
    ld.add_argument("--parallel", type=int, default=6, help="connections at once (default 6)")
    ld.add_argument("--one-connection", action="store_true",
                    help="each load over one connection, requests of a wave at once (HTTP/2-like)")
    ld.add_argument("--gap-ms", type=int, default=1500,
                    help="pause between loads (default 1500: more than hywf's 1 s idle split)")
    ld.add_argument("--seed", type=int, default=1, help="corpus seed")
    d = sub.add_parser("describe", help="print a site's waves of (response, request) bytes")
    d.add_argument("--site", type=int, required=True)
    d.add_argument("--instance", type=int, help="one load's objects instead of the base ones")
    d.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.cmd == "serve":
        pages.serve(args.listen)
        return 0
    if args.cmd == "describe":
        waves = site_waves(args.site, args.seed) if args.instance is None else \
            load_waves(args.site, args.instance, args.seed)
        print(json.dumps(waves))
        return 0
    if args.parallel < 1:
        parser.error("--parallel must be >= 1")
    return load(args)


if __name__ == "__main__":
    sys.exit(main())

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
and its answers in order. With ``--browser`` a real browser engine loads
the same loads as web pages (``website_http.py``'s server, headless
Chromium through ``chromium.py``): its own connections, headers and order,
a fresh profile per load; a load is complete when the server's log
(``--served-log``) holds every one of its objects. One JSON line per load::

    {"name": "3-7", "site": 3, "instance": 7, "start": ..., "end": ...,
     "seconds": 0.41, "objects": 17, "down": 812345, "up": 9120, "ok": true}

A failed load has ``"ok": false`` and, from the browser, the reason in
``"error"``.

Usage::

    websites.py serve --listen 10.10.0.2:8080 &
    websites.py load --server 10.10.0.2:8080 --socks 127.0.0.1:1080 --loads 0-0 1-0 0-1
    website_http.py serve --listen 10.10.0.2:8081 --log served.jsonl &
    websites.py load --browser --served-log served.jsonl --server 10.10.0.2:8081 \
        --socks 127.0.0.1:1080 --loads 0-0 1-0
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
from typing import Any

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


def report(site: int, instance: int, start: float, end: float, objects: int, down: int, up: int | None,
           ok: bool, n: int, total: int, **extra: object) -> None:
    print(json.dumps({"name": f"{site}-{instance}", "site": site, "instance": instance,
                      "start": start, "end": end, "seconds": round(end - start, 4),
                      "objects": objects, "down": down, "up": up, "ok": ok, **extra}), flush=True)
    print(f"load {n + 1}/{total} ({site}-{instance}): {end - start:.2f} s", file=sys.stderr, flush=True)


def served_since(log: str, load: str, since: float) -> dict[str, int]:
    """The objects of ``load`` the HTTP server sent in full since ``since``."""
    out: dict[str, int] = {}
    with open(log) as f:
        for line in f:
            r = json.loads(line)
            if r["load"] == load and r["time"] >= since:
                out[r["object"]] = r["bytes"]
    return out


def served_in_full(log: str, load: str, since: float, expected: dict[str, int], patience: float = 2.0) -> str:
    """Why ``load`` is not complete in the served log since ``since``, or ''.
    The server writes an object's line after handing its last byte to the
    kernel, so under load the browser's load event can come first: the log
    gets ``patience`` seconds to catch up before an object counts as missing."""
    deadline = time.monotonic() + patience
    while True:
        served = served_since(log, load, since)
        if served == expected:
            return ""
        if time.monotonic() >= deadline:
            missing = sorted(set(expected) - set(served))
            wrong = sorted(o for o in expected.keys() & served.keys() if served[o] != expected[o])
            return f"the server did not send {len(missing)} of {len(expected)} objects in full ({missing[:5]})" + (
                f", sizes differ for {wrong[:5]}" if wrong else "")
        time.sleep(0.05)


def received_in_full(loaded: Any, urls: dict[str, str], expected: dict[str, int]) -> str:
    """Why the browser did not receive every object of a load whole, or
    ''. ``loaded``: its chromium.Load; ``urls`` and ``expected``: each
    object's URL and body size. A browser may cancel a request whose
    server sent everything (the served log cannot tell), so the browser's
    own account is checked too."""
    gave_up = sorted(o for o, url in urls.items() if url in loaded.failed)
    if gave_up:
        return (f"the browser gave up {len(gave_up)} of {len(urls)} objects ({gave_up[0]}: "
                f"{loaded.failed[urls[gave_up[0]]]})")
    short = sorted(o for o, url in urls.items() if loaded.finished.get(url, 0) < expected[o])
    if short:
        return (f"the browser received {len(short)} of {len(urls)} objects short or not at all ({short[0]}: "
                f"{loaded.finished.get(urls[short[0]], 0)} of at least {expected[short[0]]} bytes)")
    return ""


def load_in_browser(args: argparse.Namespace) -> int:
    """Each load as a web page in headless Chromium; complete when the
    server sent every object of it."""
    if __package__:
        from . import website_http
        from .chromium import BrowserError, Chromium
    else:
        import website_http  # type: ignore[no-redef]
        from chromium import BrowserError, Chromium  # type: ignore[no-redef]
    socks = f"{args.socks[0]}:{args.socks[1]}" if args.socks else None
    host, port = args.server
    ok_all = True
    with Chromium(socks) as browser:
        for n, (site, instance) in enumerate(args.loads):
            if n:
                time.sleep(args.gap_ms / 1000)
            name = f"{site}-{instance}"
            expected = website_http.objects_of(site, instance, args.seed)
            start = end = time.time()
            try:
                loaded = browser.load(f"http://{host}:{port}/{name}/", timeout=args.timeout)
                start, end = loaded.start, loaded.end
                # the browser's account first: it says why (a failed
                # request's net error), the server's log only what is missing
                why = "; ".join(filter(None, (received_in_full(
                    loaded, {o: f"http://{host}:{port}{path}"
                             for o, path in website_http.object_paths(site, instance, args.seed).items()},
                    expected), served_in_full(args.served_log, name, start, expected))))
            except BrowserError as err:
                why = str(err)
            if why:
                print(f"load {name}: {why}", file=sys.stderr)
            ok_all &= not why
            report(site, instance, start, end, len(expected), sum(expected.values()), None, not why, n,
                   len(args.loads), loader="chromium", browser=browser.version, **({"error": why} if why else {}))
    return 0 if ok_all else 1


def load(args: argparse.Namespace) -> int:
    if args.browser:
        return load_in_browser(args)
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
            report(site, instance, start, end, len(objs), sum(o[0] for o in objs), sum(o[1] for o in objs),
                   ok, n, len(args.loads))
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
    ld.add_argument("--browser", action="store_true",
                    help="load each as a web page in headless Chromium from website_http.py's server "
                         "(--server), which must log to --served-log")
    ld.add_argument("--served-log", help="--browser: the HTTP server's --log file")
    ld.add_argument("--timeout", type=float, default=30, help="--browser: seconds per load (default 30)")
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
    if args.browser and not args.served_log:
        parser.error("--browser needs --served-log (the HTTP server's --log)")
    return load(args)


if __name__ == "__main__":
    sys.exit(main())

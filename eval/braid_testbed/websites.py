#!/usr/bin/env python3
"""Synthetic websites for website-fingerprinting experiments, and a loader
that fetches a site's objects the way a browser does.

Standalone on purpose, like pages.py (whose server and wire protocol it
uses): it runs inside namespaces and the VM as
``python3 eval/braid_testbed/websites.py``.

A site is stable but noisy, as real ones are. Its seed fixes an HTML
document and waves of sub-resources (scripts and styles the HTML names,
then images and fonts they name), each with a base size and a request
size; each load of the site (its instance) varies them. Two profiles
(``--profile``) make the sites:

- ``small`` (the default): 1-3 waves of 1-14 objects, each of a base size
  log-uniform in 300 B - 400 KB (a median site: 15 objects, 0.7 MB). A
  load scales every size by a log-normal factor (sd 0.12), leaves a
  sub-resource out with probability 0.08 (a cached or A/B-tested object)
  and adds 0-2 third-party objects (ads, trackers) to the last wave.
- ``web``: sites shaped like today's home pages, after the HTTP Archive's
  desktop crawl (71 requests and 2.6 MB a median page): a median site
  makes 66 requests for 2.6 MB, a tenth make more than 150 requests or
  8.8 MB, as scripts, styles, fonts, images and API calls in three waves,
  45 % of them to third parties. What a load changes
  follows what changes on real pages (WEB_* below): the HTML, API answers
  and content images; third-party objects and the ads a load adds.

Sites 0..M-1 are the monitored ones; unmonitored sites use the same
generator with other seeds.

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
PROFILES = ("small", "web")

Wave = list[tuple[int, int]]  # (response bytes, request bytes) per object


def site_waves(site: int, seed: int = 1, profile: str = "small") -> list[Wave]:
    """The site's base objects: wave 0 is the HTML, then the waves of
    sub-resources (``profile``: one of PROFILES, see the module's doc)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown site profile {profile!r}, not one of {', '.join(PROFILES)}")
    if profile == "web":
        return [[(size, req) for size, req, _ in wave] for wave in _web_site(site, seed)]
    rng = random.Random(f"{seed}:site:{site}")
    html = (int(math.exp(rng.uniform(math.log(8_000), math.log(120_000)))), rng.randint(300, 900))
    waves: list[Wave] = [[html]]
    lo, hi = math.log(300), math.log(400_000)
    for _ in range(rng.randint(1, 3)):
        count = rng.randint(1, 14)
        waves.append([(int(math.exp(rng.uniform(lo, hi))), rng.randint(250, 1_200)) for _ in range(count)])
    return waves


def load_waves(site: int, instance: int, seed: int = 1, profile: str = "small") -> list[Wave]:
    """The objects one load of ``site`` fetches: the base objects with this
    instance's noise (sizes, left-out objects, third-party extras)."""
    if profile == "web":
        return _web_load(site, instance, seed)
    rng = random.Random(f"{seed}:load:{site}:{instance}")
    out: list[Wave] = []
    for w, wave in enumerate(site_waves(site, seed, profile)):
        noisy = []
        for size, req in wave:
            if w > 0 and rng.random() < DROP_P:
                continue
            noisy.append((max(64, int(size * math.exp(rng.gauss(0, SIZE_NOISE)))), req))
        out.append(noisy)
    for _ in range(rng.randint(0, MAX_EXTRA)):
        out[-1].append((int(math.exp(rng.uniform(math.log(200), math.log(60_000)))), rng.randint(300, 2_000)))
    return [w for w in out if w]


# The "web" profile. Each kind of sub-resource: the wave a browser finds it
# in, its mean count on a typical page and its median size (bytes) with
# the spread (sd of the log) of sizes across objects. The counts are the
# HTTP Archive's desktop crawl's (Web Almanac 2024, Page Weight: a median
# page makes 71 requests for 2.6 MB; scripts 24 requests and 613 KB,
# images 18 and 1054 KB, fonts 131 KB, CSS 78 KB, HTML 18 KB); the sizes
# are heavy-tailed, and their medians put the generated pages' bytes on
# the crawl's median and 90th percentile (the host test checks both).
WEB_KINDS: dict[str, tuple[int, float, int, float]] = {
    "css": (1, 6, 11_000, 1.0),
    "script": (1, 24, 18_000, 1.3),
    "font": (2, 4, 45_000, 0.5),
    "image": (2, 18, 32_000, 1.4),
    "xhr": (3, 18, 2_400, 1.2),
}
# Across sites, counts and bytes vary log-normally: a tenth of pages make
# more than about 2.5x the median's requests and weigh more than about 3x
# its bytes (Web Almanac 2019: 74 / 179 requests, 1.9 / 6 MB at the median
# / 90th percentile).
WEB_COUNT_SD = 0.7
WEB_BYTES_SD = 0.6
# About half of a page's requests go to third parties (ads, analytics,
# CDNs of other owners: Web Almanac, Third Parties).
WEB_THIRD_PARTY = 0.45
# What changes from one load to the next (assumptions, not measurements):
# the HTML and API answers are dynamic; a quarter of first-party images are
# content that changes (a news page's pictures); static files are the
# same bytes; a first-party object is left out with probability 0.03 (lazy
# loading, A/B tests), a third-party one with 0.2 (an ad auction, consent);
# third-party answers vary in size; and a load adds Poisson(3) third-party
# objects of its own (ad creatives, beacons) to its last wave.
WEB_DYNAMIC_SD = 0.15
WEB_CONTENT_IMAGES = 0.25
WEB_CONTENT_SD = 0.4
WEB_STATIC_SD = 0.02
WEB_DROP_FIRST = 0.03
WEB_DROP_THIRD = 0.2
WEB_THIRD_SD = 0.3
WEB_EXTRA_MEAN = 3

# An object of a "web" site: response and request bytes, and how its size
# varies between loads (the sd of a log-normal factor; -1: changes every
# load as third-party content does, and may be left out).
WebObject = tuple[int, int, float]


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw: Knuth's method for small means, the normal
    approximation above 30 (a page's counts are at most a few hundred)."""
    if mean > 30:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def _web_site(site: int, seed: int) -> list[list[WebObject]]:
    rng = random.Random(f"{seed}:web-site:{site}")
    count_scale = math.exp(rng.gauss(0, WEB_COUNT_SD))
    bytes_scale = math.exp(rng.gauss(0, WEB_BYTES_SD))
    cookie = rng.randint(0, 1_500)  # first-party requests carry the site's cookies
    # the HTML: 18 KB at the median page, the most varied object
    html = (int(18_000 * bytes_scale * math.exp(rng.gauss(0, 0.8))) + 2_000, 400 + cookie, WEB_DYNAMIC_SD)
    waves: list[list[WebObject]] = [[html], [], [], []]
    for kind, (wave, mean, median, spread) in WEB_KINDS.items():
        for _ in range(_poisson(rng, mean * count_scale)):
            size = max(120, int(median * bytes_scale * math.exp(rng.gauss(0, spread))))
            if rng.random() < WEB_THIRD_PARTY:
                waves[wave].append((size, rng.randint(300, 1_200), -1.0))
                continue
            content = kind == "xhr" or (kind == "image" and rng.random() < WEB_CONTENT_IMAGES)
            varies = WEB_CONTENT_SD if content else WEB_STATIC_SD
            waves[wave].append((size, rng.randint(350, 900) + cookie, varies))
    return [w for w in waves if w]


def _web_load(site: int, instance: int, seed: int) -> list[Wave]:
    rng = random.Random(f"{seed}:web-load:{site}:{instance}")
    out: list[Wave] = []
    for w, wave in enumerate(_web_site(site, seed)):
        noisy: Wave = []
        for size, req, varies in wave:
            third = varies < 0
            if w > 0 and rng.random() < (WEB_DROP_THIRD if third else WEB_DROP_FIRST):
                continue
            sd = WEB_THIRD_SD if third else varies
            noisy.append((max(64, int(size * math.exp(rng.gauss(0, sd)))), req))
        out.append(noisy)
    for _ in range(_poisson(rng, WEB_EXTRA_MEAN)):
        out[-1].append((max(64, int(4_000 * math.exp(rng.gauss(0, 1.5)))), rng.randint(300, 1_200)))
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


# The server writes an object's log line after handing its last byte to the
# kernel, so under load a browser's load event can come before the line.
SERVED_LOG_PATIENCE_S = 2.0


def served_in_full(log: str, load: str, since: float, expected: dict[str, int],
                   patience: float = SERVED_LOG_PATIENCE_S) -> str:
    """Why ``load`` is not complete in the served log since ``since``, or ''.
    The log gets ``patience`` seconds to catch up with the browser's load
    event before an object counts as missing."""
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
            expected = website_http.objects_of(site, instance, args.seed, args.profile)
            start = end = time.time()
            try:
                loaded = browser.load(f"http://{host}:{port}/{name}/", timeout=args.timeout)
                start, end = loaded.start, loaded.end
                # the browser's account first: it says why (a failed
                # request's net error), the server's log only what is missing
                why = "; ".join(filter(None, (received_in_full(
                    loaded, {o: f"http://{host}:{port}{path}"
                             for o, path in website_http.object_paths(site, instance, args.seed,
                                                                      args.profile).items()},
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
            waves = load_waves(site, instance, args.seed, args.profile)
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
    ld.add_argument("--profile", choices=PROFILES, default="small", help="how sites are made (default small)")
    ld.add_argument("--browser", action="store_true",
                    help="load each as a web page in headless Chromium from website_http.py's server "
                         "(--server), which must log to --served-log")
    ld.add_argument("--served-log", help="--browser: the HTTP server's --log file")
    ld.add_argument("--timeout", type=float, default=30, help="--browser: seconds per load (default 30)")
    d = sub.add_parser("describe", help="print a site's waves of (response, request) bytes")
    d.add_argument("--site", type=int, required=True)
    d.add_argument("--instance", type=int, help="one load's objects instead of the base ones")
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--profile", choices=PROFILES, default="small")
    args = parser.parse_args()
    if args.cmd == "serve":
        pages.serve(args.listen)
        return 0
    if args.cmd == "describe":
        waves = site_waves(args.site, args.seed, args.profile) if args.instance is None else \
            load_waves(args.site, args.instance, args.seed, args.profile)
        print(json.dumps(waves))
        return 0
    if args.parallel < 1:
        parser.error("--parallel must be >= 1")
    if args.browser and not args.served_log:
        parser.error("--browser needs --served-log (the HTTP server's --log)")
    return load(args)


if __name__ == "__main__":
    sys.exit(main())

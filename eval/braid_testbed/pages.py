#!/usr/bin/env python3
"""Synthetic web pages, served and loaded the way a browser does, for tests
and benchmarks of what braid shows each network of a page load.

Standalone on purpose (no package imports): it runs inside namespaces and the
VM as ``python3 eval/braid_testbed/pages.py``.

A page is a set of objects with sizes drawn from the page's seed (a log-
uniform size between ``--min-object`` and ``--max-object``); each object is
fetched over its own TCP connection, all of a page's connections in
parallel, through a SOCKS5 proxy (braid-proxy's client) when ``--socks`` is
given. Each request carries a body (a form post, cookies) of a seeded size up
to ``--max-request``, so that a page has upstream bytes of its own. Between
pages the loader pauses ``--gap-ms``: a user reading the page, long enough
for braid's ``hywf`` to start a new split for the next one.

Protocol: the client sends ``GET <size> <body-len>\\n`` then the body; the
server answers with ``size`` bytes of a stream seeded by the size, then
reads the next request on the same connection until the client closes.
The loader checks every byte and prints one JSON line per page::

    {"page": 3, "start": 1700000000.1, "end": 1700000000.9, "seconds": 0.8,
     "objects": [[12345, 850], ...], "ok": true}

(objects are [response bytes, request bytes]) and exits 0 only if every
object of every page arrived intact.

Usage::

    pages.py serve --listen 10.10.0.2:8080 &
    pages.py load --server 10.10.0.2:8080 --socks 127.0.0.1:1080 --pages 40
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import math
import random
import socket
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TextIO

CHUNK = 64 * 1024
TIMEOUT_S = 60.0


def object_bytes(size: int) -> bytes:
    """The content of an object of ``size`` bytes: deterministic, incompressible."""
    out = bytearray()
    block = 0
    while len(out) < size:
        out += hashlib.sha256(f"{size}:{block}".encode()).digest() * 64
        block += 1
    return bytes(out[:size])


def page_objects(page: int, seed: int, count: int, min_object: int, max_object: int,
                 max_request: int) -> list[tuple[int, int]]:
    """(response size, request size) of every object of page ``page``.

    Sizes are log-uniform: a page mixes icons and scripts with a few large
    images, as real pages do.
    """
    rng = random.Random(f"{seed}:{page}")
    lo, hi = math.log(min_object), math.log(max_object)
    return [(int(math.exp(rng.uniform(lo, hi))), rng.randint(64, max_request))
            for _ in range(count)]


def parse_hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(CHUNK, n - len(buf)))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


# -- server ----------------------------------------------------------------

def handle(conn: socket.socket) -> None:
    """Answer requests in order until the client closes (one, or several
    over one connection as a browser's HTTP/2 connection carries a site)."""
    with conn:
        conn.settimeout(TIMEOUT_S)
        while True:
            line = bytearray()
            while not line.endswith(b"\n"):
                byte = conn.recv(1)
                if not byte or len(line) > 64:
                    return
                line += byte
            verb, size_text, body_text = line.decode().split()
            if verb != "GET":
                return
            recv_exact(conn, int(body_text))
            conn.sendall(object_bytes(int(size_text)))


def serve(listen: tuple[str, int]) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(listen)
    srv.listen(256)
    print(f"listening on {listen[0]}:{listen[1]}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


# -- loader ----------------------------------------------------------------

def socks5_connect(proxy: tuple[str, int], dest: tuple[str, int]) -> socket.socket:
    """A TCP connection to ``dest`` through a SOCKS5 proxy (no authentication)."""
    sock = socket.create_connection(proxy, timeout=TIMEOUT_S)
    sock.sendall(b"\x05\x01\x00")
    if recv_exact(sock, 2) != b"\x05\x00":
        raise ConnectionError("SOCKS5 proxy refused the no-authentication method")
    addr = ipaddress.IPv4Address(dest[0]).packed
    sock.sendall(b"\x05\x01\x00\x01" + addr + struct.pack("!H", dest[1]))
    reply = recv_exact(sock, 10)
    if reply[1] != 0:
        raise ConnectionError(f"SOCKS5 CONNECT failed with code {reply[1]}")
    return sock


def connect(server: tuple[str, int], socks: tuple[str, int] | None) -> socket.socket:
    sock = socks5_connect(socks, server) if socks else socket.create_connection(server, TIMEOUT_S)
    sock.settimeout(TIMEOUT_S)
    return sock


def request(size: int, body: int) -> bytes:
    return f"GET {size} {body}\n".encode() + bytes(body)


def fetch(server: tuple[str, int], socks: tuple[str, int] | None, size: int, body: int) -> bool:
    """One object over a connection of its own."""
    with connect(server, socks) as sock:
        sock.sendall(request(size, body))
        return recv_exact(sock, size) == object_bytes(size)


def fetch_pipelined(sock: socket.socket, objects: list[tuple[int, int]]) -> bool:
    """Several objects over one open connection: every request at once, then
    the answers in order (how an HTTP/2 connection carries a site's objects,
    without the interleaving)."""
    sock.sendall(b"".join(request(size, body) for size, body in objects))
    return all([recv_exact(sock, size) == object_bytes(size) for size, _ in objects])


def load(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    ok_all = True
    with ThreadPoolExecutor(max_workers=args.objects) as pool:
        for page in range(args.pages):
            if page:
                time.sleep(args.gap_ms / 1000)
            objects = page_objects(page, args.seed, args.objects, args.min_object,
                                   args.max_object, args.max_request)
            start = time.time()
            try:
                results = list(pool.map(lambda o: fetch(args.server, args.socks, *o), objects))
                ok = all(results)
            except (OSError, ConnectionError) as e:
                print(f"page {page}: {e}", file=err)
                ok = False
            end = time.time()
            ok_all &= ok
            print(json.dumps({"page": page, "start": start, "end": end,
                              "seconds": round(end - start, 4),
                              "objects": objects, "ok": ok}), file=out, flush=True)
            print(f"page {page + 1}/{args.pages}: {end - start:.2f} s", file=err, flush=True)
    return 0 if ok_all else 1


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command line; ``argv``, ``out`` and ``err`` let a test harness
    load pages from a thread of its own process (under braid's emulated VM
    a Python start costs seconds)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve objects until killed")
    s.add_argument("--listen", type=parse_hostport, required=True, help="HOST:PORT")
    ld = sub.add_parser("load", help="load pages, one JSON line per page")
    ld.add_argument("--server", type=parse_hostport, required=True, help="page server HOST:PORT")
    ld.add_argument("--socks", type=parse_hostport, help="SOCKS5 proxy HOST:PORT (default: direct)")
    ld.add_argument("--pages", type=int, default=40, help="page loads (default 40)")
    ld.add_argument("--objects", type=int, default=8, help="objects per page (default 8)")
    ld.add_argument("--min-object", type=int, default=2_000, help="smallest object, bytes")
    ld.add_argument("--max-object", type=int, default=150_000, help="largest object, bytes")
    ld.add_argument("--max-request", type=int, default=4_000, help="largest request body, bytes")
    ld.add_argument("--gap-ms", type=int, default=800, help="pause between pages (default 800)")
    ld.add_argument("--seed", type=int, default=1, help="page set seed")
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        serve(args.listen)
        return 0
    if args.pages < 1 or args.objects < 1 or not 0 < args.min_object <= args.max_object:
        parser.error("--pages and --objects must be >= 1, 0 < --min-object <= --max-object")
    return load(args, out, err)


if __name__ == "__main__":
    sys.exit(main())

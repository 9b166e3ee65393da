#!/usr/bin/env python3
"""Byte-exact MPTCP transfer with a goodput timeline.

Server: ``mptcp_xfer.py server --bind 10.99.0.1 --port 5201 --out r.json``
accepts one MPTCP connection, reads until EOF while counting bytes per
``--bin-ms``, then sends back the SHA-256 of what it received.

Client: ``mptcp_xfer.py client --dst 10.99.0.1 --port 5201 --bytes 8000000``
sends a deterministic stream (optionally paced with ``--rate``), checks
the server's digest and prints a JSON result; exit status 0 only if the
transfer was byte-exact.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import socket
import sys
import time

IPPROTO_MPTCP = 262
CHUNK = 64 * 1024


def _socket(family: int) -> socket.socket:
    return socket.socket(family, socket.SOCK_STREAM, IPPROTO_MPTCP)


def _family(addr: str) -> int:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def server(args: argparse.Namespace) -> int:
    """Receive one connection; write byte count, digest and timeline."""
    srv = _socket(_family(args.bind))
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.bind, args.port))
    srv.listen(8)
    srv.settimeout(args.timeout)
    conn, peer = srv.accept()
    conn.settimeout(args.timeout)
    digest = hashlib.sha256()
    total = 0
    bin_s = args.bin_ms / 1000.0
    start = time.monotonic()
    bins: list[int] = []
    while True:
        data = conn.recv(1 << 18)
        if not data:
            break
        digest.update(data)
        total += len(data)
        idx = int((time.monotonic() - start) / bin_s)
        while len(bins) <= idx:
            bins.append(0)
        bins[idx] += len(data)
    hexdigest = digest.hexdigest()
    conn.sendall(hexdigest.encode())
    conn.shutdown(socket.SHUT_WR)
    conn.close()
    result = {"bytes": total, "sha256": hexdigest, "start_mono": start,
              "bin_ms": args.bin_ms, "bins": bins, "peer": peer[0]}
    with open(args.out, "w") as f:
        json.dump(result, f)
    return 0


def client(args: argparse.Namespace) -> int:
    """Send ``--bytes`` bytes, verify the server's digest."""
    rng = random.Random(args.seed)
    block = bytearray(rng.randbytes(CHUNK))
    sock = _socket(_family(args.dst))
    if args.source:
        sock.bind((args.source, 0))
    sock.settimeout(args.timeout)
    sock.connect((args.dst, args.port))
    digest = hashlib.sha256()
    sent = 0
    start = time.monotonic()
    seq = 0
    while sent < args.bytes and not (args.seconds and time.monotonic() - start > args.seconds):
        block[0:8] = seq.to_bytes(8, "big")  # every chunk is distinct
        seq += 1
        piece = bytes(block[: min(CHUNK, args.bytes - sent)])
        sock.sendall(piece)
        digest.update(piece)
        sent += len(piece)
        if args.rate:
            ahead = sent / args.rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    if args.hold_file:
        # Keep the connection (and its subflows) open, idle, until the
        # caller has looked at it: a fast path can finish the data in less
        # time than a slow machine needs to inspect the connection.
        deadline = time.monotonic() + args.timeout
        while not os.path.exists(args.hold_file):
            if time.monotonic() > deadline:
                print(f"{args.hold_file} did not appear within {args.timeout}s", file=sys.stderr)
                return 1
            time.sleep(0.05)
    sock.shutdown(socket.SHUT_WR)
    reply = b""
    while True:
        data = sock.recv(128)
        if not data:
            break
        reply += data
    sock.close()
    elapsed = time.monotonic() - start
    ok = reply.decode() == digest.hexdigest()
    print(json.dumps({"bytes": sent, "sha256": digest.hexdigest(), "ok": ok,
                      "seconds": round(elapsed, 3)}))
    return 0 if ok else 1


def main() -> int:
    """Command line entry point."""
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, default=5201)
    s.add_argument("--out", required=True)
    s.add_argument("--bin-ms", type=int, default=50)
    s.add_argument("--timeout", type=float, default=60)
    c = sub.add_parser("client")
    c.add_argument("--dst", required=True)
    c.add_argument("--port", type=int, default=5201)
    c.add_argument("--source")
    c.add_argument("--bytes", type=int, default=8_000_000)
    c.add_argument("--rate", type=float, default=0, help="bytes/s, 0 = unpaced")
    c.add_argument("--seconds", type=float, default=0, help="stop sending after this long")
    c.add_argument("--hold-file", help="after sending, keep the connection open until this file exists")
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--timeout", type=float, default=60)
    args = p.parse_args()
    return server(args) if args.cmd == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())

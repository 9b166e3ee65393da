#!/usr/bin/env python3
"""A server that tells each client which address it came from (standalone:
runs inside a namespace as ``python3 peer_echo.py``).

UDP: each datagram is answered with ``<peer ip> <the datagram>``.
TCP: each connection's bytes are read to EOF, then answered with
``<peer ip> <sha256 hex> <byte count>``. The client checks both the bytes
(digest) and the NAT (the peer address the server saw).

    peer_echo.py serve --port 7000
    peer_echo.py udp --host 10.10.0.2 --port 7000             # prints the reply
    peer_echo.py tcp --host 10.10.0.2 --port 7000 --bytes 20000000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import sys
import threading
import time

CHUNK = 64 * 1024


def _tcp_conn(conn: socket.socket, peer: str) -> None:
    digest, n = hashlib.sha256(), 0
    with conn:
        while data := conn.recv(CHUNK):
            digest.update(data)
            n += len(data)
        conn.sendall(f"{peer} {digest.hexdigest()} {n}".encode())


def serve(port: int) -> int:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("0.0.0.0", port))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("0.0.0.0", port))
    tcp.listen(16)

    def udp_loop() -> None:
        while True:
            data, (host, p) = udp.recvfrom(2048)
            udp.sendto(host.encode() + b" " + data, (host, p))

    threading.Thread(target=udp_loop, daemon=True).start()
    while True:
        conn, (host, _) = tcp.accept()
        threading.Thread(target=_tcp_conn, args=(conn, host), daemon=True).start()


def udp_query(host: str, port: int, tries: int) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    token = os.urandom(8).hex().encode()
    for _ in range(tries):
        s.sendto(token, (host, port))
        try:
            reply, _ = s.recvfrom(2048)
        except TimeoutError:
            continue
        peer, _, echoed = reply.partition(b" ")
        print(json.dumps({"peer": peer.decode(), "ok": echoed == token}))
        return 0 if echoed == token else 1
    print(f"peer_echo: no UDP answer from {host}:{port} after {tries} tries", file=sys.stderr)
    return 1


def tcp_send(host: str, port: int, nbytes: int) -> int:
    s = socket.create_connection((host, port), timeout=30)
    digest, left = hashlib.sha256(), nbytes
    block = os.urandom(CHUNK)
    start = time.monotonic()
    while left:
        data = block[: min(left, CHUNK)]
        s.sendall(data)
        digest.update(data)
        left -= len(data)
    s.shutdown(socket.SHUT_WR)
    reply = b""
    while data := s.recv(4096):
        reply += data
    secs = time.monotonic() - start
    peer, hexdigest, count = reply.decode().split()
    ok = hexdigest == digest.hexdigest() and int(count) == nbytes
    print(json.dumps({"peer": peer, "ok": ok, "bytes": nbytes, "goodput_mbit": round(nbytes * 8 / secs / 1e6, 1)}))
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    for name in ("udp", "tcp"):
        c = sub.add_parser(name)
        c.add_argument("--host", required=True)
        c.add_argument("--port", type=int, required=True)
        c.add_argument("--bytes", type=int, default=1_000_000)
        c.add_argument("--tries", type=int, default=5)
    a = p.parse_args()
    if a.cmd == "serve":
        return serve(a.port)
    if a.cmd == "udp":
        return udp_query(a.host, a.port, a.tries)
    return tcp_send(a.host, a.port, a.bytes)


if __name__ == "__main__":
    sys.exit(main())

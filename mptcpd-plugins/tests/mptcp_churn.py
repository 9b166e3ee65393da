#!/usr/bin/env python3
"""Open and close many short MPTCP connections (bounded in count and time).

Server: ``mptcp_churn.py server --bind 10.99.0.1 --port 5301 --count 5000``
accepts ``--count`` connections, answers each with one byte and closes it.
Client: ``mptcp_churn.py client --dst 10.99.0.1 --port 5301 --count 5000``
connects ``--count`` times, reads the byte, closes; prints a JSON line
with the number of connections that completed.  Both give up after
``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

IPPROTO_MPTCP = 262


def server(args: argparse.Namespace) -> int:
    """Accept ``count`` connections; one byte each."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.bind, args.port))
    srv.listen(128)
    deadline = time.monotonic() + args.timeout
    done = 0
    while done < args.count and time.monotonic() < deadline:
        srv.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            break
        try:
            conn.sendall(b"x")
            conn.recv(1)  # wait for the client's close (a reset: SO_LINGER 0)
        except OSError:
            pass
        conn.close()
        done += 1
    print(json.dumps({"accepted": done}))
    return 0 if done == args.count else 1


def client(args: argparse.Namespace) -> int:
    """Connect ``count`` times; each connection reads one byte."""
    deadline = time.monotonic() + args.timeout
    done = 0
    while done < args.count and time.monotonic() < deadline:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
        s.settimeout(5)
        # RST on close: no TIME_WAIT pile-up on the client's ports.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.connect((args.dst, args.port))
        if s.recv(1) != b"x":
            break
        time.sleep(args.hold)
        s.close()
        done += 1
    print(json.dumps({"connections": done}))
    return 0 if done == args.count else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--bind", required=True)
    c = sub.add_parser("client")
    c.add_argument("--dst", required=True)
    for q in (s, c):
        q.add_argument("--port", type=int, required=True)
        q.add_argument("--count", type=int, required=True)
        q.add_argument("--timeout", type=float, default=60)
    c.add_argument("--hold", type=float, default=0, help="seconds to keep each connection open")
    args = p.parse_args()
    return server(args) if args.mode == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())

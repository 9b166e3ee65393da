"""How long an MPTCP connection that sends nothing takes to join a second
subflow: the two ends of the check, run inside testbed namespaces.

``listen PORT`` accepts connections and holds them open, reading nothing
and sending nothing. ``connect HOST PORT`` opens one MPTCP connection,
sends nothing, and polls MPTCP_INFO until a join has started (its
``mptcpi_subflows`` counts a subflow from its SYN) or ``--within`` seconds
have passed; it prints JSON, ``{"joined_after_ms": ...}`` (null when none
joined).

An MPTCP client may join only once an ACK with a DSS option from the
server has told it that its third ACK arrived (RFC 8684 section 3.1); the
check shows whether the server's kernel sends one to a client that is
silent (braid's kernel does under braid's schedulers, at accept time,
when a join would be accepted; under `default` it keeps upstream's
handshake).
"""

from __future__ import annotations

import argparse
import json
import socket
import time

SOL_MPTCP = 284
MPTCP_INFO = 1
POLL_S = 0.005


def joined_subflows(sock: socket.socket) -> int:
    """mptcpi_subflows: the subflows beyond the first (its first byte)."""
    info = sock.getsockopt(SOL_MPTCP, MPTCP_INFO, 64)
    return info[0]


def listen(port: int) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen()
    held = []
    while True:
        conn, _ = server.accept()
        held.append(conn)


def connect(host: str, port: int, within_s: float) -> dict[str, float | None]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
    sock.connect((host, port))
    start = time.monotonic()
    deadline = start + within_s
    while time.monotonic() < deadline:
        if joined_subflows(sock) >= 1:
            return {"joined_after_ms": round((time.monotonic() - start) * 1000, 1)}
        time.sleep(POLL_S)
    return {"joined_after_ms": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    lp = sub.add_parser("listen", help="accept and hold MPTCP connections")
    lp.add_argument("port", type=int)
    cp = sub.add_parser("connect", help="one silent connection; print when it joined")
    cp.add_argument("host")
    cp.add_argument("port", type=int)
    cp.add_argument("--within", type=float, default=3.0, help="seconds to wait (default 3)")
    args = parser.parse_args()
    if args.role == "listen":
        listen(args.port)
    else:
        print(json.dumps(connect(args.host, args.port, args.within)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Poisson messages over one MPTCP (or TCP) connection, each one's delay
measured from its arrival at the sender to its last byte at the receiver.

The load of the thesis's latency model (ch. 5): messages arrive at the
sender as a Poisson process of rate ``--rate`` per second with exponentially
distributed sizes (mean ``--size``), so each path served in order is an
M/M/1 queue in message units. A message's delay counts from its *scheduled*
arrival, not from when the sender got to write it: time spent waiting for
room in the socket's send buffer is queueing, and it is counted.

Standalone (no package imports) like bulk.py: it runs in namespaces and in
the VM as ``python3 eval/braid_testbed/messages.py``. Sender and receiver
must share a clock (namespaces of one machine do).

Protocol: the sender streams frames ``seq u32 | len u32 | arrival ns u64 |
len bytes`` and half-closes; the receiver answers with one JSON line, the
delay of every message in microseconds in sequence order. The sender prints
one JSON line::

    {"messages": 3000, "offered_mbit": 20.1, "mean_ms": 4.2, "p50_ms": 3.1,
     "p99_ms": 19.8, "delays_us": [...]}

Usage::

    messages.py serve --port 5202 &
    messages.py send --host 10.9.0.2 --port 5202 --rate 600 --size 4096 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import struct
import sys
import threading
import time
from typing import TextIO

IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)
FRAME = struct.Struct("!IIQ")
# Exponential sizes are clipped: a frame header needs a payload to follow,
# and one huge message would dominate a short run.
MIN_SIZE = 64
MAX_SIZE_FACTOR = 10
IDLE_TIMEOUT_S = 60.0
WARMUP_PAUSE_S = 1.0


def make_socket(mptcp: bool) -> socket.socket:
    proto = IPPROTO_MPTCP if mptcp else socket.IPPROTO_TCP
    return socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)


def receive_delays(conn: socket.socket) -> list[int]:
    """Read frames until EOF; each message's delay in microseconds."""
    delays: list[int] = []
    buf = bytearray()
    need, arrival = FRAME.size, -1
    while True:
        chunk = conn.recv(256 * 1024)
        now = time.time_ns()
        if not chunk:
            if buf or arrival >= 0:
                raise ConnectionError("sender closed inside a message")
            return delays
        buf += chunk
        while len(buf) >= need:
            if arrival < 0:
                seq, size, arrival = FRAME.unpack_from(buf)
                if seq != len(delays):
                    raise ConnectionError(f"message {seq} arrived as number {len(delays)}")
                del buf[:FRAME.size]
                need = size
            else:
                del buf[:need]
                delays.append((now - arrival) // 1000)
                need, arrival = FRAME.size, -1


def handle(conn: socket.socket) -> None:
    with conn:
        conn.settimeout(IDLE_TIMEOUT_S)
        try:
            delays = receive_delays(conn)
        except (OSError, ConnectionError) as err:
            conn.sendall(json.dumps({"error": str(err)}).encode() + b"\n")
            return
        conn.sendall(json.dumps({"delays_us": delays}).encode() + b"\n")


def serve(args: argparse.Namespace) -> int:
    srv = make_socket(args.mptcp)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.bind, args.port))
    srv.listen(16)
    print(f"listening on {args.bind}:{args.port}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def schedule(rate: float, mean_size: int, seconds: float, seed: int) -> list[tuple[float, int]]:
    """(offset in seconds, size) of each message: Poisson arrivals,
    exponential sizes clipped to [MIN_SIZE, MAX_SIZE_FACTOR * mean]."""
    rng = random.Random(seed)
    out, t = [], rng.expovariate(rate)
    while t < seconds:
        size = int(rng.expovariate(1 / mean_size))
        out.append((t, min(max(size, MIN_SIZE), MAX_SIZE_FACTOR * mean_size)))
        t += rng.expovariate(rate)
    return out


def send_messages(sock: socket.socket, plan: list[tuple[float, int]], first_seq: int) -> None:
    """Write each message at its arrival time, numbered from ``first_seq``;
    messages already due when the sender gets to them (it was blocked) go
    out together, stamped with their own arrival times."""
    payload = bytes(max((s for _, s in plan), default=0))
    start_ns, start = time.time_ns(), time.monotonic()
    i = 0
    while i < len(plan):
        wait = plan[i][0] - (time.monotonic() - start)
        if wait > 0:
            time.sleep(wait)
        due = time.monotonic() - start
        frames = []
        while i < len(plan) and plan[i][0] <= due:
            offset, size = plan[i]
            frames.append(FRAME.pack(first_seq + i, size, start_ns + int(offset * 1e9)))
            frames.append(payload[:size])
            i += 1
        sock.sendall(b"".join(frames))
    sock.shutdown(socket.SHUT_WR)


def percentile(sorted_values: list[int], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))] / 1000


def send(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    plan = schedule(args.rate, args.size, args.seconds, args.seed)
    if not plan:
        print("messages: the schedule is empty (raise --rate or --seconds)", file=err)
        return 2
    sock = make_socket(args.mptcp)
    sock.settimeout(IDLE_TIMEOUT_S + args.seconds)
    sock.connect((args.host, args.port))
    plan_offset = 0
    if args.warmup_bytes:
        # An unmeasured message number 0, then a pause: the other subflows
        # join about a round trip after the peer's first data.
        sock.sendall(FRAME.pack(0, args.warmup_bytes, time.time_ns()) + bytes(args.warmup_bytes))
        time.sleep(WARMUP_PAUSE_S)
        plan_offset = 1
    send_messages(sock, plan, plan_offset)
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        reply += chunk
    sock.close()
    answer = json.loads(reply or b"{}")
    if "delays_us" not in answer:
        print(f"messages: the receiver failed: {answer.get('error', 'no answer')}", file=err)
        return 1
    delays = answer["delays_us"][plan_offset:]
    if len(delays) != len(plan):
        print(f"messages: {len(delays)} of {len(plan)} messages arrived", file=err)
        return 1
    ordered = sorted(delays)
    total = sum(s for _, s in plan)
    print(json.dumps({
        "messages": len(plan),
        "rate": args.rate,
        "mean_size": args.size,
        "offered_mbit": round(total * 8 / args.seconds / 1e6, 3),
        "mean_ms": round(sum(delays) / len(delays) / 1000, 3),
        "p50_ms": percentile(ordered, 0.5),
        "p90_ms": percentile(ordered, 0.9),
        "p99_ms": percentile(ordered, 0.99),
        "delays_us": delays,
    }), file=out, flush=True)
    return 0


def positive(kind: type[float] | type[int]):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command line; ``argv``, ``out`` and ``err`` let a test harness
    send from a thread of its own process (under braid's emulated VM a
    Python start costs seconds)."""
    parser = argparse.ArgumentParser(description="Poisson messages with per-message delays.")
    parser.add_argument("--tcp", dest="mptcp", action="store_false",
                        help="use plain TCP instead of MPTCP")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="receive messages and report their delays")
    s.add_argument("--bind", default="0.0.0.0")
    s.add_argument("--port", type=int, required=True)
    c = sub.add_parser("send", help="send Poisson messages and print their delays as JSON")
    c.add_argument("--host", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--rate", type=positive(float), required=True, help="messages per second")
    c.add_argument("--size", type=positive(int), default=4096, help="mean message size, bytes")
    c.add_argument("--seconds", type=positive(float), default=10.0, help="length of the run")
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--warmup-bytes", type=int, default=64 * 1024,
                   help="unmeasured first message, so the other subflows have joined (0: none)")
    args = parser.parse_args(argv)
    try:
        return serve(args) if args.cmd == "serve" else send(args, out, err)
    except (OSError, ConnectionError) as e:
        print(f"messages: {args.cmd} failed: {e}", file=err)
        return 2


if __name__ == "__main__":
    sys.exit(main())

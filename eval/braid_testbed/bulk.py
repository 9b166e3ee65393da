#!/usr/bin/env python3
"""Checksummed bulk transfers over MPTCP (or TCP) for tests and benchmarks.

Standalone on purpose (no package imports): it runs inside namespaces and the
VM as ``python3 eval/braid_testbed/bulk.py``.

Protocol: the client sends a header ``BRD1 | mode | nbytes | seed``. In
``upload`` mode it then streams ``nbytes`` of a seeded pseudo-random stream and
half-closes; the server answers, once it has seen that half-close, with the
SHA-256 of what it received and the receive duration. In ``download`` mode the
server streams the same kind of data and the client checks the digest itself.
An MPTCP client's result names its subflows' ids (``subflow_ids``), read
before it half-closes or closes, while the connection is whole. The client
prints one JSON line::

    {"mode": "upload", "bytes": 10485760, "seconds": 4.2, "goodput_mbit": 19.9,
     "digest_ok": true}

and exits 0 only if every byte arrived intact.

``phased`` mode uploads ``--phases`` chunks of ``nbytes``, waiting for the
server to confirm each and pausing ``--pause-ms`` between them (a connection
that goes idle and resumes, as a browser's does between page loads);
``phased-download`` asks the server for each chunk in turn instead.
``paced`` uploads one chunk of ``nbytes`` per rate in ``--rates`` (Mbit/s,
0 for as fast as the connection takes it, made before it is written), back
to back, each at its rate (an application whose load changes: the adaptive
scheduler's input); a
paced chunk after another starts once the connection has delivered what
came before (see ``drained``). An
upload (plain or paced) can stop early after ``--seconds`` (the digest then
covers what was sent) and can keep its connection open, idle, after the data
until ``--hold-file`` exists (a test that inspects the connection's subflows
before it closes). ``rr``
mode sends ``--requests`` request/response exchanges of ``nbytes`` each way
and reports latency percentiles. ``--count`` runs that many connections one
after another; every result line carries wall-clock ``start``/``end`` times
(and per-phase windows) so that captures can be split per connection.

Usage::

    bulk.py serve --port 5201 &
    bulk.py send --host 10.9.0.2 --port 5201 --bytes 10M --mode upload
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import errno
import fcntl
import functools
import hashlib
import json
import os
import random
import socket
import struct
import sys
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from hashlib import _Hash

IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)
HEADER = struct.Struct("!4sBQQ")
REPLY = struct.Struct("!32sQd")
MAGIC = b"BRD1"
MODE_UPLOAD, MODE_DOWNLOAD, MODE_PHASED, MODE_RR, MODE_PHASED_DOWN = 1, 2, 3, 4, 5
MODES = {"upload": MODE_UPLOAD, "download": MODE_DOWNLOAD, "phased": MODE_PHASED, "rr": MODE_RR,
         "phased-download": MODE_PHASED_DOWN, "paced": MODE_UPLOAD}
PACED_WRITE = 4096
# drained(): how often it looks, and how long at most it waits.
DRAIN_POLL_S = 0.005
DRAIN_LIMIT_S = 30.0
CHUNK = 64 * 1024
# stream(): the random block its chunks are sliced from, and that block's seed.
STREAM_BLOCK = 1 << 20
STREAM_BLOCK_SEED = 0x62726964
IDLE_TIMEOUT_S = 60.0
# serve --progress: how often an upload's byte count is written.
PROGRESS_S = 0.25


def parse_size(text: str) -> int:
    """'10M' -> 10485760; plain integers are bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    try:
        if text and text[-1] in units:
            value = int(float(text[:-1]) * units[text[-1]])
        else:
            value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 512K, 10M, 1G)")
    if value <= 0:
        raise argparse.ArgumentTypeError("size must be positive")
    return value


@functools.cache
def _random_block() -> bytes:
    """STREAM_BLOCK + CHUNK random bytes, the same in every process."""
    return random.Random(STREAM_BLOCK_SEED).randbytes(STREAM_BLOCK + CHUNK)


def stream(seed: int, nbytes: int):  # type: ignore[no-untyped-def]
    """The deterministic data both ends agree on, in chunks of CHUNK: each
    a slice of one random block at an offset drawn from ``seed``, its first
    8 bytes the chunk's index, so that no two chunks of a stream are equal.

    Fresh random bytes per chunk cost more CPU than braid's emulated VM has
    for a transfer over two 40 Mbit/s paths (the sender, not the network,
    then set the rate); a slice costs a copy."""
    rng = random.Random(seed)
    block = _random_block()
    left, index = nbytes, 0
    while left:
        n = min(CHUNK, left)
        off = rng.randrange(STREAM_BLOCK)
        chunk = bytearray(block[off:off + n])
        stamp = index.to_bytes(8, "big")
        chunk[:min(8, n)] = stamp[:min(8, n)]
        yield bytes(chunk)
        left -= n
        index += 1


def make_socket(mptcp: bool, address: str = "") -> socket.socket:
    """A stream socket for ``address``'s family (IPv6 if it has a colon)."""
    proto = IPPROTO_MPTCP if mptcp else socket.IPPROTO_TCP
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return socket.socket(family, socket.SOCK_STREAM, proto)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def receive_stream(sock: socket.socket, nbytes: int,
                   progress: Callable[[int], None] | None = None) -> tuple[bytes, int, float]:
    """Read until EOF or nbytes; return (sha256, bytes, first-to-last seconds).
    ``progress`` gets the byte count every PROGRESS_S and at the end."""
    digest = hashlib.sha256()
    got = 0
    first = last = reported = 0.0
    while got < nbytes:
        chunk = sock.recv(min(CHUNK * 4, nbytes - got))
        if not chunk:
            break
        now = time.monotonic()
        if not got:
            first = now
        last = now
        got += len(chunk)
        digest.update(chunk)
        if progress and now - reported >= PROGRESS_S:
            progress(got)
            reported = now
    if progress:
        progress(got)
    return digest.digest(), got, last - first


@dataclass
class Upload:
    """How an upload ends: ``deadline`` (monotonic, 0: none) stops the data
    early; ``hold`` makes the sender wait, connection open and idle, until
    that file exists (at most ``hold_s``) before it half-closes;
    ``before_half_close`` is called with the socket just before that."""

    deadline: float = 0.0
    hold: Path | None = None
    hold_s: float = IDLE_TIMEOUT_S
    before_half_close: Callable[[socket.socket], None] | None = None

    def over(self) -> bool:
        return bool(self.deadline) and time.monotonic() >= self.deadline

    def finish(self, sock: socket.socket) -> None:
        if self.hold is not None:
            limit = time.monotonic() + self.hold_s
            while not self.hold.exists():
                if time.monotonic() > limit:
                    raise TimeoutError(f"{self.hold} did not appear within {self.hold_s:.0f} s")
                time.sleep(0.05)
        if self.before_half_close:
            self.before_half_close(sock)
        sock.shutdown(socket.SHUT_WR)


def send_stream(sock: socket.socket, seed: int, nbytes: int,
                upload: Upload | None = None) -> tuple[bytes, int]:
    """Send the seeded stream, then half-close; (digest, bytes sent)."""
    upload = upload or Upload()
    digest = hashlib.sha256()
    sent = 0
    for chunk in stream(seed, nbytes):
        if upload.over():
            break
        digest.update(chunk)
        sock.sendall(chunk)
        sent += len(chunk)
    upload.finish(sock)
    return digest.digest(), sent


def unacknowledged(sock: socket.socket) -> int:
    """Bytes written to ``sock`` that its peer has not acknowledged yet
    (SIOCOUTQ; MPTCP answers it for the whole connection)."""
    queued: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    return queued


def drained(sock: socket.socket, limit_s: float = DRAIN_LIMIT_S) -> bool:
    """Wait until the peer has acknowledged everything written to ``sock``;
    False if that took more than ``limit_s``.

    A paced chunk that starts while an unpaced one still fills the send
    buffer is not paced: its first write waits for room, and the schedule,
    fallen behind by that wait, then writes what it owes at once, offering
    more than the chunk's rate for as long as the previous chunk took to
    leave. Starting the schedule once the buffer has drained makes the
    offered load the chunk's rate from its first write."""
    end = time.monotonic() + limit_s
    while unacknowledged(sock):
        if time.monotonic() > end:
            return False
        time.sleep(DRAIN_POLL_S)
    return True


def send_unpaced(sock: socket.socket, data: bytes, upload: Upload, digest: _Hash) -> int:
    """Write ``data`` as fast as the connection takes it, in CHUNK writes,
    until done or ``upload`` is over; hash what was written; bytes written.

    The data is made before and hashed after: made and hashed 4 KiB at a
    time as it was written, in a slow emulated guest the sender, not the
    paths, could set the rate, and a chunk meant to fill the send buffer
    never did."""
    view, done = memoryview(data), 0
    while done < len(data) and not upload.over():
        piece = view[done:done + CHUNK]
        sock.sendall(piece)
        done += len(piece)
    digest.update(view[:done])
    return done


def send_paced(sock: socket.socket, seed: int, nbytes: int, rates: list[float],
               upload: Upload | None = None) -> tuple[bytes, int, list[list[float]]]:
    """One chunk of ``nbytes`` per rate (Mbit/s, 0: unpaced) from the
    seeded stream, in PACED_WRITE writes on schedule, a paced chunk after
    another once the connection has ``drained``; half-closes. Returns the
    digest, the bytes sent and each chunk's wall-clock window.

    The stream is generated as it is sent: generating a long paced run
    first kept the connection silent for seconds after it opened (7 s for
    60 MB under braid's emulated VM), while a test already took its
    subflows for a transfer under way."""
    digest = hashlib.sha256()
    source = stream(seed, nbytes * len(rates))
    block, pos = memoryview(b""), 0

    def take(n: int) -> bytes:
        """The stream's next ``n`` bytes."""
        nonlocal block, pos
        parts = []
        while n:
            if pos == len(block):
                block, pos = memoryview(next(source)), 0
            k = min(n, len(block) - pos)
            parts.append(block[pos:pos + k])
            pos += k
            n -= k
        return b"".join(parts)

    upload = upload or Upload()
    windows = []
    sent = 0
    for rate in rates:
        if rate and sent:
            drained(sock)
        if not rate:
            t0, done = time.time(), send_unpaced(sock, take(nbytes), upload, digest)
            windows.append([t0, time.time()])
            sent += done
            if upload.over():
                break
            continue
        t0, m0 = time.time(), time.monotonic()
        for off in range(0, nbytes, PACED_WRITE):
            delay = m0 + off * 8 / (rate * 1e6) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if upload.over():
                break
            piece = take(min(PACED_WRITE, nbytes - off))
            digest.update(piece)
            sock.sendall(piece)
            sent += len(piece)
        windows.append([t0, time.time()])
        if upload.over():
            break
    upload.finish(sock)
    return digest.digest(), sent, windows


def parse_rates(text: str) -> list[float]:
    """'0,2' -> [0.0, 2.0]: Mbit/s per chunk, 0 for unpaced."""
    try:
        rates = [float(r) for r in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of rates in Mbit/s: {text!r} (e.g. 0,2)")
    if not rates or any(r < 0 for r in rates):
        raise argparse.ArgumentTypeError("rates must be >= 0 (0: as fast as possible)")
    return rates


def progress_writer(path: Path | None, conn: socket.socket) -> Callable[[int], None] | None:
    """Lines of 'unix-time peer-port bytes' appended to ``path``: an
    upload's arrival timeline, for goodput over time (experiments.timevarying)."""
    if path is None:
        return None
    peer = conn.getpeername()[1]

    def report(got: int) -> None:
        with open(path, "a") as out:
            out.write(f"{time.time():.3f} {peer} {got}\n")

    return report


def handle(conn: socket.socket, progress: Path | None = None,
           timeout: float = IDLE_TIMEOUT_S) -> None:
    with conn:
        conn.settimeout(timeout)
        magic, mode, nbytes, seed = HEADER.unpack(recv_exact(conn, HEADER.size))
        if magic != MAGIC:
            return
        if mode == MODE_UPLOAD:
            try:
                digest, got, secs = receive_stream(conn, nbytes, progress_writer(progress, conn))
                # The reply waits for the sender's half-close, so that the
                # sender's last look at its connection (its subflows' ids)
                # comes before this end can close it; a sender that holds
                # its connection open longer than the timeout is answered
                # when the timeout ends.
                try:
                    if got == nbytes and conn.recv(1):
                        return  # more than announced: no reply, the sender fails
                except TimeoutError:
                    pass
                conn.sendall(REPLY.pack(digest, got, secs))
            except ConnectionError:
                return  # a sender stopped mid-upload (experiments.timevarying stops its own): its side reports
        elif mode == MODE_DOWNLOAD:
            send_stream(conn, seed, nbytes)
            try:
                conn.recv(1)  # wait for the client's close so nothing is cut short
            except ConnectionResetError:
                return  # a client that disconnects to reuse its socket resets
        elif mode == MODE_PHASED:
            combined = hashlib.sha256()
            total = 0
            while True:
                phase_digest, got, _ = receive_stream(conn, nbytes)
                if not got:
                    break
                combined.update(phase_digest)
                total += got
                conn.sendall(b"k")
            conn.sendall(REPLY.pack(combined.digest(), total, 0.0))
        elif mode == MODE_PHASED_DOWN:
            phase = 0
            while conn.recv(1) == b"n":
                for chunk in stream(seed + phase, nbytes):
                    conn.sendall(chunk)
                phase += 1
        elif mode == MODE_RR:
            while True:
                try:
                    request = recv_exact(conn, nbytes)
                except ConnectionError:
                    break
                conn.sendall(request)


def listen(args: argparse.Namespace, out: TextIO) -> socket.socket:
    srv = make_socket(args.mptcp, args.bind)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.bind, args.port))
    srv.listen(128)
    print(f"listening on {args.bind}:{args.port}", file=out, flush=True)
    return srv


def serve(args: argparse.Namespace, out: TextIO) -> int:
    srv = listen(args, out)
    relisten = threading.Event()
    if args.relisten_on_input:
        # A listening socket takes the MPTCP scheduler in force when it is
        # created, and so do the connections it accepts: a harness that
        # changes the scheduler asks for a fresh listener rather than a
        # new server process (seconds of the emulated CPU in braid's VM).
        def read_requests() -> None:
            for line in sys.stdin:
                if line.strip() == "relisten":
                    relisten.set()

        threading.Thread(target=read_requests, daemon=True).start()
        srv.settimeout(0.1)
    served = 0
    while args.count == 0 or served < args.count:
        if relisten.is_set():
            relisten.clear()
            srv.close()  # first: two listeners cannot share the port
            srv = listen(args, out)
            srv.settimeout(0.1)
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        served += 1
        t = threading.Thread(target=handle, args=(conn, args.progress, args.timeout), daemon=True)
        t.start()
        if args.count and served >= args.count:
            t.join()
    return 0


def client_socket(args: argparse.Namespace) -> socket.socket:
    sock = make_socket(args.mptcp, args.host)
    sock.settimeout(args.timeout)
    if args.source:
        sock.bind((args.source, 0))
    return sock


class SockaddrUnspec(ctypes.Structure):
    _fields_ = [("sa_family", ctypes.c_ushort), ("sa_data", ctypes.c_char * 14)]


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library, for the socket calls Python cannot make; looked up and
    loaded once for every call."""
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def disconnect(sock: socket.socket) -> None:
    """connect(AF_UNSPEC), which Python's connect() cannot pass: the socket
    is reset and may connect again (MPTCP supports it as TCP does)."""
    addr = SockaddrUnspec(socket.AF_UNSPEC, b"")
    if libc().connect(sock.fileno(), ctypes.byref(addr), ctypes.sizeof(addr)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"connect(AF_UNSPEC): {os.strerror(err)}")


SOL_MPTCP = 284
MPTCP_FULL_INFO = 4
MAX_SUBFLOWS_READ = 8


class MptcpFullInfoHead(ctypes.Structure):
    """struct mptcp_full_info up to its mptcp_info (linux/mptcp.h): the
    sizes and the two arrays the kernel fills, one entry per subflow."""
    _fields_ = [("size_tcpinfo_kernel", ctypes.c_uint32), ("size_tcpinfo_user", ctypes.c_uint32),
                ("size_sfinfo_kernel", ctypes.c_uint32), ("size_sfinfo_user", ctypes.c_uint32),
                ("num_subflows", ctypes.c_uint32), ("size_arrays_user", ctypes.c_uint32),
                ("subflow_info", ctypes.c_uint64), ("tcp_info", ctypes.c_uint64)]


def subflow_ids(sock: socket.socket) -> list[int] | None:
    """The kernel's subflow_id of each subflow of an MPTCP socket
    (MPTCP_FULL_INFO, whose user pointers Python's getsockopt() cannot
    pass): unique within the connection, never 0. None for a connection
    that fell back to TCP (a peer or middlebox without MPTCP), which the
    kernel answers with EOPNOTSUPP."""
    ids = (ctypes.c_uint32 * MAX_SUBFLOWS_READ)()
    head = MptcpFullInfoHead(size_sfinfo_user=ctypes.sizeof(ctypes.c_uint32),
                             size_arrays_user=MAX_SUBFLOWS_READ,
                             subflow_info=ctypes.addressof(ids))
    size = ctypes.c_uint32(ctypes.sizeof(head))
    if libc().getsockopt(sock.fileno(), SOL_MPTCP, MPTCP_FULL_INFO, ctypes.byref(head), ctypes.byref(size)) != 0:
        err = ctypes.get_errno()
        if err == errno.EOPNOTSUPP:
            return None
        raise OSError(err, f"getsockopt(MPTCP_FULL_INFO): {os.strerror(err)}")
    return list(ids[:min(head.num_subflows, MAX_SUBFLOWS_READ)])


def transfer(args: argparse.Namespace, seed: int,
             reused: socket.socket | None = None) -> dict[str, object]:
    """One connection in the requested mode; returns its JSON-able result.
    On a ``reused`` socket it disconnects at the end instead of closing."""
    sock = reused or client_socket(args)
    seen_ids: list[list[int] | None] = []

    def note_subflow_ids(s: socket.socket) -> None:
        """The subflows' ids, taken once, before this end half-closes or
        closes: the peer closes once it has seen that, and a kernel that
        then closes the first subflow resets its id to 0 (upstream does)."""
        if args.mptcp and not seen_ids:
            seen_ids.append(subflow_ids(s))

    start_wall = time.time()
    sock.connect((args.host, args.port))
    mode = MODES[args.mode]
    total = args.bytes * len(args.rates) if args.mode == "paced" else args.bytes
    sock.sendall(HEADER.pack(MAGIC, mode, total, seed))
    result: dict[str, object] = {"mode": args.mode, "seed": seed, "start": start_wall}
    start = time.monotonic()
    upload = Upload(deadline=start + args.seconds if args.seconds else 0.0,
                    hold=args.hold_file, hold_s=args.timeout, before_half_close=note_subflow_ids)
    if args.mode == "paced":
        sent_digest, sent, windows = send_paced(sock, seed, args.bytes, args.rates, upload)
        digest, got, _ = REPLY.unpack(recv_exact(sock, REPLY.size))
        secs = time.monotonic() - start
        ok = digest == sent_digest and got == sent
        result["phases"] = windows
        result["sent"] = sent
    elif mode == MODE_UPLOAD:
        sent_digest, sent = send_stream(sock, seed, args.bytes, upload)
        digest, got, secs = REPLY.unpack(recv_exact(sock, REPLY.size))
        secs = secs or time.monotonic() - start
        ok = digest == sent_digest and got == sent
        result["sent"] = sent
    elif mode == MODE_DOWNLOAD:
        digest, got, secs = receive_stream(sock, args.bytes)
        expected = hashlib.sha256()
        for chunk in stream(seed, args.bytes):
            expected.update(chunk)
        ok = digest == expected.digest() and got == args.bytes
    elif mode == MODE_PHASED:
        combined = hashlib.sha256()
        windows = []
        start = time.monotonic()
        for phase in range(args.phases):
            if phase:
                time.sleep(args.pause_ms / 1000)
            t0 = time.time()
            phase_digest = hashlib.sha256()
            for chunk in stream(seed + phase, args.bytes):
                phase_digest.update(chunk)
                sock.sendall(chunk)
            recv_exact(sock, 1)  # the server has every byte of this phase
            windows.append([t0, time.time()])
            combined.update(phase_digest.digest())
        note_subflow_ids(sock)
        sock.shutdown(socket.SHUT_WR)
        digest, got, _ = REPLY.unpack(recv_exact(sock, REPLY.size))
        secs = time.monotonic() - start
        ok = digest == combined.digest() and got == args.bytes * args.phases
        result["phases"] = windows
    elif mode == MODE_PHASED_DOWN:
        windows = []
        ok, got = True, 0
        start = time.monotonic()
        for phase in range(args.phases):
            if phase:
                time.sleep(args.pause_ms / 1000)
            t0 = time.time()
            sock.sendall(b"n")
            digest, n, _ = receive_stream(sock, args.bytes)
            expected = hashlib.sha256()
            for chunk in stream(seed + phase, args.bytes):
                expected.update(chunk)
            ok &= digest == expected.digest() and n == args.bytes
            got += n
            windows.append([t0, time.time()])
        note_subflow_ids(sock)
        sock.shutdown(socket.SHUT_WR)
        secs = time.monotonic() - start
        result["phases"] = windows
    else:
        payload = bytes(args.bytes)
        latencies = []
        for _ in range(args.requests):
            t0 = time.monotonic()
            sock.sendall(payload)
            recv_exact(sock, args.bytes)
            latencies.append((time.monotonic() - t0) * 1000)
        latencies.sort()
        got = args.bytes * args.requests
        secs = sum(latencies) / 1000
        ok = True
        result["latency_ms"] = {
            "p50": round(latencies[len(latencies) // 2], 3),
            "p90": round(latencies[int(len(latencies) * 0.9)], 3),
            "p99": round(latencies[int(len(latencies) * 0.99)], 3),
            "mean": round(sum(latencies) / len(latencies), 3),
        }
    if args.mptcp:
        note_subflow_ids(sock)
        result["subflow_ids"] = seen_ids[0]
    if reused:
        disconnect(sock)
    else:
        sock.close()
    result |= {
        "end": time.time(),
        "bytes": got,
        "seconds": round(secs, 4),
        "goodput_mbit": round(got * 8 / secs / 1e6, 3) if secs > 0 else 0.0,
        "digest_ok": ok,
    }
    return result


def send_parallel(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``--parallel`` connections at once (threads: one process, so that
    they start together), one JSON line each."""
    results: list[dict[str, object]] = []
    errors: list[str] = []

    def one(i: int) -> None:
        try:
            results.append(transfer(args, args.seed + 1000 * i))
        except (OSError, ConnectionError) as err:
            errors.append(f"connection {i + 1}: {err}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(args.parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for result in results:
        print(json.dumps(result), file=out, flush=True)
    for error in errors:
        print(f"bulk: {error}", file=err)
    return 0 if not errors and all(r["digest_ok"] for r in results) else 1


def send(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.parallel > 1:
        return send_parallel(args, out, err)
    ok = True
    reused = client_socket(args) if args.reuse_socket else None
    for i in range(args.count):
        if i and args.gap_ms:
            time.sleep(args.gap_ms / 1000)
        result = transfer(args, args.seed + 1000 * i, reused)
        if not result["digest_ok"]:
            print(f"bulk: connection {i + 1} of {args.count} ({args.mode}): "
                  f"{result['bytes']} bytes arrived, not the {result.get('sent', args.bytes)} sent "
                  "or not byte-exact (SHA-256 differs)", file=err)
        ok = ok and bool(result["digest_ok"])
        print(json.dumps(result), file=out, flush=True)
    return 0 if ok else 1


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command line; ``argv``, ``out`` and ``err`` let a test harness
    run a client in a thread of its own process (under braid's emulated VM
    a Python start costs seconds) with what it prints kept apart."""
    parser = argparse.ArgumentParser(description="Checksummed MPTCP bulk transfers.")
    parser.add_argument("--tcp", dest="mptcp", action="store_false",
                        help="use plain TCP instead of MPTCP")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="accept transfers")
    s.add_argument("--bind", default="0.0.0.0")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--count", type=int, default=0, help="exit after N connections (0: never)")
    s.add_argument("--relisten-on-input", action="store_true",
                   help="replace the listening socket on each 'relisten' line read from standard input "
                   "(it takes the MPTCP scheduler in force then), printing 'listening' again")
    s.add_argument("--progress", type=Path,
                   help=f"upload mode: append 'unix-time peer-port bytes' lines to this file every "
                   f"{PROGRESS_S} s per connection (an arrival timeline)")
    s.add_argument("--timeout", type=float, default=IDLE_TIMEOUT_S,
                   help="seconds a connection may stay silent before it is dropped")
    c = sub.add_parser("send", help="run one transfer and print a JSON result")
    c.add_argument("--host", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--bytes", type=parse_size, default=parse_size("10M"))
    c.add_argument("--mode", choices=list(MODES), default="upload")
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--count", type=int, default=1, help="connections, one after another")
    c.add_argument("--gap-ms", type=int, default=100, help="pause between connections")
    c.add_argument("--reuse-socket", action="store_true",
                   help="one socket for every --count connection: disconnected with "
                   "connect(AF_UNSPEC) after each, connected again for the next")
    c.add_argument("--parallel", type=int, default=1,
                   help="connections at once, each with its own --bytes (instead of --count)")
    c.add_argument("--phases", type=int, default=2, help="phased mode: chunks per connection")
    c.add_argument("--pause-ms", type=int, default=1000, help="phased mode: idle time between chunks")
    c.add_argument("--requests", type=int, default=100, help="rr mode: exchanges per connection")
    c.add_argument("--rates", type=parse_rates, default=[0.0],
                   help="paced mode: Mbit/s per chunk, comma-separated, 0 for unpaced (e.g. 0,2)")
    c.add_argument("--source", help="local address to bind the first subflow to")
    c.add_argument("--seconds", type=float, default=0,
                   help="upload and paced modes: stop sending after this long (0: send every byte)")
    c.add_argument("--hold-file", type=Path,
                   help="upload and paced modes: after the data, keep the connection open and idle "
                   "until this file exists (at most --timeout)")
    c.add_argument("--timeout", type=float, default=IDLE_TIMEOUT_S,
                   help="seconds the connection may stay silent before the transfer fails")
    args = parser.parse_args(argv)
    try:
        return serve(args, out) if args.cmd == "serve" else send(args, out, err)
    except (OSError, ConnectionError) as e:
        print(f"bulk: {args.cmd} failed: {e}", file=err)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""Packet capture on one WAN: what that network's operator (or an adversary
on it) sees, counted from real packets.

Usage::

    with tb.capture_wan(1) as cap:
        run_transfer()
    print(cap.payload_bytes(dst_port=5201))
"""

from __future__ import annotations

import dataclasses
import re
import select
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from .netns import Namespace
from .pcap import TcpPacket, read_tcp_packets


@dataclasses.dataclass
class DirectionBytes:
    """TCP payload bytes and packets seen in each direction of a port."""

    to_port: int = 0
    from_port: int = 0
    packets_to: int = 0
    packets_from: int = 0


# tcpdump's kernel buffer (2 MiB by default). A capture that loses a join's
# handshake hides the join, and the connection's first flight then seems
# to leave before it: one VM run (2026-11-26) showed five spares with no
# join on the wire whose client never held a first flight, as if their
# joins were there. Whether the capture lost them was not recorded then;
# drops are counted now (``dropped``), and 16 MiB per capture makes them
# rarer at no cost that matters.
CAPTURE_BUFFER_KIB = 16384


class WanCapture:
    """tcpdump on ``ifname`` inside ``ns`` for the duration of a with-block."""

    def __init__(self, ns: Namespace, ifname: str, label: str, snaplen: int = 128,
                 path: Path | None = None) -> None:
        self.ns = ns
        self.ifname = ifname
        self.label = label
        self.snaplen = snaplen
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        if path is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix=f"braid-{label}-")
            path = Path(self._tmpdir.name) / f"{label}.pcap"
        self.path = path
        self._proc: subprocess.Popen[bytes] | None = None
        self._packets: list[TcpPacket] | None = None
        # Packets the kernel dropped before tcpdump read them (its exit
        # statistics): the capture misses that many. None until stopped.
        self.dropped: int | None = None
        # When tcpdump said it was listening (time.time(), the clock of
        # packet timestamps): nothing before is in the capture.
        self.started_at: float | None = None

    def start(self) -> None:
        self._proc = self.ns.popen(
            ["tcpdump", "-i", self.ifname, "-n", "-s", str(self.snaplen), "-U",
             "--immediate-mode", "-B", str(CAPTURE_BUFFER_KIB), "-w", str(self.path), "tcp"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # tcpdump says "listening on" once the socket is attached; packets
        # sent before that would be missed.
        assert self._proc.stderr is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._proc.stderr], [], [], 0.5)
            if ready and b"listening on" in self._proc.stderr.readline():
                self.started_at = time.time()
                return
            if self._proc.poll() is not None:
                break
        raise RuntimeError(f"tcpdump on {self.label} did not start")

    def stop(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc and self._proc.stderr and not self._proc.stderr.closed:  # stop() may run twice
            found = re.search(rb"(\d+) packets? dropped by kernel", self._proc.stderr.read())
            self.dropped = int(found.group(1)) if found else None
            self._proc.stderr.close()

    def __enter__(self) -> WanCapture:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def packets(self) -> list[TcpPacket]:
        if self._packets is None:
            self._packets = list(read_tcp_packets(self.path)) if self.path.exists() else []
        return self._packets

    def bytes_for_port(self, port: int) -> DirectionBytes:
        """Payload bytes towards and from ``port`` (the MPTCP server's port)."""
        out = DirectionBytes()
        for p in self.packets:
            if p.dport == port:
                out.to_port += p.payload_len
                out.packets_to += 1
            elif p.sport == port:
                out.from_port += p.payload_len
                out.packets_from += 1
        return out

    def cleanup(self) -> None:
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

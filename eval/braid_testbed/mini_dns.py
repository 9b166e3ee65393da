"""A DNS server for one test network: answers A queries for the names given
on the command line, NXDOMAIN for the rest. The exit relay's resolver asks
it (tor's resolver does not read /etc/hosts).

    python3 mini_dns.py 127.0.0.1 web.braid.test=10.9.0.3
"""

from __future__ import annotations

import socket
import struct
import sys


def parse_query(msg: bytes) -> tuple[int, str, int, int] | None:
    """(id, name, qtype, end of question) of a one-question query."""
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if flags & 0x8000 or qd != 1:
        return None
    labels, i = [], 12
    while i < len(msg) and msg[i]:
        n = msg[i]
        if n > 63 or i + 1 + n > len(msg):
            return None
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    if i + 5 > len(msg):
        return None
    qtype = struct.unpack("!H", msg[i + 1:i + 3])[0]
    return qid, ".".join(labels).lower(), qtype, i + 5


def answer(msg: bytes, names: dict[str, str]) -> bytes | None:
    q = parse_query(msg)
    if q is None:
        return None
    qid, name, qtype, end = q
    question = msg[12:end]
    ip = names.get(name)
    if ip is None:
        return struct.pack("!HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question  # NXDOMAIN
    if qtype != 1:
        return struct.pack("!HHHHHH", qid, 0x8180, 1, 0, 0, 0) + question  # no data
    rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
    return struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + rr


def main() -> None:
    addr = sys.argv[1]
    names = dict(arg.split("=", 1) for arg in sys.argv[2:])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    while True:
        msg, peer = s.recvfrom(512)
        reply = answer(msg, {k.lower(): v for k, v in names.items()})
        if reply:
            s.sendto(reply, peer)


if __name__ == "__main__":
    main()

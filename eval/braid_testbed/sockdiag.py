"""Abort TCP sockets through sock_diag, as ``ss -K`` does.

An aborted socket goes the way a reset from a middlebox or a TCP time-out
takes it (``tcp_done_with_error()``: its queues purged, an error reported),
so a test can kill one MPTCP subflow as a network that resets it does. The
request is one netlink message from the calling thread's namespace (run it
with :func:`braid_testbed.netns.inside`): under braid's emulated VM, ``ss``
would cost a second, right at the moment a test measures. Needs
CONFIG_INET_DIAG_DESTROY and CAP_NET_ADMIN.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
SOCK_DESTROY = 21
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_ESTABLISHED = 1

NLMSG = struct.Struct("=IHHII")
# inet_diag_req_v2: family, protocol, ext, pad, states, then the 48-byte id
REQ = struct.Struct("=BBBBI48s")
# inet_diag_msg: family, state, timer, retrans, id, expires, rqueue, wqueue, uid, inode
MSG = struct.Struct("=BBBB48sIIIII")
# inet_diag_sockid: sport, dport (network order), src, dst, interface, cookie
SOCKID = struct.Struct("!HH16s16s12x")


def _request(nl: socket.socket, kind: int, flags: int, family: int, states: int, sockid: bytes) -> None:
    body = REQ.pack(family, socket.IPPROTO_TCP, 0, 0, states, sockid)
    nl.send(NLMSG.pack(NLMSG.size + len(body), kind, NLM_F_REQUEST | flags, 0, 0) + body)


def _messages(nl: socket.socket) -> list[tuple[int, bytes]]:
    """The netlink messages of one answer, until its end or its error."""
    out: list[tuple[int, bytes]] = []
    while True:
        data = nl.recv(1 << 16)
        offset = 0
        while offset < len(data):
            length, kind, _flags, _seq, _pid = NLMSG.unpack_from(data, offset)
            payload = data[offset + NLMSG.size:offset + length]
            offset += (length + 3) & ~3
            if kind == NLMSG_DONE:
                return out
            if kind == NLMSG_ERROR:
                code = -struct.unpack_from("=i", payload)[0]
                if code:
                    raise OSError(code, f"sock_diag: {errno.errorcode.get(code, code)}")
                return out
            out.append((kind, payload))


def abort_tcp(local_port: int, remote: str) -> int:
    """Abort the established TCP sockets of this thread's namespace whose
    local port is ``local_port`` and whose peer address is ``remote``
    (MPTCP subflows included); returns how many were aborted."""
    peer = ipaddress.ip_address(remote)
    family = socket.AF_INET if peer.version == 4 else socket.AF_INET6
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
        _request(nl, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP, family, 1 << TCP_ESTABLISHED, bytes(48))
        victims = []
        for _kind, payload in _messages(nl):
            sockid = MSG.unpack_from(payload)[4]
            sport, _dport, _src, dst = SOCKID.unpack(sockid)
            if sport == local_port and dst[:peer.max_prefixlen // 8] == peer.packed:
                victims.append(sockid)
        for sockid in victims:
            _request(nl, SOCK_DESTROY, NLM_F_ACK, family, 0xFFFFFFFF, sockid)
            _messages(nl)
    return len(victims)

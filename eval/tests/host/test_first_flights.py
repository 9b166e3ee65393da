"""First flights against joins: a connection is judged only if every
capture was running when it opened (page_split.relay_connections)."""

from __future__ import annotations

from braid_eval.measure.page_split import first_flights, relay_connections, relay_flows
from braid_eval.measure.proxy_pair import SERVER_PORT
from braid_testbed.pcap import MPTCP_SUB_CAPABLE, TcpPacket

SYNACK, ACK = 0x12, 0x10


def opened_then_sent(token: int, port: int, opened: float, sent: float) -> list[TcpPacket]:
    """A relay connection on wan1 alone: its SYN/ACK and third ACK at
    ``opened``, its first request at ``sent``."""
    client, server = ("10.1.0.2", port), ("10.9.0.2", SERVER_PORT)
    return [TcpPacket(opened, server[0], client[0], server[1], client[1], SYNACK, 0, 0,
                      MPTCP_SUB_CAPABLE, None, token),
            TcpPacket(opened + 0.01, client[0], server[0], client[1], server[1], ACK, 0, 0, None),
            TcpPacket(sent, client[0], server[0], client[1], server[1], ACK, 0, 319, None)]


def test_a_connection_opened_before_a_capture_started_is_not_judged() -> None:
    """wan2's capture began at 1.0, after wan1's: the spare opened at 0.5
    may have joined on wan2 unseen, so its request, seen on wan1 alone at
    2.0, proves nothing; the one opened at 1.5 never joined, and its
    request did leave before its join."""
    wan1 = opened_then_sent(0xA, 40000, 0.5, 2.0) + opened_then_sent(0xB, 40002, 1.5, 2.5)
    captured = {1: wan1, 2: []}
    flights = first_flights(relay_flows(relay_connections(captured, since=1.0), "up"))
    assert [(f.sent_at, f.before_join) for f in flights] == [(2.5, True)]
    assert len(first_flights(relay_flows(relay_connections(captured), "up"))) == 2

"""The testbed on the host kernel (no netem here, so links are unshaped):
bring-up, reachability over each WAN, idempotence and guaranteed clean-up."""

from __future__ import annotations

import os
import time

import pytest

from braid_testbed import LinkSpec, StandardTestbed, ip, leftover_namespaces
from braid_testbed.topology import Topology

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces")
UNSHAPED = LinkSpec()


def test_both_wans_reach_the_proxy_and_server(tag: str) -> None:
    with StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED) as tb:
        for wan in (1, 2):
            tb.client.run(["ping", "-c1", "-W2", "-I", ip("client", f"wan{wan}"), tb.proxy_ip])
        tb.client.run(["ping", "-c1", "-W2", ip("server", "inet")])


def test_wan_capture_sees_a_connection_and_reports_no_drops(tag: str) -> None:
    """A WAN capture holds a TCP handshake made through it, and reports
    tcpdump's kernel-drop count (0 for so few packets) once stopped."""
    with StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED) as tb:
        listener = tb.proxy.popen(["python3", "-c", "import socket; s = socket.create_server(('', 9099)); "
                                   "s.accept()[0].close()"])
        tb.proxy.wait_listening(9099, timeout=10, proc=listener)
        with tb.capture_wan(1) as cap:
            assert cap.dropped is None
            connect = f"import socket; socket.create_connection(('{tb.proxy_ip}', 9099)).close()"
            tb.client.run(["python3", "-c", connect])
            listener.wait(timeout=10)
        assert cap.dropped == 0
        cap.stop()  # again, as a fixture's clean-up may
        assert cap.dropped == 0
        assert any(p.syn and p.dport == 9099 for p in cap.packets)
        cap.cleanup()


def test_source_routing_sends_each_address_out_of_its_wan(tag: str) -> None:
    with StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED) as tb:
        out = tb.client.run(["ip", "route", "get", tb.proxy_ip, "from", ip("client", "wan2")])
        assert "dev wan2" in out.stdout


def test_up_is_idempotent_and_replaces_leftovers(tag: str) -> None:
    first = StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED).up()
    stale = first.client.popen(["sleep", "300"])
    # Only a process already inside counts as a leftover.
    deadline = time.monotonic() + 5
    while stale.pid not in first.client.pids() and time.monotonic() < deadline:
        time.sleep(0.01)
    # A second bring-up with the same tag (e.g. after a crash) starts clean.
    with StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED) as tb:
        tb.client.run(["ping", "-c1", "-W2", tb.proxy_ip])
        assert stale.wait(timeout=5) != 0  # the old topology's process was killed
    first.down()


def test_failure_inside_block_leaves_nothing(tag: str) -> None:
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"), StandardTestbed(
        tag, wan1=UNSHAPED, wan2=UNSHAPED
    ) as tb:
        pids.append(tb.proxy.popen(["sleep", "300"]).pid)
        # A grandchild that escaped our Popen handle must die too.
        tb.server.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 &"])
        pids.extend(tb["server"].pids())
        raise RuntimeError("boom")
    assert leftover_namespaces(f"{Topology.ns_prefix}{tag}-") == []
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_unknown_node_in_link_is_rejected() -> None:
    topo = Topology("bad")
    topo.node("a")
    with pytest.raises(ValueError, match="unknown node 'b'"):
        topo.link("a", "e0", "10.0.0.1/24", "b", "e0", "10.0.0.2/24")


def test_extra_addresses_ipv6_usable_at_once(tag: str) -> None:
    """Extra addresses (IPv6 on a link end, IPv4 on lo) work as soon as up() returns."""
    topo = Topology(tag)
    topo.node("a", forward=False)
    topo.node("b")
    topo.link("a", "e0", "10.0.0.1/24", "b", "e0", "10.0.0.2/24")
    topo.address("a", "e0", "fc00:1::1/64")
    topo.address("b", "e0", "fc00:1::2/64")
    topo.address("b", "lo", "10.99.0.1/32")
    topo.route("a", "default", "fc00:1::2")
    topo.route("a", "10.99.0.1/32", "10.0.0.2")
    with pytest.raises(ValueError, match="unknown node 'c'"):
        topo.address("c", "e0", "10.0.0.3/24")
    with topo:
        topo["a"].run(["ping", "-6", "-c1", "-W2", "fc00:1::2"])
        topo["a"].run(["ping", "-c1", "-W2", "10.99.0.1"])
        assert "via fc00:1::2" in topo["a"].run(["ip", "-6", "route", "get", "fc00:9::9"]).stdout


def test_single_mptcp_connection_uses_both_wans_on_host(tag: str) -> None:
    """The in-kernel PM opens a wan2 subflow; seen in packet captures.
    (Unshaped here: the share is not meaningful, only that both carry MPTCP.)"""
    from braid_eval.measure.transfer import BulkServer, measured_transfer

    with StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED) as tb:
        tb.enable_kernel_pm()
        with BulkServer(tb) as server:
            r = measured_transfer(tb, server, 4 << 20, mode="upload")
        assert r.digest_ok
        for wan in (1, 2):
            syns = [p for p in r.wan_packets[wan] if p.syn and p.mptcp_subtype is not None]
            assert syns, f"no MPTCP handshake seen on wan{wan}"


def test_join_subflows_are_tied_to_their_connection_by_token(tag: str) -> None:
    """The capture parser pairs each connection's wan2 join with its wan1
    first subflow (the token in MP_JOIN's SYN is SHA-256 of MP_CAPABLE's
    key), one connection per transfer."""
    from braid_eval.measure.transfer import BulkServer, traced_series
    from braid_testbed.pcap import mptcp_connections

    with StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED) as tb:
        tb.enable_kernel_pm()
        with BulkServer(tb) as server:
            traces = traced_series(tb, server, 3, 4 << 20, "upload")
    packets = {w: [p for t in traces for p in t.packets[w]] for w in (1, 2)}
    conns = [c for c in mptcp_connections(packets).values() if c.first[1][3] == server.port]
    assert len(conns) == 3
    for conn in conns:
        assert conn.first[0] == 1 and conn.first[1][0] == ip("client", "wan1")
        assert [cap for cap, _flow in conn.joins] == [2]
        assert conn.joined_at is not None


def test_sysctl_is_set_in_its_own_namespace_only(tag: str) -> None:
    """Namespace.sysctl writes from a thread inside the namespace, not by
    starting sysctl: the value lands there and nowhere else, reads back
    through the sysctl command, and a value the kernel refuses is an error
    naming the key."""
    from braid_testbed.netns import CommandError

    with StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED) as tb:
        def read(node: str) -> str:
            return tb[node].run(["sysctl", "-n", "net.ipv4.tcp_notsent_lowat"]).stdout.strip()

        untouched = read("proxy")
        tb.client.sysctl("net.ipv4.tcp_notsent_lowat", 131071)
        assert read("client") == "131071"
        assert read("proxy") == untouched
        with pytest.raises(CommandError, match="net.mptcp.pm_type"):
            tb.client.sysctl("net.mptcp.pm_type", 7)
        assert tb.client.pids() == []


def test_wan2_endpoint_deletion_removes_only_the_clients_wan2_endpoint(tag: str) -> None:
    with StandardTestbed(tag, wan1=UNSHAPED, wan2=UNSHAPED) as tb:
        tb.enable_kernel_pm()
        wan2 = ip("client", "wan2")
        delete = tb.wan2_endpoint_deletion()
        assert wan2 in tb.client.run(["ip", "mptcp", "endpoint", "show"]).stdout
        delete()
        assert wan2 not in tb.client.run(["ip", "mptcp", "endpoint", "show"]).stdout
        tb.add_wan2_endpoint()  # it can come back
        assert wan2 in tb.client.run(["ip", "mptcp", "endpoint", "show"]).stdout

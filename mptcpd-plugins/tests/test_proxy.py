"""Proxy role on the host kernel: announcements, listeners, the join cap.

The proxy's mptcpd announces ``announce=`` addresses on every
connection; mptcpd opens a listening socket for each announcement, so
what must hold is what the kernel shows: one listener per announced
address however many connections come and go, a constant descriptor
count in mptcpd, and joins to the announced address and port accepted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from braid_testbed.mptcpd_lab import Lab, Namespace, popen_text, start_mptcpd, stop_process
from braid_testbed.wait import TIME_SCALE, wait_for

HERE = Path(__file__).resolve().parent
CHURN = str(HERE / "mptcp_churn.py")
MAIN = "10.99.0.1"
EXTRA = "10.99.0.2"
PORT = 5301
#: The soak's size: ulimit -n of a default service is 1024.
SOAK = int(os.environ.get("GWSTEER_SOAK", "5000"))


def _proxy_pair(lab: Lab) -> tuple[Namespace, Namespace]:
    net = lab.topology()
    net.node("cli", forward=False)
    net.node("srv", forward=False)
    net.link("cli", "e0", "10.8.0.2/24", "srv", "e0", "10.8.0.1/24")
    net.address("srv", "lo", f"{MAIN}/32")
    net.address("srv", "lo", f"{EXTRA}/32")
    net.route("cli", "10.99.0.0/24", "10.8.0.1")
    lab.up(net)
    return net["cli"], net["srv"]


def _start_proxy(srv: Namespace, tmp: Path, extra: str) -> subprocess.Popen[str]:
    conf = tmp / "proxy.conf"
    conf.write_text(f"[gwsteer]\nrole = proxy\nstatus_file = {tmp}/proxy.json\n{extra}\n")
    proc = start_mptcpd(srv, conf, tmp / "proxy.log")
    wait_for("proxy mptcpd up", lambda: (tmp / "proxy.json").exists(), 10)
    time.sleep(0.3)  # mptcpd resolves the MPTCP netlink family after plugin init
    return proc


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _listeners(srv: Namespace) -> list[str]:
    """Local address:port of every TCP listening socket in ``srv`` (kernel view)."""
    return [line.split()[3] for line in srv.run(["ss", "-Hltn"]).stdout.splitlines()]


def _churn(cli: Namespace, srv: Namespace, count: int) -> float:
    start = time.monotonic()
    server = srv.popen([sys.executable, CHURN, "server", "--bind", MAIN, "--port", str(PORT),
                        "--count", str(count), "--timeout", str(120 * TIME_SCALE)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    srv.wait_listening(PORT, MAIN, 10 * TIME_SCALE, proc=server)
    client = cli.run([sys.executable, CHURN, "client", "--dst", MAIN, "--port", str(PORT),
                      "--count", str(count), "--timeout", str(120 * TIME_SCALE)],
                     check=False, timeout=150 * TIME_SCALE)
    if client.returncode != 0:
        # The client gave up (a connection it could not finish): say so,
        # with the server's side, rather than wait for a server that will
        # not reach its count.
        stop_process(server)
        out, err = server.communicate()
        pytest.fail(f"client: {client.stdout}{client.stderr}; server: {out!r} {err!r}")
    server.wait(timeout=10 * TIME_SCALE)
    assert json.loads(client.stdout)["connections"] == count
    return time.monotonic() - start


def test_announce_keeps_one_listener_and_constant_fds(lab: Lab, tmp: Path) -> None:
    cli, srv = _proxy_pair(lab)
    # The client uses the in-kernel PM and accepts no ADD_ADDR: no joins,
    # only announcements (seen by its PM as ANNOUNCED events).
    cli.run(["ip", "mptcp", "limits", "set", "subflows", "0", "add_addr_accepted", "0"])
    monitor = popen_text(cli, ["ip", "mptcp", "monitor"], stdout=subprocess.PIPE)
    proxy = _start_proxy(srv, tmp, f"announce = {EXTRA}")

    _churn(cli, srv, 50)
    wait_for("the announced address's listener", lambda: [a for a in _listeners(srv) if a.startswith(EXTRA + ":")], 5)
    fds_before = _fds(proxy.pid)
    seconds = _churn(cli, srv, SOAK)
    time.sleep(0.5)  # let mptcpd drain the last events
    fds_after = _fds(proxy.pid)
    listeners = _listeners(srv)
    extra = [a for a in listeners if a.startswith(EXTRA + ":")]
    print(f"{SOAK} connections in {seconds:.1f}s; mptcpd fds {fds_before} -> {fds_after}; "
          f"{len(extra)} listener(s) on {EXTRA}")
    assert proxy.poll() is None, "mptcpd died"
    assert len(extra) == 1, f"{len(extra)} listeners on {EXTRA}: {extra[:5]}..."
    assert fds_after <= fds_before + 2, (fds_before, fds_after)

    stop_process(monitor)
    events = monitor.stdout.read() if monitor.stdout else ""
    announced = re.findall(r"ANNOUNCED.*?daddr4=" + re.escape(EXTRA) + r".*?dport=(\d+)", events)
    # Every announcement carries the one listener's port.
    assert len(announced) >= 50, events[-2000:]
    assert set(announced) == {extra[0].rsplit(":", 1)[1]}, set(announced)


def test_join_to_announced_address_is_accepted(lab: Lab, tmp: Path) -> None:
    cli, srv = _proxy_pair(lab)
    cli.run(["ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2"])
    _start_proxy(srv, tmp, f"announce = {EXTRA}\nmax_subflows = 3")
    server = srv.popen([sys.executable, CHURN, "server", "--bind", MAIN, "--port", str(PORT),
                        "--count", "2", "--timeout", str(30 * TIME_SCALE)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    srv.wait_listening(PORT, MAIN, 10 * TIME_SCALE, proc=server)
    ports = set()
    for _ in range(2):  # the second connection reuses the first one's listener
        client = cli.popen([sys.executable, CHURN, "client", "--dst", MAIN, "--port", str(PORT),
                            "--count", "1", "--hold", str(1.0 * TIME_SCALE)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        joined = wait_for("a join to the announced address",
                          lambda: [line.split()[2] for line in srv.run(
            ["ss", "-Htn", "state", "established", "src", EXTRA]).stdout.splitlines()], 5)
        ports.add(joined[0].rsplit(":", 1)[1])
        client.wait(timeout=10 * TIME_SCALE)
        wait_for("join closed",
                 lambda: not srv.run(["ss", "-Htn", "state", "established", "src", EXTRA]).stdout.strip(), 5)
    assert len(ports) == 1, ports
    assert [a for a in _listeners(srv) if a.startswith(EXTRA + ":")] == [f"{EXTRA}:{ports.pop()}"]


def _events(text: str, kind: str) -> list[dict[str, str]]:
    """``ip mptcp monitor`` lines of one event type as key=value dicts."""
    out = []
    for line in text.splitlines():
        if line.startswith("[") and line[1:].split("]", 1)[0].strip() == kind:
            out.append(dict(f.split("=", 1) for f in line.split("]", 1)[1].split() if "=" in f))
    return out


#: Connections live across the proxy's restart: more than one, since the
#: proxy adopts them from one socket dump in which each adoption reads a
#: dump of its own (its addresses, to re-announce them), and each must get
#: its announcement again.
LIVE = 3


def test_restart_reannounces_on_live_connections(lab: Lab, tmp: Path) -> None:
    """A proxy mptcpd restart re-announces its addresses on every connection
    it picks up: the old announcement's listener died with the old mptcpd, and
    the kernel takes a join to another port only if that port was announced on
    the connection (``mptcp_pm_sport_in_anno_list``)."""
    cli, srv = _proxy_pair(lab)
    cli.run(["ip", "mptcp", "limits", "set", "subflows", "4", "add_addr_accepted", "4"])
    monitor = popen_text(cli, ["ip", "mptcp", "monitor"], stdout=subprocess.PIPE)
    time.sleep(0.2)  # the monitor subscribes before the connection exists
    proxy = _start_proxy(srv, tmp, f"announce = {EXTRA}\nmax_subflows = 4")
    server = srv.popen([sys.executable, CHURN, "server", "--bind", MAIN, "--port", str(PORT),
                        "--count", str(LIVE), "--timeout", str(40 * TIME_SCALE)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    srv.wait_listening(PORT, MAIN, 10 * TIME_SCALE, proc=server)
    clients = [cli.popen([sys.executable, CHURN, "client", "--dst", MAIN, "--port", str(PORT),
                          "--count", "1", "--hold", str(20 * TIME_SCALE)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(LIVE)]

    def joins() -> list[str]:
        """Local address:port of the proxy's established subflows on EXTRA."""
        return [line.split()[2] for line in srv.run(
            ["ss", "-Htn", "state", "established", "src", EXTRA]).stdout.splitlines()]

    old = wait_for("the first joins to the announced address",
                   lambda: j if len(j := joins()) == LIVE else [], 5)
    old_port = old[0].rsplit(":", 1)[1]

    stop_process(proxy)
    assert not [a for a in _listeners(srv) if a.startswith(EXTRA + ":")], "listener outlived mptcpd"
    assert sorted(joins()) == sorted(old), "the joins should outlive mptcpd"
    proxy = _start_proxy(srv, tmp, f"announce = {EXTRA}\nmax_subflows = 4")

    new_listener = wait_for("the restarted mptcpd's listener",
                            lambda: [a for a in _listeners(srv) if a.startswith(EXTRA + ":")], 5)
    new_port = new_listener[0].rsplit(":", 1)[1]
    assert new_port != old_port
    every = wait_for("a join to the new listener on every connection",
                     lambda: j if len(j := joins()) == 2 * LIVE else [], 5)
    assert sorted(a.rsplit(":", 1)[1] for a in every) == sorted([old_port, new_port] * LIVE), every
    assert all(c.poll() is None for c in clients), "a connection ended early"

    for c in clients:
        stop_process(c)
    stop_process(monitor)
    server.wait(timeout=10 * TIME_SCALE)
    events = monitor.stdout.read() if monitor.stdout else ""
    tokens = sorted(e["token"] for e in _events(events, "CREATED"))
    assert len(tokens) == LIVE, events
    announced = [e for e in _events(events, "ANNOUNCED") if e.get("daddr4") == EXTRA]
    # One announcement per mptcpd on each connection, with each listener's port,
    # the second under another address id (the kernel keeps the first one's id).
    for token in tokens:
        mine = [e for e in announced if e["token"] == token]
        assert [e["dport"] for e in mine] == [old_port, new_port], events
        assert mine[0]["remid"] != mine[1]["remid"], mine
    # (A new join reports the old id: the proxy's kernel looks a join's local
    # id up by address without the port.)
    established = [e for e in _events(events, "SF_ESTABLISHED") if e.get("daddr4") == EXTRA]
    assert sorted((e["token"], e["dport"]) for e in established) == \
        sorted([(t, old_port) for t in tokens] + [(t, new_port) for t in tokens]), events
    log = (tmp / "proxy.log").read_text()
    assert f"picked up {LIVE} existing connections" in log, log[-2000:]

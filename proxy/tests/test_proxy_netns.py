"""End-to-end tests of braid-proxy in network namespaces (needs root).

Real processes, real sockets, real MPTCP over two veth "WANs"; see
braid_testbed/braidnet.py for the topology. Run with ``python3 -m pytest proxy/tests``
(proxy/test.sh does).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from braid_testbed.braidnet import (
    CLIENT_W1,
    CLIENT_W2,
    DEST,
    DEST_NAME,
    SERVER_PUBLIC,
    LinkSpec,
    Testbed,
    build_binaries,
    write_secret,
)
from braid_testbed.netns import stop_process

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

KEY = "box1 " + "3c" * 32 + "\n"
SERVER_PORT, SOCKS_PORT, TPROXY_PORT, WEB_PORT, SINK_PORT = 7443, 1080, 1081, 8080, 9000
CLIENT_METRICS, SERVER_METRICS = 9180, 9181

# Bytes each way in the bulk test: 512 MiB (1 GiB end to end) by default. The
# VM stage (scripts/test) sets BRAID_PROXY_BULK_MIB lower: braid's kernel runs
# there under TCG, where every copy and every AES-GCM block is an emulated
# instruction, so 1 GiB would take most of the stage's time budget on its own.
# Same checks at any size: byte-exact, both WANs carry a real share.
BULK_MIB = int(os.environ.get("BRAID_PROXY_BULK_MIB", "512"))
# Connections open at once in the concurrency test (1,000 in total either
# way). The VM stage sets BRAID_PROXY_CONCURRENT=100: under TCG, 1,000 at
# once put the median setup at 21 s, beyond the proxies' 10 s handshake and
# dial timeouts (slowloris guards the test must not loosen), so connections
# failed by design, not by a bug.
CONCURRENT = int(os.environ.get("BRAID_PROXY_CONCURRENT", "1000"))
# Connections in the load test: 1,000 on the host; the VM stage makes it
# BRAID_PROXY_LOAD_CONNS=300, since every connection's four X25519
# operations and AES-GCM run on the emulated CPU there.
LOAD_CONNS = int(os.environ.get("BRAID_PROXY_LOAD_CONNS", "1000"))
# Rate of each WAN (Mbit/s, each direction, netem) in the bulk test; unset:
# unshaped veth. The VM stage sets it below what the emulated CPU can relay
# (~16 Mbit/s a direction under TCG) so that each WAN, not the CPU, is the
# bottleneck: MPTCP's default scheduler only spreads a stream once the
# fastest subflow is full, and a CPU-bound relay never fills one.
BULK_WAN_MBIT = float(os.environ.get("BRAID_PROXY_BULK_WAN_MBIT", "0"))
# Download in flight at SIGTERM in the drain test: it must finish within the
# server's shutdown grace (3 s), so smaller where the emulated CPU relays
# ~16 Mbit/s (the VM stage's bulk size is below 256 MiB).
DRAIN_MIB = 256 if BULK_MIB >= 256 else 4
# Page size in the fast_open test (see there why not the 8 MiB blob).
FAST_OPEN_PAGE = 16 << 10


class Bed(Testbed):
    """The testbed plus what the fixture started in it."""

    dir: Path
    blob_sha: str
    proxy: Path
    loadgen: Path
    server: subprocess.Popen[bytes]
    client: subprocess.Popen[bytes]
    server_log: Path
    client_log: Path
    gw_file: Path


@pytest.fixture(scope="module")
def bins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_binaries(tmp_path_factory.mktemp("bin"))


HYWF_AVAILABLE = Path("/proc/sys/net/mptcp/hywf_ncons").exists()


@pytest.fixture
def bed(bins: tuple[Path, Path], tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Bed]:
    """Testbed with a web server and a loadgen sink in "d", braid-proxy
    server in "s" and client in "c". Parametrised indirectly with a packet
    scheduler name, both proxies' namespaces use it (default: the kernel's)."""
    proxy, loadgen = bins
    scheduler = getattr(request, "param", None)
    if scheduler == "hywf" and not HYWF_AVAILABLE:
        pytest.skip("hywf exists only in braid's kernel (scripts/test stage proxy-vm)")
    with Bed() as tb:
        if scheduler is not None:
            for role in ("c", "s"):
                tb.run(role, "sysctl", "-q", "-w", f"net.mptcp.scheduler={scheduler}")
        tb.dir = tmp_path
        www = tmp_path / "www"
        www.mkdir()
        (www / "blob.bin").write_bytes(os.urandom(8 << 20))
        tb.blob_sha = hashlib.sha256((www / "blob.bin").read_bytes()).hexdigest()
        tb.spawn("d", ["python3", "-m", "http.server", "-b", DEST, "-d", str(www), str(WEB_PORT)])
        tb.spawn("d", [str(loadgen), "serve", "-listen", f"{DEST}:{SINK_PORT}", "-mptcp"])

        keys = write_secret(tmp_path / "keys", KEY)
        tb.server_log = tmp_path / "server.log"
        tb.server = tb.spawn(
            "s",
            [
                str(proxy),
                "server",
                "-listen",
                f"{SERVER_PUBLIC}:{SERVER_PORT}",
                "-key-file",
                str(keys),
                "-allow-cidr",
                "10.9.0.0/24",
                "-metrics-listen",
                f"127.0.0.1:{SERVER_METRICS}",
                "-log-format",
                "json",
                "-shutdown-grace",
                "3s",
            ],
            log=tb.server_log,
        )
        tb.client_log = tmp_path / "client.log"
        tb.gw_file = tmp_path / "gateways.json"
        tb.client = tb.spawn(
            "c",
            [
                str(proxy),
                "client",
                "-server",
                f"{SERVER_PUBLIC}:{SERVER_PORT}",
                "-key-file",
                str(keys),
                "-socks-listen",
                f"127.0.0.1:{SOCKS_PORT}",
                "-transparent-listen",
                f"127.0.0.1:{TPROXY_PORT}",
                "-gateway-status-file",
                str(tb.gw_file),
                "-metrics-listen",
                f"127.0.0.1:{CLIENT_METRICS}",
            ],
            log=tb.client_log,
        )
        tb.proxy, tb.loadgen = proxy, loadgen
        tb.wait_port("d", DEST, WEB_PORT)
        tb.wait_port("d", DEST, SINK_PORT)
        tb.wait_port("s", SERVER_PUBLIC, SERVER_PORT)
        tb.wait_port("c", "127.0.0.1", SOCKS_PORT)
        tb.wait_port("c", "127.0.0.1", TPROXY_PORT)
        yield tb


def status(tb: Testbed, role: str, port: int) -> dict[str, Any]:
    r = tb.run(role, "curl", "-sf", "--max-time", "5", f"http://127.0.0.1:{port}/status")
    st: dict[str, Any] = json.loads(r.stdout)
    return st


def curl_sha(tb: Testbed, *args: str) -> str:
    r = tb.run("c", "bash", "-c", "set -o pipefail; curl -sSf --max-time 60 " + " ".join(args) + " | sha256sum")
    return str(r.stdout.split()[0])


def test_curl_socks5_hostname_byte_exact(bed: Bed) -> None:
    got = curl_sha(bed, "--socks5-hostname", f"127.0.0.1:{SOCKS_PORT}", f"http://{DEST_NAME}:{WEB_PORT}/blob.bin")
    assert got == bed.blob_sha
    st = status(bed, "s", SERVER_METRICS)
    assert st["relays_total"] >= 1 and st["bytes_down"] >= 8 << 20


@pytest.mark.braid_kernel  # REDIRECT needs netfilter NAT in the kernel's config
def test_transparent_iptables_redirect_byte_exact(bed: Bed) -> None:
    bed.run(
        "c",
        "iptables",
        "-t",
        "nat",
        "-A",
        "OUTPUT",
        "-p",
        "tcp",
        "-d",
        DEST,
        "--dport",
        str(WEB_PORT),
        "-j",
        "REDIRECT",
        "--to-ports",
        str(TPROXY_PORT),
    )
    got = curl_sha(bed, f"http://{DEST}:{WEB_PORT}/blob.bin")
    assert got == bed.blob_sha
    st = status(bed, "c", CLIENT_METRICS)
    assert st["transparent_conns_total"] >= 1 and st["relays_total"] >= 1


@pytest.mark.braid_kernel  # netem-shaped WANs there; aggregation in braid's MPTCP
def test_1gib_checksummed_over_two_wans(bed: Bed) -> None:
    bulk = BULK_MIB << 20
    share = bulk // 25  # each WAN must carry at least 4 % of a direction
    if BULK_WAN_MBIT:
        wan = LinkSpec(rate_mbit=BULK_WAN_MBIT, delay_ms=2, queue_pkts=50)
        for node, w1, w2 in (("c", "c-w1", "c-w2"), ("s", "s-w1", "s-w2")):
            bed.topo.shape(node, w1, wan)
            bed.topo.shape(node, w2, wan)
    before = {dev: bed.tx_bytes("c", dev) for dev in ("c-w1", "c-w2")}
    r = bed.run(
        "c",
        str(bed.loadgen),
        "run",
        "-socks",
        f"127.0.0.1:{SOCKS_PORT}",
        "-target",
        f"{DEST}:{SINK_PORT}",
        "-down",
        f"{BULK_MIB}M",
        "-up",
        f"{BULK_MIB}M",
        "-verify",
        "-timeout",
        "180s",
        timeout=200,
    )
    res = json.loads(r.stdout)
    assert res["failed"] == 0 and res["bytes"] == 2 * bulk, res
    # Upload direction: both WANs must have carried a real share (MPTCP).
    sent = {dev: bed.tx_bytes("c", dev) - before[dev] for dev in before}
    print("client tx bytes per WAN:", sent, "result:", res)
    # The proxy's own per-subflow accounting (from the kernel) agrees.
    sf = status(bed, "c", CLIENT_METRICS)["subflows"]
    print("client per-subflow counters:", sf)
    assert all(v > share for v in sent.values()), sent
    assert sum(sent.values()) > bulk
    assert {CLIENT_W1, CLIENT_W2} <= set(sf), sf
    assert all(sf[a]["bytes_sent"] > share and sf[a]["bytes_received"] > share for a in (CLIENT_W1, CLIENT_W2)), sf
    assert sum(sf[a]["bytes_sent"] for a in sf) >= bulk
    deadline = time.time() + 5  # the server's relay ends just after the client's
    while time.time() < deadline:
        srv = status(bed, "s", SERVER_METRICS)["subflows"]
        if {CLIENT_W1, CLIENT_W2} <= set(srv) and all(srv[a]["bytes_received"] > share for a in (CLIENT_W1, CLIENT_W2)):
            break
        time.sleep(0.1)
    print("server per-subflow counters:", srv)
    assert {CLIENT_W1, CLIENT_W2} <= set(srv), srv
    assert all(srv[a]["bytes_received"] > share for a in (CLIENT_W1, CLIENT_W2)), srv


def start_second_client(bed: Bed, key_file: Path, socks_port: int, *extra: str, log: Path | None = None) -> None:
    """Another braid-proxy client in "c" with its own key, without metrics or
    a gateway status file unless ``extra`` flags say otherwise; returns once
    its SOCKS port listens."""
    bed.spawn(
        "c",
        [
            str(bed.proxy),
            "client",
            "-server",
            f"{SERVER_PUBLIC}:{SERVER_PORT}",
            "-key-file",
            str(key_file),
            "-socks-listen",
            f"127.0.0.1:{socks_port}",
            "-metrics-listen",
            "",
            "-gateway-status-file",
            "/nonexistent",
            *extra,
        ],
        log=log,
    )
    bed.wait_port("c", "127.0.0.1", socks_port)


# curl's exit codes: the proxy refused in its SOCKS reply (socks_reply
# "connected", or "auto" for a destination not reached lately); the
# connection was reset before or after curl sent its request, or closed
# with nothing received (an early SOCKS answer, when the server refuses
# afterwards).
CURL_PROXY_REFUSED = 97
CURL_RESET_OR_EMPTY = (52, 55, 56)


def curl_through(bed: Bed, proxy_flag: str, proxy: str, url: str,
                 max_time: int = 10) -> subprocess.CompletedProcess[str]:
    """curl ``url`` from "c" through a SOCKS proxy, failures returned, not raised."""
    return bed.run("c", "curl", "-sS", "--max-time", str(max_time), proxy_flag, proxy, url, check=False)


def test_abuse_logged_and_server_keeps_serving(bed: Bed, tmp_path: Path) -> None:
    # Wrong key: a second client with another key. The server answers
    # nothing and closes at its handshake deadline (10-15 s: its own
    # stretch of handshake_timeout). Answering SOCKS when connected, the
    # client then sends a general failure; answering early, it resets the
    # connection. No auth: plain SOCKS straight at the server
    # gets nothing back (curl gives up after 10 s, before the server's
    # deadline). All three at once, to wait for the deadlines once.
    bad_keys = write_secret(tmp_path / "bad.keys", "box1 " + "c3" * 32 + "\n")
    start_second_client(bed, bad_keys, 2080, "-socks-reply", "connected")
    start_second_client(bed, bad_keys, 2081, "-socks-reply", "early")
    cases = ((2080, (CURL_PROXY_REFUSED,)), (2081, CURL_RESET_OR_EMPTY))
    with ThreadPoolExecutor(len(cases) + 1) as pool:
        no_auth = pool.submit(curl_through, bed, "--socks5-hostname", f"{SERVER_PUBLIC}:{SERVER_PORT}",
                              f"http://{DEST_NAME}:{WEB_PORT}/")
        runs = list(pool.map(lambda case: curl_through(bed, "--socks5-hostname", f"127.0.0.1:{case[0]}",
                                                        f"http://{DEST_NAME}:{WEB_PORT}/blob.bin", max_time=25),
                             cases))
        r = no_auth.result()
    for (port, codes), run in zip(cases, runs, strict=True):
        assert run.returncode in codes and not run.stdout, (port, run)
    assert r.returncode != 0
    # Refused destination: the proxy's own loopback and the metadata address.
    # The main client (socks_reply auto) has not reached them, so it waits
    # for the server's answer and curl gets reply 2, not allowed by ruleset
    # (curl 7.88 prints the code: "Can't complete SOCKS5 connection ... (2)").
    for url in (f"http://127.0.0.1:{SERVER_METRICS}/status", "http://169.254.169.254/"):
        r = curl_through(bed, "--socks5", f"127.0.0.1:{SOCKS_PORT}", url)
        assert r.returncode == CURL_PROXY_REFUSED and "(2)" in r.stderr and not r.stdout, r
    # Unsupported command: curl cannot send BIND, so speak SOCKS by hand.
    r = bed.run(
        "c",
        "python3",
        "-c",
        f"""
import socket; s = socket.create_connection(("127.0.0.1", {SOCKS_PORT}))
s.sendall(bytes([5,1,0, 5,2,0,1, 10,9,0,2, 0,80])); s.settimeout(5)
out = b""
while True:
    b = s.recv(100)
    if not b: break
    out += b
print(out.hex())""",
    )
    assert r.stdout.strip() == "0500" + "05070001000000000000"
    time.sleep(0.3)
    st = status(bed, "s", SERVER_METRICS)
    assert st["auth_failures"] >= 2 and st["refused_destinations"] >= 2, st
    log = bed.server_log.read_text()
    assert "authentication failed" in log and "destination refused by policy" in log
    assert "3c3c3c" not in log and "c3c3c3" not in log
    # ...and the server still serves well-behaved clients.
    assert (
        curl_sha(bed, "--socks5-hostname", f"127.0.0.1:{SOCKS_PORT}", f"http://{DEST_NAME}:{WEB_PORT}/blob.bin")
        == bed.blob_sha
    )


def diagnosis(tb: Bed, what: str) -> str:
    """What failed, with both proxies' counters and log tails (the VM's
    temporary directory is gone after the run)."""
    parts = [what.strip()]
    for role, port, log in (("c", CLIENT_METRICS, tb.client_log), ("s", SERVER_METRICS, tb.server_log)):
        try:
            st = status(tb, role, port)
            parts.append(f"{role} counters: " + json.dumps({k: v for k, v in st.items() if not isinstance(v, dict)}))
        except Exception as err:  # the process may be gone
            parts.append(f"{role} status unavailable: {err}")
        parts.append(f"{role} log tail:\n" + "\n".join(log.read_text().splitlines()[-15:]))
    return "\n".join(parts)


def _proc_status(tb: Testbed, p: subprocess.Popen[bytes]) -> dict[str, str]:
    # p is "ip netns exec ..." which execs the program: same pid.
    out = {}
    for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def test_1000_concurrent_no_leaks_bounded_memory(bed: Bed) -> None:
    base_s, base_c = status(bed, "s", SERVER_METRICS), status(bed, "c", CLIENT_METRICS)
    r = bed.run(
        "c",
        "bash",
        "-c",
        f"ulimit -n 8192; exec {bed.loadgen} run -socks 127.0.0.1:{SOCKS_PORT} "
        f"-target {DEST}:{SINK_PORT} -n {LOAD_CONNS} -c {CONCURRENT} -down 64K -up 16K -timeout 60s",
        timeout=240,
        check=False,
    )
    res = json.loads(r.stdout) if r.stdout.strip() else {}
    assert res.get("failed") == 0, diagnosis(bed, r.stdout + r.stderr)
    deadline = time.time() + 15
    while time.time() < deadline:
        s, c = status(bed, "s", SERVER_METRICS), status(bed, "c", CLIENT_METRICS)
        # What the server still counts are the client's idle spares.
        if (
            s["conns_active"] == c.get("preconnect_idle", 0)
            and c["conns_active"] == 0
            and s["goroutines"] <= base_s["goroutines"] + 3
            and c["goroutines"] <= base_c["goroutines"] + 3
            and s["open_fds"] <= base_s["open_fds"] + 3
            and c["open_fds"] <= base_c["open_fds"] + 3
        ):
            break
        time.sleep(0.2)
    print("1000 concurrent:", res, "server", s, "client", c)
    assert s["conns_active"] == c.get("preconnect_idle", 0) and c["conns_active"] == 0
    assert s["goroutines"] <= base_s["goroutines"] + 3 and c["goroutines"] <= base_c["goroutines"] + 3
    assert s["open_fds"] <= base_s["open_fds"] + 3 and c["open_fds"] <= base_c["open_fds"] + 3
    for p in (bed.server, bed.client):
        hwm_kib = int(_proc_status(bed, p)["VmHWM"].split()[0])
        print("peak RSS MiB", hwm_kib >> 10)
        assert hwm_kib < 256 << 10, f"peak RSS {hwm_kib >> 10} MiB"


def test_reload_and_graceful_shutdown(bed: Bed, tmp_path: Path) -> None:
    # SIGHUP: a new key file entry becomes valid without a restart... the
    # server was started with flags only, so reload re-reads the key file.
    keys = bed.dir / "keys"
    write_secret(keys, KEY + "box2 " + "7e" * 32 + "\n")
    bed.server.send_signal(signal.SIGHUP)
    k2 = write_secret(tmp_path / "k2", "box2 " + "7e" * 32 + "\n")
    deadline = time.time() + 5
    while "configuration reloaded" not in bed.server_log.read_text() and time.time() < deadline:
        time.sleep(0.05)
    assert "configuration reloaded" in bed.server_log.read_text()
    start_second_client(bed, k2, 3080)
    assert (
        curl_sha(bed, "--socks5-hostname", "127.0.0.1:3080", f"http://{DEST_NAME}:{WEB_PORT}/blob.bin") == bed.blob_sha
    )

    # SIGTERM with a relay in flight: the transfer finishes, then exit 0.
    dl = bed["c"].popen(
        [
            str(bed.loadgen),
            "run",
            "-socks",
            f"127.0.0.1:{SOCKS_PORT}",
            "-target",
            f"{DEST}:{SINK_PORT}",
            "-down",
            f"{DRAIN_MIB}M",
            "-verify",
            "-timeout",
            "60s",
        ],
        stdout=subprocess.PIPE,
    )
    # SIGTERM only once the relay is really in flight: under emulation its
    # handshake alone can take longer than any fixed pause.
    down_before = status(bed, "s", SERVER_METRICS)["bytes_down"]
    deadline = time.time() + 30
    while status(bed, "s", SERVER_METRICS)["bytes_down"] == down_before and time.time() < deadline:
        time.sleep(0.05)
    t0 = time.time()
    rc = stop_process(bed.server, signal.SIGTERM, wait=20)
    out, _ = dl.communicate(timeout=60)
    assert rc == 0, bed.server_log.read_text()[-2000:]
    assert time.time() - t0 < 10
    res = json.loads(out.decode().splitlines()[0])
    print("transfer during shutdown:", res)
    # The in-flight download completed, byte-exact, within the grace.
    assert res["failed"] == 0 and res["bytes"] == DRAIN_MIB << 20, res
    assert "shutting down" in bed.server_log.read_text()


def test_first_subflow_follows_best_gateway(bed: Bed) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for best, _src in (("gw2", CLIENT_W2), ("gw1", CLIENT_W1)):
        gws = [
            {
                "id": "gw1",
                "source": CLIENT_W1,
                "up": True,
                "backup": False,
                "ewma_ms": 1.0 if best == "gw1" else 9.0,
                "rtt_ms": 1.0,
                "last_change": now,
            },
            {
                "id": "gw2",
                "source": CLIENT_W2,
                "up": True,
                "backup": False,
                "ewma_ms": 1.0 if best == "gw2" else 9.0,
                "rtt_ms": 1.0,
                "last_change": now,
            },
        ]
        bed.gw_file.write_text(json.dumps({"version": 1, "updated": now, "gateways": gws}))
        time.sleep(0.6)  # the client re-reads the file at most twice a second
        before = status(bed, "c", CLIENT_METRICS)["gateways"].get(best, {}).get("conns", 0)
        curl_sha(bed, "--socks5-hostname", f"127.0.0.1:{SOCKS_PORT}", f"http://{DEST_NAME}:{WEB_PORT}/blob.bin")
        after = status(bed, "c", CLIENT_METRICS)["gateways"][best]["conns"]
        assert after == before + 1, (best, before, after)


def subflows_to_server(bed: Bed) -> dict[str, int]:
    """Subflows of each MPTCP connection from "c" to the server, by the
    connection's local port. ``ss -Mi`` prints a connection's line, then an
    indented info line whose ``subflows:`` counts the joined subflows (left
    out when none)."""
    r = bed.run("c", "ss", "-MHni", "state", "established", "dst", f"{SERVER_PUBLIC}:{SERVER_PORT}")
    conns: dict[str, int] = {}
    port = ""
    for line in r.stdout.splitlines():
        if not line[:1].isspace():
            port = line.split()[2].rsplit(":", 1)[1]
            conns[port] = 1
        elif "subflows:" in line:
            conns[port] = 1 + int(line.split("subflows:")[1].split()[0])
    return conns


def test_spares_join_their_subflows_before_use(bed: Bed, tmp_path: Path) -> None:
    """Spare connections send nothing before they are used, so the server
    never acknowledges data and, by RFC 8684, the client's path manager may
    not join the other subflows: a connection's first flight would leave on
    one WAN alone. The client's join probe (a TCP keepalive, answered by the
    server's kernel) lets them join while idle. The control: an idle MPTCP
    connection without the probe stays at one subflow."""
    start_second_client(bed, write_secret(tmp_path / "j.keys", KEY), 6080,
                        "-preconnect", "3", "-metrics-listen", "127.0.0.1:9192")
    control = bed.spawn("c", ["python3", "-c",
                              "import socket,time\n"
                              "s=socket.socket(socket.AF_INET,socket.SOCK_STREAM,socket.IPPROTO_MPTCP)\n"
                              f"s.bind(('{CLIENT_W1}',47001)); s.connect(('{SERVER_PUBLIC}',{SERVER_PORT}))\n"
                              "time.sleep(8)\n"])
    page = bed.dir / "www" / "small.txt"
    page.write_bytes(b"j" * 1000)
    url = f"http://{DEST_NAME}:{WEB_PORT}/small.txt"
    curl_sha(bed, "--socks5-hostname", "127.0.0.1:6080", url)
    deadline = time.time() + 6
    while time.time() < deadline:
        st = status(bed, "c", 9192)
        if st.get("preconnect_idle_joined") == 3:
            break
        time.sleep(0.2)
    conns = subflows_to_server(bed)
    print("spares joined:", st.get("preconnect_idle_joined"), "subflows per connection:", conns)
    assert st.get("preconnect_idle_joined") == 3, st
    assert conns.get("47001") == 1, f"the idle control joined without a probe: {conns}"
    spares = [n for port, n in conns.items() if port != "47001"]
    assert len(spares) == 3 and all(n == 2 for n in spares), conns
    # The probe is off again once joined: relay connections carry no
    # keepalive while an idle timeout is set (the default).
    timers = bed.run("c", "ss", "-tnoH", "state", "established", "dst", f"{SERVER_PUBLIC}:{SERVER_PORT}").stdout
    probing = [line for line in timers.splitlines() if "keepalive" in line and ":47001" not in line]
    assert not probing, timers
    for _ in range(3):
        got = curl_sha(bed, "--socks5-hostname", "127.0.0.1:6080", url)
        assert got == hashlib.sha256(page.read_bytes()).hexdigest()
    st = status(bed, "c", 9192)
    assert st["preconnect_hits"] == 3 and st.get("preconnect_hits_unjoined", 0) == 0, st
    control.kill()


def tfo_passive(bed: Bed) -> int:
    """Connections the server's kernel accepted with data in the SYN."""
    r = bed.run("s", "nstat", "-az", "TcpExtTCPFastOpenPassive")
    for line in r.stdout.splitlines():
        if line.startswith("TcpExtTCPFastOpenPassive"):
            return int(line.split()[1])
    raise AssertionError(f"no TcpExtTCPFastOpenPassive in nstat output: {r.stdout!r}")


@pytest.mark.parametrize("bed", ["default", pytest.param("hywf", marks=pytest.mark.braid_kernel)],
                         indirect=True)
def test_fast_open_repeat_connections_byte_exact(bed: Bed, tmp_path: Path) -> None:
    """With fast_open, repeat connections carry the hello in the SYN (the
    first one only fetches the cookie) and every fetch stays byte-exact.

    Pages of FAST_OPEN_PAGE bytes, not the 8 MiB blob: bulk downloads over
    MPTCP connections opened with Fast Open can crawl because of a kernel
    problem (seen on stock 6.18 and in braid's 6.12; proxy/README.md,
    fast_open), which the option's documentation warns about. A page fits
    in the first receive window, so this checks braid's part: the hello in
    the SYN, the reply, the relay."""
    page = os.urandom(FAST_OPEN_PAGE)
    (bed.dir / "www" / "page.bin").write_bytes(page)
    log = tmp_path / "fastopen-client.log"
    start_second_client(bed, write_secret(tmp_path / "fo.keys", KEY), 4080, "-fast-open", log=log)
    before = tfo_passive(bed)
    for i in range(4):
        got = curl_sha(bed, "--socks5-hostname", "127.0.0.1:4080", f"http://{DEST_NAME}:{WEB_PORT}/page.bin")
        assert got == hashlib.sha256(page).hexdigest(), f"fetch {i} through the fast-open client: {log.read_text()}"
    assert tfo_passive(bed) - before >= 3, "repeat connections did not carry data in the SYN"


def write_gateways(bed: Bed, best: str) -> None:
    """Status file rating gw1 (WAN1) or gw2 (WAN2) best."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    gws = [
        {
            "id": gid,
            "source": src,
            "up": True,
            "backup": False,
            "ewma_ms": 1.0 if gid == best else 9.0,
            "rtt_ms": 1.0,
            "last_change": now,
        }
        for gid, src in (("gw1", CLIENT_W1), ("gw2", CLIENT_W2))
    ]
    bed.gw_file.write_text(json.dumps({"version": 1, "updated": now, "gateways": gws}))


def test_race_delay_gives_best_gateway_a_head_start(bed: Bed, tmp_path: Path) -> None:
    """Racing a best gateway that is slow, not broken: every SYN on WAN1 is
    dropped (it binds and sends, it just never answers). With race_delay
    300 ms the second gateway is tried only after the head start, and wins
    well before WAN1's SYN retransmission (1 s) would have."""
    write_gateways(bed, "gw1")
    bed.run(
        "c",
        "nft",
        "add table inet slowgw; add chain inet slowgw out { type filter hook output priority 0; }; "
        'add rule inet slowgw out oifname "c-w1" tcp flags & (syn | ack) == syn drop',
    )
    start_second_client(
        bed,
        write_secret(tmp_path / "r.keys", KEY),
        5080,
        "-race",
        "-race-delay",
        "300ms",
        "-preconnect",
        "0",
        "-gateway-status-file",
        str(bed.gw_file),
        "-metrics-listen",
        "127.0.0.1:9190",
    )
    (bed.dir / "www" / "small.txt").write_bytes(b"x" * 1000)
    times = []
    for _ in range(5):
        r = bed.run(
            "c",
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{time_total}",
            "--max-time",
            "10",
            "--socks5-hostname",
            "127.0.0.1:5080",
            f"http://{DEST_NAME}:{WEB_PORT}/small.txt",
        )
        times.append(float(r.stdout))
    print("fetch times through a slow best gateway, race_delay 300 ms:", times)
    # Never before the head start; typically well before WAN1's first SYN
    # retransmission (1 s), always long before the 10 s dial timeout after
    # which a client without racing would fall back.
    assert all(t >= 0.3 for t in times) and sorted(times)[2] < 1.0 and max(times) < 3.0, times
    gws = status(bed, "c", 9190)["gateways"]
    assert gws.get("gw2", {}).get("race_wins") == 5 and gws.get("gw1", {}).get("race_wins", 0) == 0, gws


def test_no_plaintext_on_the_wans(bed: Bed) -> None:
    """Packets captured on both WANs during a transfer never contain the
    transferred plaintext, the destination's name or the client id, while
    the capture on the server's destination link (the control) does."""
    marker = b"BRAID-PLAINTEXT-MARKER-0123456789-" * 4096
    (bed.dir / "www" / "marker.txt").write_bytes(marker)
    caps = {(role, dev): bed.dir / f"{dev}.pcap" for role, dev in (("c", "c-w1"), ("c", "c-w2"), ("s", "s-d"))}
    logs = {key: path.with_suffix(".log") for key, path in caps.items()}
    dumps = [
        bed.spawn(
            role,
            ["tcpdump", "--immediate-mode", "-i", dev, "-s", "0", "-U", "-Z", "root", "-w", str(path)],
            log=logs[(role, dev)],
        )
        for (role, dev), path in caps.items()
    ]
    # tcpdump says "listening on" once it captures.
    deadline = time.time() + 10
    while time.time() < deadline and not all(
        log.exists() and "listening on" in log.read_text() for log in logs.values()
    ):
        time.sleep(0.05)
    got = bed.run(
        "c",
        "bash",
        "-c",
        f"set -o pipefail; curl -sSf --max-time 30 --socks5-hostname 127.0.0.1:{SOCKS_PORT} "
        f"http://{DEST_NAME}:{WEB_PORT}/marker.txt | sha256sum",
    ).stdout.split()[0]
    assert got == hashlib.sha256(marker).hexdigest()
    time.sleep(0.3)
    for d in dumps:
        stop_process(d, signal.SIGINT, wait=5)
    wan = b"".join(caps[("c", dev)].read_bytes() for dev in ("c-w1", "c-w2"))
    control = caps[("s", "s-d")].read_bytes()
    print("captured bytes: WANs", len(wan), "destination link", len(control))
    print("tcpdump:", [log.read_text() for log in logs.values()])
    assert len(wan) > len(marker), "the WAN capture missed the transfer"
    assert b"BRAID-PLAINTEXT-MARKER" in control, "the control capture does not show the plaintext"
    for secret in (b"BRAID-PLAINTEXT-MARKER", DEST_NAME.encode(), b"box1", b"GET /marker.txt"):
        assert secret not in wan, f"{secret!r} in clear on a WAN"

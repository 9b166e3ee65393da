"""docs/deploy.md's manual, package-based path, run as written on two fresh Debian 12 systems.

A client box and a proxy, each a fresh copy of the cached Debian 12 root
filesystem, boot with their own systemd (systemd-nspawn) in a topology
that uses the guide's own example addresses: the box's uplinks dsl
(192.168.1.2 via 192.168.1.1) and lte (192.168.8.100 via 192.168.8.1), the
proxy at 198.51.100.7, taken from the guide's gateways.conf and client.json
blocks. braid's package (``packaging/build-deb``) is copied into each
system's /root, then the guide's marked blocks (guide.py) run there in step
order, as an operator runs them as root: apt-get installs the package,
sysctls, gateways.conf, gwsteer's drop-in, the key, braid-proxy's JSON, the
checks, ``systemctl enable --now``, the transparent redirect's nftables,
Tor mode's bridge and client units, braid-openvpn's full tunnel.
Substituted: only the ``<version>`` of the package's file name. Done by the
test where the guide leaves it to the operator: the box's key line appended
to the proxy's server.keys, the bridge's line and the box's OpenVPN keys
copied to the box (the guide: "over SSH"), and the proxy's ``allow_cidrs``
for the stand-in web server, which sits on a documentation address
braid-proxy refuses (a real destination is public).
Then: the units run, gwsteer's gateways are up, a download through the
box's SOCKS port is byte-exact and each uplink, shaped so that one cannot
carry it alone, carries a real share, and the guide's "Checking it works"
commands succeed on the box; web, out of the box's reach before the
redirect, is reached by a plain curl after it; the box's tor completes its
link handshake with the bridge (the line's identity) through braid-pt,
whose MPTCP connection has a subflow through each uplink; braid-openvpn's
full tunnel comes up at both ends, carries a ping, and has a subflow
through each uplink. Then dsl's gateway starts stripping MPTCP's options
from the TCP it forwards, the guide's per-gateway steps run, and a download
through the SOCKS port, now inside the tunnels, is byte-exact and crosses
both uplinks again (without the tunnels one of them would carry nothing).
"""

from __future__ import annotations

import configparser
import ipaddress
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest
from backstop import backstop
from guide import ManualBlock, gateway_states, guide_checks, manual_blocks, read_block_file, write_block_file

from ansible_run import REPO
from booted import BootedSystem, booted_system
from braid_openvpn.config import DEFAULT_INNER_ADDRESS
from braid_testbed.netns import stop_process
from braid_testbed.wait import wait_for
from debian_rootfs import unpacked_rootfs
from netcheck import WEB_ADDRESS, FirewallTopology, box_topology, socks_download, subflow_sources

UNITS = {"client": ["braid-gwsteer-route.service", "mptcp.service", "braid-proxy-client.service",
                    "braid-tor-client.service", "braid-openvpn@client.service"],
         "proxy": ["mptcp.service", "braid-proxy-server.service", "braid-tor-bridge.service",
                   "braid-openvpn@proxy.service"]}
# Tor mode's steps: the bridge's transport port, and where the guide's
# proxy step leaves the clients' line for the operator to copy to the box.
TOR_PT_PORT = 4433
TOR_LINE_ON_PROXY = "root/tor-bridge.line"
TOR_LINE_ON_BOX = "etc/braid/tor-bridge.line"
# tor's bootstrap phase once its link handshake with the bridge is done:
# the bridge proved the identity the line names. The private topology has
# no Tor network beyond the bridge, so the bootstrap goes no further than
# asking it for a consensus.
TOR_HANDSHAKE_DONE_PERCENT = 15
# braid-openvpn's steps: the client's files the guide has the operator copy
# from the proxy's PKI (relative to pki_dir, with client_name box1).
OPENVPN_CLIENT_FILES = ("ca.crt", "issued/{name}.crt", "private/{name}.key", "tls-crypt.key")
# The guide's per-gateway tunnels start at this step; the steps before it
# run first and their checks pass before dsl's gateway starts stripping
# MPTCP's option (kind 30) from the TCP it forwards.
PER_GATEWAY_STEP = 15
STRIP_MPTCP = ["-t", "mangle", "-A", "FORWARD", "-p", "tcp", "-j", "TCPOPTSTRIP", "--strip-options", "30"]
# As the booted pair of test_converge: tbf per uplink (no netem on the host
# kernel), so that one uplink cannot carry the transfer alone.
RATE_MBIT = 40
TRANSFER = 12_000_000
# A step's commands (apt-get makes the venv: the slowest) and the waits after.
STEP_TIMEOUT_S = 300
SETTLE_S = backstop(30)
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _run_step(system: BootedSystem, root: Path, host: str, block: ManualBlock, deb: Path) -> None:
    """One marked block on one host: a file written, or its commands run by sh -e in /root."""
    if block.path is not None:
        write_block_file(root, block.path, block.text)
        return
    script = block.commands_for(host).replace("braid_<version>_amd64.deb", deb.name)
    assert "<version>" not in script, script
    # As root's login shell: none of the test's environment; "y" to apt-get's question.
    ran = system.run("env", "-i", f"PATH={ROOT_PATH}", "HOME=/root", "LANG=C.UTF-8", "sh", "-euxc",
                     f"cd /root\n{script}", timeout=STEP_TIMEOUT_S, input="y\n" * 4)
    assert ran.returncode == 0, f"{host}: step {block.step} failed ({ran.returncode}):\n{script}\n" \
                                f"{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"


def _run_blocks(system: BootedSystem, root: Path, host: str, blocks: list[ManualBlock], deb: Path) -> None:
    for block in blocks:
        _run_step(system, root, host, block, deb)


def uplinks(conf: configparser.ConfigParser) -> list[configparser.SectionProxy]:
    """The guide's gateways.conf's gateways."""
    return [conf[s] for s in conf.sections() if s.startswith("gateway ")]


def _topology(conf: configparser.ConfigParser, proxy_address: str) -> FirewallTopology:
    """box -(wan1)- gw1 -\\ proxy - web, box -(wan2)- gw2 -/, with the guide's addresses."""
    gateways = uplinks(conf)
    assert len(gateways) == 2, conf.sections()
    for uplink in gateways:
        assert uplink["hops"].startswith(uplink["source"].rsplit(".", 1)[0] + "."), dict(uplink)
    return box_topology("md", "box", [(f"{u['source']}/24", u["hops"]) for u in gateways], {"proxy": proxy_address})


@pytest.fixture(scope="module")
def deb(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """braid's package, built by packaging/build-deb from the artifacts."""
    out = tmp_path_factory.mktemp("debs")
    built = subprocess.run([str(REPO / "packaging" / "build-deb"), str(artifacts), str(out)],
                           capture_output=True, text=True, timeout=backstop(300), check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    return Path(built.stdout.splitlines()[-1])


def _wait(what: str, check: Callable[[], object], diagnosis: Callable[[], str]) -> None:
    wait_for(what, check, SETTLE_S, 0.5, diagnosis)


def test_manual_package_path_on_fresh_systems_relays_over_both_gateways(
        deb: Path, rootfs_tarball: Path, tmp_path: Path) -> None:
    start = time.monotonic()
    blocks = manual_blocks()
    assert [b.step for b in blocks] == sorted(b.step for b in blocks) and len(blocks) >= 13, blocks
    conf = configparser.ConfigParser()
    conf.read_string(read_block_file(blocks, "client", "/etc/braid/gateways.conf"))
    client_json = json.loads(read_block_file(blocks, "client", "/etc/braid/client.json"))
    proxy_address = client_json["server"].rsplit(":", 1)[0]
    assert conf["gwsteer"]["probe_target"] == proxy_address
    ids = [s.removeprefix("gateway ") for s in conf.sections() if s.startswith("gateway ")]

    url = f"http://{WEB_ADDRESS}:8080/blob"
    site = tmp_path / "site"
    site.mkdir()
    (site / "blob").write_bytes(os.urandom(TRANSFER))
    topo = _topology(conf, proxy_address)
    with unpacked_rootfs(rootfs_tarball, tmp_path / "mbox") as box_root, \
            unpacked_rootfs(rootfs_tarball, tmp_path / "mproxy") as proxy_root, topo.up():
        roots = {"client": box_root, "proxy": proxy_root}
        for root in roots.values():
            (root / "root" / deb.name).write_bytes(deb.read_bytes())
        for n in (1, 2):
            topo["box"].run(["tc", "qdisc", "replace", "dev", f"wan{n}", "root", "tbf", "rate", f"{RATE_MBIT}mbit",
                             "burst", "32kb", "latency", "50ms"])
            topo[f"gw{n}"].run(["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate",
                                f"{RATE_MBIT}mbit", "burst", "32kb", "latency", "50ms"])
        web = topo["web"].popen(["python3", "-m", "http.server", "--bind", WEB_ADDRESS, "8080",
                                 "--directory", str(site)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        topo["web"].wait_listening(8080, WEB_ADDRESS, proc=web)
        with booted_system(proxy_root, topo.ns_name("proxy"), tmp_path / "proxy.log") as proxy, \
                booted_system(box_root, topo.ns_name("box"), tmp_path / "box.log") as box:
            systems = {"client": box, "proxy": proxy}
            for system in systems.values():
                system.wait_until_up()
            print(f"manual deploy: both systems booted ({time.monotonic() - start:.0f} s)")
            for host, system in systems.items():
                # Debian 12's mptcpd ships no plugin: its enabled mptcp.service
                # fails at boot, so the guide's "enable --now" starts it with
                # gwsteer. A running one would need a restart (the guide says so).
                assert not system.is_active("mptcp.service"), (host, system.journal("mptcp.service"))

            def follow_step(step: int) -> None:
                """One of the guide's steps, then what it leaves to the operator there."""
                todo = [(host, b) for b in blocks if b.step == step for host in b.hosts]
                # Both machines at once, each host's blocks in the guide's order.
                with ThreadPoolExecutor(2) as pool:
                    for future in [pool.submit(_run_blocks, systems[h], roots[h], h,
                                               [b for host, b in todo if host == h], deb)
                                   for h in sorted({h for h, _ in todo})]:
                        future.result()
                if step == 5:
                    # The guide: "append that line to the proxy's server.keys
                    # over SSH"; the test copies it (the modes: step 7).
                    line = (box_root / "etc/braid/client.keys").read_text()
                    with (proxy_root / "etc/braid/server.keys").open("a") as keys:
                        keys.write(line)
                if step == 6:
                    server = proxy_root / "etc/braid/server.json"
                    server.write_text(json.dumps({**json.loads(server.read_text()),
                                                  "allow_cidrs": [f"{WEB_ADDRESS}/32"]}))
                if step == 10:
                    # The guide: "copy /root/tor-bridge.line to the box (over
                    # SSH)"; the test copies it (its owner and mode: step 11).
                    line = (proxy_root / TOR_LINE_ON_PROXY).read_text()
                    want = rf"braid {re.escape(proxy_address)}:{TOR_PT_PORT} [0-9A-F]{{40}} pub=\S+[^\n]*\n"
                    assert re.fullmatch(want, line), line
                    (box_root / TOR_LINE_ON_BOX).write_text(line)
                if step == 13:
                    # The guide: copy the box's four files to the box (over SSH).
                    openvpn = json.loads(read_block_file(blocks, "client", "/etc/braid/openvpn.json"))
                    pki = Path(openvpn.get("pki_dir", "/etc/braid/openvpn/pki")).relative_to("/")
                    for name in OPENVPN_CLIENT_FILES:
                        rel = pki / name.format(name=openvpn["client_name"])
                        (box_root / rel).parent.mkdir(parents=True, exist_ok=True)
                        (box_root / rel).write_bytes((proxy_root / rel).read_bytes())
                if step == 8:
                    # The gateways route to the proxy only: without the
                    # redirect (step 9) web is out of the box's reach.
                    direct, _ = socks_download(topo["box"], url, tmp_path / "direct", timeout_s=5, socks=None)
                    assert direct.returncode != 0, ("web reachable without braid", direct.stdout)
                print(f"manual deploy: step {step} done ({time.monotonic() - start:.0f} s)")

            steps = sorted({b.step for b in blocks})
            assert PER_GATEWAY_STEP in steps, steps
            for step in steps:
                if step < PER_GATEWAY_STEP:
                    follow_step(step)

            for host, system in systems.items():
                for unit in UNITS[host]:
                    _wait(f"{host}: {unit} active", partial(system.is_active, unit), partial(system.journal, unit))
                ns = topo["box" if host == "client" else "proxy"]
                assert ns.run(["sysctl", "-n", "net.mptcp.pm_type"]).stdout.strip() == "1", host
                failed = [u for u in system.failed_units() if u.startswith("braid-") or u == "mptcp.service"]
                assert failed == [], (host, {u: system.journal(u) for u in failed})
            _wait(f"gwsteer: {ids} up", lambda: gateway_states(box) == dict.fromkeys(ids, True),
                  lambda: box.run("cat", "/run/braid/gateways.json").stdout + box.journal("mptcp.service"))

            fetched = tmp_path / "fetched"
            got, received = socks_download(topo["box"], url, fetched, ("wan1", "wan2"))
            assert got.returncode == 0 and got.stdout == str(TRANSFER), \
                (got.stdout, got.stderr, box.journal("braid-proxy-client.service"),
                 proxy.journal("braid-proxy-server.service"))
            assert fetched.read_bytes() == (site / "blob").read_bytes(), "the download is not byte-exact"
            print(f"manual deploy: bytes received per uplink {dict(zip(ids, received, strict=True))}")
            # Each uplink carries a real share: one 40 Mbit/s path saturates.
            assert min(received) > TRANSFER // 6, received
            # The guide's redirect (step 9): the box's plain TCP goes through braid.
            plain = tmp_path / "plain"
            got, _ = socks_download(topo["box"], url, plain, socks=None)
            assert got.returncode == 0 and plain.read_bytes() == (site / "blob").read_bytes(), \
                (got.stdout, got.stderr, box.run("nft", "list", "ruleset").stdout)

            # Tor mode: the box's tor reaches the bridge through braid-pt,
            # whose MPTCP connection has a subflow through each uplink.
            def tor_progress() -> int:
                done = re.findall(r"tor: Bootstrapped (\d+)%", box.journal("braid-tor-client.service"))
                return max(map(int, done), default=0)

            _wait("the box's tor: link handshake with the bridge done",
                  lambda: tor_progress() >= TOR_HANDSHAKE_DONE_PERCENT,
                  lambda: box.journal("braid-tor-client.service") + proxy.journal("braid-tor-bridge.service"))
            sources = {u["source"] for u in uplinks(conf)}
            _wait(f"braid-pt's subflows to the bridge leave through {sorted(sources)}",
                  lambda: subflow_sources(topo["box"], TOR_PT_PORT) == sources,
                  lambda: topo["box"].run(["ss", "-tni", "dst", f":{TOR_PT_PORT}"]).stdout)
            print(f"manual deploy: Tor mode bootstrapped to {tor_progress()} % through the bridge, "
                  f"braid-pt's subflows from {sorted(sources)}")

            # braid-openvpn's full tunnel: up at both ends, it carries a ping
            # to the proxy's end, and its MPTCP connection has a subflow
            # through each uplink.
            full = json.loads(read_block_file(blocks, "client", "/etc/braid/openvpn.json"))["full_tunnel"]
            proxy_end = str(next(ipaddress.ip_network(full["subnet"]).hosts()))
            for host, system in systems.items():
                unit = f"braid-openvpn@{host}.service"
                _wait(f"{host}: {unit} reports the full tunnel up",
                      partial(system.journal_has, unit, "tunnel full up"), partial(system.journal, unit))
            ping = topo["box"].run(["ping", "-c", "3", "-W", "2", proxy_end], check=False)
            assert ping.returncode == 0, (ping.stdout, box.journal("braid-openvpn@client.service"))
            _wait(f"the full tunnel's subflows leave through {sorted(sources)}",
                  lambda: subflow_sources(topo["box"], full["port"]) == sources,
                  lambda: topo["box"].run(["ss", "-tni", "dst", f":{full['port']}"]).stdout)
            print(f"manual deploy: the full tunnel up, {proxy_end} answers through it")

            # "Checking it works", as an operator runs it on the box.
            out = {}
            for command in guide_checks():
                ran = box.run("sh", "-c", command, timeout=30)
                assert ran.returncode == 0, (command, ran.stdout, ran.stderr)
                out[command] = ran.stdout
            assert all(g in out["braid status"] for g in ids), out["braid status"]
            gwsteer_cli = out["gwsteer-cli"]
            assert all(re.search(rf"\b{g}\b.*\bup\b", gwsteer_cli) for g in ids), gwsteer_cli
            assert "tcp-ulp-mptcp" in out["ss -tni state established"], out["ss -tni state established"]
            journal = next(v for k, v in out.items() if k.startswith("journalctl "))
            # The first subflow leaves by the main table's route (dsl); gwsteer joins the others.
            assert "opening subflow via " in journal and "SOCKS5 listening" in journal, journal[-3000:]

            # dsl's network strips MPTCP's options: an MPTCP connection whose
            # first subflow leaves by dsl (the main table's uplink) falls back
            # to plain TCP there, and a join through dsl is refused, so one
            # uplink would carry everything. The guide's per-gateway steps.
            strip = topo["gw1"].run(["iptables", *STRIP_MPTCP], check=False)
            assert strip.returncode == 0, f"gw1: no TCPOPTSTRIP: {strip.stderr}"
            for step in steps:
                if step >= PER_GATEWAY_STEP:
                    follow_step(step)
            per_gateway = json.loads(next(b.text for b in blocks if b.step >= PER_GATEWAY_STEP
                                          and b.path == "/etc/braid/openvpn.json"))["per_gateway"]
            tunnels = sorted(f"{t['gateway']}-tun" for t in per_gateway["tunnels"])
            assert tunnels == sorted(f"{g}-tun" for g in ids), tunnels
            _wait(f"box: the per-gateway tunnels {tunnels} up",
                  partial(box.journal_has, "braid-openvpn@client.service",
                          *(f"tunnel gw-{g} up" for g in ids)),
                  partial(box.journal, "braid-openvpn@client.service"))
            _wait(f"gwsteer: {tunnels} up",
                  lambda: sorted(k for k, v in gateway_states(box).items() if k in tunnels and v) == tunnels,
                  lambda: box.run("cat", "/run/braid/gateways.json").stdout + box.journal("mptcp.service"))
            _wait("braid-proxy-client.service active", partial(box.is_active, "braid-proxy-client.service"),
                  partial(box.journal, "braid-proxy-client.service"))
            tunnelled = tmp_path / "tunnelled"
            got, received = socks_download(topo["box"], url, tunnelled, ("wan1", "wan2"))
            assert got.returncode == 0 and got.stdout == str(TRANSFER), \
                (got.stdout, got.stderr, box.journal("braid-proxy-client.service"),
                 box.journal("mptcp.service")[-3000:])
            assert tunnelled.read_bytes() == (site / "blob").read_bytes(), "the tunnelled download is not byte-exact"
            print(f"manual deploy: dsl strips MPTCP; through the per-gateway tunnels, bytes received per uplink "
                  f"{dict(zip(ids, received, strict=True))}")
            assert min(received) > TRANSFER // 6, received
            # Connections to the inner address get their joins through the
            # tunnels only (the first subflow takes the tunnels' route).
            inner = per_gateway.get("inner_address", DEFAULT_INNER_ADDRESS)
            journal = box.journal("mptcp.service", lines=2000)
            joined_via = re.findall(rf"opening subflow via (\S+): \S+ \(id \d+\) -> {re.escape(inner)}\n", journal)
            assert joined_via and set(joined_via) <= set(tunnels), journal[-3000:]
        stop_process(web)
    print(f"manual deploy: passed in {time.monotonic() - start:.0f} s")

"""A bad inventory fails before anything changes, and the message names the variable.

Every bad variable gets its own host, all in ONE inventory whose hosts are
the same fresh Debian root filesystem, and one ``validate.yml`` run (the
checks site.yml runs first) refuses them all at once. Each case host must
fail with a message naming its variable; two control hosts (a client and
a proxy with good settings) must pass, so a check that refuses everything
cannot hide here. ``any_errors_fatal`` is turned off for that run only,
so one host's failure does not stop the others' checks.

A second run, concurrent with the first, goes through the operator's entry
point ``site.yml`` (any_errors_fatal on, as shipped): a bad proxy setting
must stop the run before the good client box is touched.

"Nothing changed" is checked on the target itself: a fingerprint of every
file's metadata in the root, taken before and after both runs. A secret
given in a bad form never appears in the output.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ansible_run import PlaybookResult, chroot_host, run_playbook, write_inventory
from debian_rootfs import unpacked_rootfs

GATEWAYS = [
    {"id": "gw1", "source": "10.1.1.2", "hops": ["10.1.1.1"]},
    {"id": "gw2", "source": "10.1.2.2", "hops": ["10.1.2.1"]},
]
PROXY_ADDRESS = "198.51.100.7"
# A key-shaped secret with one bad digit: must be refused and never printed.
BAD_PSK = "z" + "0123456789abcdef" * 4
# (case id = host name, side, host vars, text the host's failure must show).
# A value of None removes the variable (the role's default applies).
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("missing-proxy-address", "client", {"braid_proxy_address": None}, "braid_proxy_address"),
    ("unknown-scheduler", "client", {"braid_mptcp_scheduler": "fastest"}, "braid_mptcp_scheduler"),
    # Kernel packages that are not on the controller, or not of the release named.
    ("kernel-deb-missing", "client", {"braid_kernel_debs": ["/nonexistent/linux-image-6.12.117-braid_1_amd64.deb"],
                                      "braid_kernel_release": "6.12.117-braid"}, "braid_kernel_debs"),
    ("kernel-release-bad", "client", {"braid_kernel_debs": ["/nonexistent/x.deb"], "braid_kernel_release": "latest"},
     "braid_kernel_release"),
    ("gateways-not-a-list", "client", {"braid_gwsteer_gateways": "gw1"}, "braid_gwsteer_gateways"),
    ("gateways-empty", "client", {"braid_gwsteer_gateways": []}, "braid_gwsteer_gateways"),
    ("gateway-duplicate-id", "client", {"braid_gwsteer_gateways": [GATEWAYS[0], {**GATEWAYS[1], "id": "gw1"}]},
     "braid_gwsteer_gateways"),
    ("gateway-missing-hops", "client", {"braid_gwsteer_gateways": [{"id": "gw1", "source": "10.1.1.2"}]}, "hops"),
    ("gateway-neither-source-nor-interface", "client", {"braid_gwsteer_gateways": [{"id": "gw1", "hops": "10.1.1.1"}]},
     "either source"),
    # Rendered into gateways.conf as interface = ... and refused by gwsteer-check.
    ("gateway-interface-name-too-long", "client",
     {"braid_gwsteer_gateways": [GATEWAYS[0], {"id": "lte", "interface": "wwan0-much-too-long", "family": "ipv4"}]},
     "interface"),
    # Only gwsteer's own validator knows this one: the message carries its words.
    ("gateway-bad-source", "client", {"braid_gwsteer_gateways": [{**GATEWAYS[0], "source": "10.1.1.300"}]},
     "[gateway gw1] source"),
    ("malformed-key", "client", {"braid_proxy_psk": BAD_PSK}, "braid_proxy_psk is malformed"),
    ("bad-client-id", "client", {"braid_proxy_client_id": "box 1"}, "braid_proxy_client_id"),
    ("bad-proxy-wan-interface", "proxy", {"braid_firewall_wan_interface": "eth0; drop"},
     "braid_firewall_wan_interface"),
    ("ssh-source-prefix-too-long", "proxy", {"braid_firewall_ssh_sources": ["10.0.0.0/33"]},
     "braid_firewall_ssh_sources IPv4 addresses or CIDRs"),
    ("nat-source-octet-too-large", "client", {"braid_firewall_nat_sources": ["10.0.300.0/24"]},
     "braid_firewall_ssh_sources IPv4 addresses or CIDRs"),
    # braid-proxy's own rules, run on the controller: its words.
    ("proxy-settings-zero-conns", "proxy", {"braid_proxy_server_settings": {"max_conns": 0}},
     "braid_proxy_server_settings: braid-proxy: config: server.max_conns: must be at least 1"),
    ("client-settings-misspelt", "client", {"braid_proxy_client_settings": {"preconect": 4}},
     "braid_proxy_client_settings: braid-proxy: json: unknown field 'preconect'"),
]
TOR_FPR = "9030062703AA38B13A59124F7BBC3D40DD331024"
TOR_KEY = "5eed" * 16
TOR_PUB = "C6axQRLH6o6K4CjtOHIoi7aDECiDTestJCfCwkM8sSs"
# Tor mode on a client box: both of these are needed for its bridge line.
TOR_CLIENT = {"braid_tor_enabled": True, "braid_tor_bridge_fingerprint": TOR_FPR, "braid_tor_bridge_pub": TOR_PUB}
# Tor mode with several bridges; a user's key-shaped secret with one bad
# digit must be refused and never printed.
TOR_BRIDGE: dict[str, Any] = {"address": PROXY_ADDRESS, "port": 4433, "fingerprint": TOR_FPR, "pub": TOR_PUB}
TOR_BRIDGE2: dict[str, Any] = {"address": "203.0.113.9", "port": 443, "fingerprint": "B" * 40, "pub": TOR_PUB,
               "id": "box1", "key": "5eed" * 8}
BAD_USER_KEY = "z" + "5eed" * 8
TOR_BRIDGES = {"braid_tor_enabled": True, "braid_tor_bridges": [TOR_BRIDGE, TOR_BRIDGE2]}
OPENVPN: dict[str, Any] = {
    "gateways": {"gw1": {"source": "10.1.1.2", "wan": "10.1.1.0/24"}},
    "full_tunnel": {"subnet": "10.201.0.0/30", "lan": ["10.50.0.0/24"]},
}
TUNNELS = {"tunnels": [{"gateway": "gw1", "subnet": "10.200.1.0/30", "port": 1195}]}
CASES += [
    ("tor-missing-fingerprint", "client", {**TOR_CLIENT, "braid_tor_bridge_fingerprint": None},
     "braid_tor_bridge_fingerprint must be the bridge's identity fingerprint"),
    ("tor-missing-pub", "client", {**TOR_CLIENT, "braid_tor_bridge_pub": None},
     "braid_tor_bridge_pub is missing or malformed"),
    ("tor-malformed-pub", "client", {**TOR_CLIENT, "braid_tor_bridge_pub": "abcd"},
     "braid_tor_bridge_pub is missing or malformed"),
    ("tor-old-shared-key", "client", {**TOR_CLIENT, "braid_tor_bridge_key": TOR_KEY},
     "braid_tor_bridge_key is gone"),
    ("tor-malformed-static-key", "proxy", {"braid_tor_enabled": True, "braid_tor_bridge_static_key": TOR_KEY[:40]},
     "braid_tor_bridge_static_key is malformed"),
    ("tor-bridge-name", "client", {**TOR_CLIENT, "braid_tor_bridge_address": "relay.example.net"},
     "braid_tor_bridge_address must be the bridge's IP address"),
    ("tor-bad-nickname", "proxy", {"braid_tor_enabled": True, "braid_tor_bridge_nickname": "my-bridge"},
     "braid_tor_bridge_nickname"),
    ("tor-bridges-element-not-a-mapping", "client", {**TOR_BRIDGES, "braid_tor_bridges": [TOR_BRIDGE, "oops"]},
     "braid_tor_bridges[1]: must be a mapping"),
    ("tor-bridges-host-name", "client",
     {**TOR_BRIDGES, "braid_tor_bridges": [TOR_BRIDGE, {**TOR_BRIDGE2, "address": "relay.example.net"}]},
     "braid_tor_bridges[1]: address must be the bridge's IP address"),
    ("tor-bridges-same-address", "client",
     {**TOR_BRIDGES, "braid_tor_bridges": [TOR_BRIDGE, {**TOR_BRIDGE2, "address": PROXY_ADDRESS, "port": "4433"}]},
     f"braid_tor_bridges[1]: bridge {PROXY_ADDRESS}:4433 is already in an earlier element"),
    ("tor-bridges-same-fingerprint", "client",
     {**TOR_BRIDGES, "braid_tor_bridges": [TOR_BRIDGE, {**TOR_BRIDGE2, "fingerprint": TOR_FPR.lower()}]},
     f"braid_tor_bridges[1]: fingerprint {TOR_FPR} is already in an earlier element"),
    ("tor-bridges-bad-user-key", "client",
     {**TOR_BRIDGES, "braid_tor_bridges": [TOR_BRIDGE, {**TOR_BRIDGE2, "key": BAD_USER_KEY}]},
     "braid_tor_bridges[1]: key must be hex"),
    ("tor-bridges-id-without-key", "client",
     {**TOR_BRIDGES, "braid_tor_bridges": [{k: v for k, v in TOR_BRIDGE2.items() if k != "key"}]},
     "braid_tor_bridges[0]: id and key go together"),
    ("tor-bridges-and-single-bridge", "client", {**TOR_CLIENT, **TOR_BRIDGES}, "braid_tor_bridges replaces"),
    ("tor-enabled-not-bool", "client", {**TOR_CLIENT, "braid_tor_enabled": "sometimes"}, "braid_tor_enabled"),
    # braid-openvpn's own validator, run on the controller: its words.
    ("openvpn-unknown-gateway", "client",
     {"braid_openvpn_enabled": True,
      "braid_openvpn_settings": {**OPENVPN, "per_gateway": {"tunnels": [{**TUNNELS["tunnels"][0],
                                                                         "gateway": "gw9"}]}}},
     "braid_openvpn_settings: per_gateway.tunnels[0].gateway: unknown gateway 'gw9'"),
    # Valid for braid-openvpn, but gwsteer would ignore kernel endpoints.
    ("openvpn-kernel-endpoints-under-gwsteer", "client",
     {"braid_openvpn_enabled": True,
      "braid_openvpn_settings": {**OPENVPN, "per_gateway": {**TUNNELS, "path_manager": "kernel"}}},
     "braid_openvpn_settings.per_gateway.path_manager: braid's client box runs gwsteer"),
    ("openvpn-subnet-overlaps-wan", "proxy",
     {"braid_openvpn_enabled": True,
      "braid_openvpn_settings": {**OPENVPN, "full_tunnel": {"subnet": "10.1.1.0/30", "lan": ["10.50.0.0/24"]}}},
     "braid_openvpn_settings: full_tunnel.subnet: 10.1.1.0/30 overlaps gateways.gw1.wan"),
]
GOOD_CLIENT = "good-client"
GOOD_PROXY = "good-proxy"
GOOD_CLIENT_BRIDGES = "good-client-bridges"  # braid_tor_bridges in place of the single bridge
# The good hosts run the Tor-mode and braid-openvpn checks too.
GOOD_OPENVPN = {"braid_openvpn_enabled": True, "braid_openvpn_settings": OPENVPN}
SHARED_VARS = {"braid_start_services": False}


@dataclass
class Runs:
    every_case: PlaybookResult  # validate.yml, one host per case plus the good ones
    via_site: PlaybookResult  # site.yml, a bad proxy setting and a good client box
    before: str  # the target's fingerprint before both runs
    after: str


def root_fingerprint(root: Path) -> str:
    """Hash of every entry's path, type, mode, owner, size, mtime and ctime (and link target).

    A second or so for a minimal Debian; any write, chmod, chown, create or
    delete under ``root`` changes it (ctime moves on metadata changes too).
    """
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = os.path.join(directory, name)
            st = os.lstat(path)
            link = os.readlink(path) if os.path.islink(path) else ""
            digest.update(f"{os.path.relpath(path, root)}\0{st.st_mode}\0{st.st_uid}\0{st.st_gid}\0"
                          f"{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{link}\n".encode())
    return digest.hexdigest()


def _host(root: Path, artifacts: Path, side: str, case_vars: dict[str, Any]) -> dict[str, Any]:
    host_vars: dict[str, Any] = {"braid_proxy_address": PROXY_ADDRESS, "braid_artifacts_dir": str(artifacts)}
    if side == "client":
        host_vars["braid_gwsteer_gateways"] = GATEWAYS
    host_vars.update(case_vars)
    return chroot_host(root, **{k: v for k, v in host_vars.items() if v is not None})


@pytest.fixture(scope="module")
def root(rootfs_tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One Debian root that every host of both runs points at: none may change it."""
    with unpacked_rootfs(rootfs_tarball, tmp_path_factory.mktemp("invalid") / "root") as where:
        yield where


@pytest.fixture(scope="module")
def runs(root: Path, artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    base = tmp_path_factory.mktemp("invalid-inventories")
    (base / "all").mkdir()
    (base / "site").mkdir()
    all_cases = write_inventory(
        base / "all" / "inventory.yml",
        {name: _host(root, artifacts, side, case_vars) for name, side, case_vars, _ in CASES if side == "client"}
        | {GOOD_CLIENT: _host(root, artifacts, "client", {**TOR_CLIENT, **GOOD_OPENVPN}),
           GOOD_CLIENT_BRIDGES: _host(root, artifacts, "client", TOR_BRIDGES)},
        {name: _host(root, artifacts, side, case_vars) for name, side, case_vars, _ in CASES if side == "proxy"}
        | {GOOD_PROXY: _host(root, artifacts, "proxy", {"braid_tor_enabled": True, **GOOD_OPENVPN})},
        SHARED_VARS,
    )
    site = write_inventory(
        base / "site" / "inventory.yml",
        {"box1": _host(root, artifacts, "client", {})},
        {"relay": _host(root, artifacts, "proxy", {"braid_firewall_wan_interface": "eth0; drop"})},
        SHARED_VARS,
    )
    before = root_fingerprint(root)
    # Two ansible-playbook processes side by side: the machine has two cores.
    with ThreadPoolExecutor(max_workers=2) as pool:
        every_case = pool.submit(run_playbook, "validate.yml", all_cases,
                                 extra_env={"ANSIBLE_ANY_ERRORS_FATAL": "False"})
        via_site = pool.submit(run_playbook, "site.yml", site)
        return Runs(every_case.result(), via_site.result(), before, root_fingerprint(root))


@pytest.mark.parametrize(("host", "expected"), [(c[0], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_bad_variable_is_refused_naming_it(
    runs: Runs, host: str, expected: str,
) -> None:
    result = runs.every_case
    assert not result.ok, result.output
    assert result.recap[host]["failed"] == 1, result.output
    assert expected in result.failures(host), result.output


def test_good_settings_pass_the_same_checks(runs: Runs) -> None:
    result = runs.every_case
    for host in (GOOD_CLIENT, GOOD_CLIENT_BRIDGES, GOOD_PROXY):
        assert result.recap[host]["failed"] == 0 and result.recap[host]["ok"] > 0, result.output


def test_site_yml_stops_every_host_on_a_bad_proxy_setting(
        runs: Runs) -> None:
    """site.yml checks the whole inventory first: the client box is not converged."""
    result = runs.via_site
    assert not result.ok, result.output
    assert "braid_firewall_wan_interface" in result.failures("relay"), result.output
    assert result.recap["box1"]["failed"] == 0, "the client box's settings are good: only the proxy's must stop it"
    assert "PLAY [Braid client box]" not in result.output, "site.yml went on to converge the client box"


def test_nothing_changed_on_the_target(runs: Runs) -> None:
    for result in (runs.every_case, runs.via_site):
        assert all(counts["changed"] == 0 for counts in result.recap.values()), result.output
    assert runs.before == runs.after, "a failed run changed the target root filesystem"


def test_secret_never_printed(runs: Runs) -> None:
    assert BAD_PSK not in runs.every_case.output
    # Refused Tor keys (the old shared one, a short static one) are not shown.
    assert TOR_KEY not in runs.every_case.output and TOR_KEY[:40] not in runs.every_case.output
    # Nor a user's key in braid_tor_bridges, good or refused.
    assert TOR_BRIDGE2["key"] not in runs.every_case.output and BAD_USER_KEY not in runs.every_case.output


def test_fingerprint_sees_changes(tmp_path: Path) -> None:
    """The fingerprint above would notice a file written, chmodded or created."""
    (tmp_path / "etc").mkdir()
    conf = tmp_path / "etc" / "conf"
    conf.write_text("a")
    seen = {root_fingerprint(tmp_path)}
    # Another size: a same-size rewrite within one clock tick keeps mtime
    # (the real check has seconds between its fingerprints).
    conf.write_text("bb")
    seen.add(root_fingerprint(tmp_path))
    conf.chmod(0o600)
    seen.add(root_fingerprint(tmp_path))
    (tmp_path / "etc" / "new").mkdir()
    seen.add(root_fingerprint(tmp_path))
    assert len(seen) == 4

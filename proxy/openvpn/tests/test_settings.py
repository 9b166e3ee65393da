"""braid-openvpn's validator, PKI, generated files and refusals (no root needed).

Bad input must be refused before anything starts, naming the setting: the
CLI cases check that ``run`` exits 2 and leaves no run directory, config or
process behind.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from braid_openvpn.config import ConfigError, parse
from braid_openvpn.pki import PkiError, check_keys, create, easyrsa, paths
from braid_openvpn.render import instances
from braid_openvpn.runner import Tunnels
from braid_testbed.netns import Namespace
from braid_testbed.ovpnnet import PKG, REPO, settings


def _no_easyrsa() -> str | None:
    try:
        easyrsa()
    except PkiError as err:
        return str(err)
    return None


needs_pki = pytest.mark.skipif(_no_easyrsa() is not None, reason=_no_easyrsa() or "")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if _no_easyrsa():
        pytest.skip(_no_easyrsa() or "")
    d = tmp_path_factory.mktemp("pki") / "pki"
    create(d, "box", "proxy")
    return d


def good(tmp: Path, pki: Path | None = None) -> dict[str, Any]:
    return settings(pki or tmp / "pki", tmp / "run")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation of the settings at a dotted path (``a.b[1].c``)."""
    def apply(s: dict[str, Any]) -> None:
        obj: Any = s
        parts = path.replace("[", ".").replace("]", "").split(".")
        for p in parts[:-1]:
            obj = obj[int(p)] if p.isdigit() else obj[p]
        last = parts[-1]
        if value is _DELETE:
            del obj[last]
        elif last.isdigit():
            obj[int(last)] = value
        else:
            obj[last] = value
    return apply


_DELETE = object()

BAD = [
    ("per_gateway.tunnels[1].gateway", "gw9", "per_gateway.tunnels[1].gateway: unknown gateway 'gw9'"),
    ("per_gateway.tunnels[0].subnet", "10.1.0.4/30",
     "per_gateway.tunnels[0].subnet: 10.1.0.4/30 overlaps gateways.gw1.wan = 10.1.0.0/24 (the WAN of gateway gw1)"),
    ("per_gateway.tunnels[1].subnet", "10.200.1.0/30", "per_gateway.tunnels[1].subnet: 10.200.1.0/30 overlaps "
                                                        "per_gateway.tunnels[0].subnet"),
    ("per_gateway.tunnels[1].subnet", "10.200.2.0/31", "at most /30"),
    ("per_gateway.tunnels[1].subnet", "10.200.2.1/30", "per_gateway.tunnels[1].subnet: not an IPv4 network"),
    ("per_gateway.tunnels[1].port", 1195, "per_gateway.tunnels[1].port: 1195 already used"),
    ("per_gateway.tunnels[0].port", 70000, "per_gateway.tunnels[0].port: must be a port number"),
    ("per_gateway.inner_address", "10.2.0.9", "per_gateway.inner_address: 10.2.0.9/32 overlaps gateways.gw2.wan"),
    ("full_tunnel.subnet", "10.2.0.128/30", "full_tunnel.subnet: 10.2.0.128/30 overlaps gateways.gw2.wan"),
    ("full_tunnel.lan", ["10.200.0.0/16"], "full_tunnel.lan[0]: 10.200.0.0/16 overlaps per_gateway"),
    ("full_tunnel.nat_out", "eth0; rm", "full_tunnel.nat_out: must be an interface name"),
    ("gateways.gw1.source", "10.2.0.2", "gateways.gw1.source: 10.2.0.2 is not inside gateways.gw1.wan"),
    ("gateways.gw1.source", "not-an-ip", "gateways.gw1.source: not an IPv4 address"),
    ("proxy_address", "10.1.0.9", "proxy_address: 10.1.0.9 lies inside gateways.gw1.wan"),
    ("per_gateway.tunnelz", [], "per_gateway.tunnelz: unknown setting"),
    ("per_gateway.path_manager", "mptcpd", "per_gateway.path_manager: must be one of kernel, gwsteer"),
    ("proxy_address", _DELETE, "proxy_address: missing"),
    ("tun_mtu", 100, "tun_mtu: must be 576-9000"),
    ("client_name", "../../etc/x", "client_name: must be a certificate name"),
]


@pytest.mark.parametrize(("setting", "value", "message"), BAD, ids=[f"{b[0]}={b[1]!r}"[:60] for b in BAD])
def test_bad_setting_is_refused_naming_it(tmp_path: Path, setting: str, value: Any, message: str) -> None:
    s = copy.deepcopy(good(tmp_path))
    _set(setting, value)(s)
    with pytest.raises(ConfigError) as err:
        parse(s)
    assert message in str(err.value)


def test_good_settings_and_derived_names(tmp_path: Path) -> None:
    cfg = parse(good(tmp_path))
    assert cfg.modes() == ["per-gateway", "full-tunnel"]
    assert cfg.per_gateway is not None
    t1, t2 = cfg.per_gateway.tunnels
    assert (t1.dev, str(t1.client_ip), str(t1.proxy_ip), t1.table, t1.endpoint_id) == (
        "ovpn-gw1", "10.200.1.2", "10.200.1.1", 201, 101)
    assert (t2.gateway.id, str(t2.gateway.source), t2.port) == ("gw2", "10.2.0.2", 1196)


@needs_pki
def test_pki_files_are_private_and_an_existing_pki_is_kept(pki: Path) -> None:
    assert stat.S_IMODE(pki.stat().st_mode) == 0o700
    for key in [*(pki / "private").iterdir(), pki / "tls-crypt.key"]:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    before = (pki / "private" / "box.key").read_bytes()
    with pytest.raises(PkiError, match="already holds a PKI"):
        create(pki, "box", "proxy")
    assert (pki / "private" / "box.key").read_bytes() == before


@needs_pki
def test_generated_configs_bind_each_tunnel_to_its_gateway(tmp_path: Path, pki: Path) -> None:
    cfg = parse(good(tmp_path, pki))
    client = {i.name: i for i in instances(cfg, "client", paths(cfg, "client"), cfg.modes())}
    proxy = {i.name: i for i in instances(cfg, "proxy", paths(cfg, "proxy"), cfg.modes())}
    assert sorted(client) == sorted(proxy) == ["full", "gw-gw1", "gw-gw2"]
    c1 = client["gw-gw1"].config.splitlines()
    for line in ("proto udp", "remote 10.9.0.2 1195", "local 10.1.0.2", "ifconfig 10.200.1.2 10.200.1.1",
                 "tls-client", "remote-cert-tls server", "verify-x509-name proxy name", f"key {pki}/private/box.key"):
        assert line in c1, line
    up = client["gw-gw1"].hooks["gw-gw1-up.sh"]
    assert "ip mptcp endpoint add 10.200.1.2 id 101 dev ovpn-gw1 subflow" in up
    assert "ip route replace 10.200.0.1/32 dev ovpn-gw1 table 201" in up
    p2 = proxy["gw-gw2"].config.splitlines()
    assert "local 10.9.0.2" in p2 and "lport 1196" in p2 and "tls-server" in p2 and "verify-x509-name box name" in p2
    assert client["full"].mptcp and proxy["full"].mptcp and "proto tcp-client" in client["full"].config
    assert "ip route replace default dev ovpn-full table 250" in client["full"].hooks["full-up.sh"]

    tunnels = Tunnels(cfg, "client")
    tunnels.write_files()
    run = tmp_path / "run"
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    assert stat.S_IMODE((run / "gw-gw1.conf").stat().st_mode) == 0o600
    assert stat.S_IMODE((run / "gw-gw1-up.sh").stat().st_mode) == 0o700


@needs_pki
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_key_others_can_read_is_refused(tmp_path: Path, pki: Path, mode: int) -> None:
    cfg = parse(good(tmp_path, pki))
    key = paths(cfg, "client").key
    try:
        key.chmod(mode)
        with pytest.raises(ConfigError, match=r"pki_dir: .*box.key is readable by others"):
            check_keys(paths(cfg, "client"))
    finally:
        key.chmod(0o600)
    check_keys(paths(cfg, "client"))


@needs_pki
@pytest.mark.parametrize(("which", "content", "message"), [
    ("tls_crypt", "", "is not an OpenVPN tls-crypt key"),
    ("tls_crypt", "-----BEGIN OpenVPN Static key V1-----\nabcd\n-----END OpenVPN Static key V1-----\n",
     "is not an OpenVPN tls-crypt key"),
    ("key", "garbage\n", "holds no PEM private key"),
    ("key", "-----BEGIN PRIVATE KEY-----\n!!not base64!!\n-----END PRIVATE KEY-----\n", "holds no PEM private key"),
    ("cert", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "holds no PEM certificate"),
])
def test_key_files_must_hold_keys(tmp_path: Path, pki: Path, which: str, content: str, message: str) -> None:
    cfg = parse(good(tmp_path, pki))
    f = getattr(paths(cfg, "client"), which)
    kept = f.read_bytes()
    try:
        f.write_text(content)
        with pytest.raises(ConfigError, match=message):
            check_keys(paths(cfg, "client"))
    finally:
        f.write_bytes(kept)
    check_keys(paths(cfg, "client"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PKG / "braid-openvpn"), *args], capture_output=True, text=True, timeout=60,
                          check=False)


def _write(tmp: Path, s: dict[str, Any]) -> Path:
    path = tmp / "settings.json"
    path.write_text(json.dumps(s))
    return path


@needs_pki
@pytest.mark.parametrize("case", ["world-readable key", "missing key", "unknown gateway", "subnet overlaps a WAN",
                                  "gateway address not on this host"])
def test_run_refuses_bad_input_before_starting_anything(tmp_path: Path, pki: Path, case: str) -> None:
    """`braid-openvpn run` exits 2 naming the setting; no run_dir, config or openvpn is left."""
    work_pki = tmp_path / "pki"
    subprocess.run(["cp", "-a", str(pki), str(work_pki)], check=True)
    s = good(tmp_path, work_pki)
    expect = {
        "world-readable key": "pki_dir:",
        "missing key": "pki_dir:",
        "unknown gateway": "per_gateway.tunnels[0].gateway: unknown gateway 'gw7'",
        "subnet overlaps a WAN": "per_gateway.tunnels[1].subnet: 10.2.0.0/30 overlaps gateways.gw2.wan",
        # the testbed's client address, which this host (not the client's
        # namespace) does not have
        "gateway address not on this host": "gateways.gw1.source: 10.1.0.2 is not an address of this host",
    }[case]
    if case == "world-readable key":
        (work_pki / "private" / "box.key").chmod(0o644)
    elif case == "missing key":
        (work_pki / "private" / "box.key").unlink()
    elif case == "gateway address not on this host":
        assert subprocess.run(["ip", "-4", "addr", "show"], capture_output=True, text=True,
                              check=True).stdout.count(" 10.1.0.2/") == 0, "this host has the client's address"
    elif case == "unknown gateway":
        s["per_gateway"]["tunnels"][0]["gateway"] = "gw7"
    else:
        s["per_gateway"]["tunnels"][1]["subnet"] = "10.2.0.0/30"
    proc = _cli("run", "--config", str(_write(tmp_path, s)), "--role", "client")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refused: " in proc.stdout and expect in proc.stdout, proc.stdout
    assert not (tmp_path / "run").exists(), "run_dir was created although the input was refused"
    mine = subprocess.run(["pgrep", "-f", f"openvpn --config {tmp_path}"], capture_output=True, check=False)
    assert mine.returncode == 1, "an openvpn process was started"
    if case == "world-readable key":
        assert "chmod 600" in proc.stdout
    assert "BEGIN" not in proc.stdout  # no key material in messages


@needs_pki
@pytest.mark.parametrize(("path_manager", "pm_type", "message"), [
    ("kernel", 1, "per_gateway: net.mptcp.pm_type is 1"),
    ("gwsteer", 0, "per_gateway.path_manager: gwsteer, but net.mptcp.pm_type is not 1"),
])
def test_run_refuses_per_gateway_tunnels_under_the_other_path_manager(
        tmp_path: Path, pki: Path, path_manager: str, pm_type: int, message: str) -> None:
    """Endpoints under a userspace path manager (pm_type 1), or gwsteer's
    gateways under the kernel's, would leave the tunnels without subflows:
    refused before anything starts, naming the setting."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a network namespace")
    s = good(tmp_path, pki)
    s["per_gateway"]["path_manager"] = path_manager
    settings = _write(tmp_path, s)
    with Namespace(f"bovpn-pm{os.getpid() % 100000}") as ns:
        ns.sysctl("net.mptcp.pm_type", pm_type)
        proc = ns.run([str(PKG / "braid-openvpn"), "run", "--config", str(settings), "--role", "client"],
                      check=False, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stdout, proc.stdout
    assert not (tmp_path / "run").exists(), "run_dir was created although the input was refused"


def test_gwsteer_gateways_pass_gwsteers_own_validator(tmp_path: Path) -> None:
    """The sections `gwsteer-gateways` prints, appended to a gateways.conf
    with the WAN gateways, are accepted by gwsteer-check (the validator
    mptcpd's plugin runs) as tunnel gateways: source the tunnel address,
    only the inner address as peer, routed by the tunnel's hook."""
    s = good(tmp_path)
    s["per_gateway"]["path_manager"] = "gwsteer"
    proc = _cli("gwsteer-gateways", "--config", str(_write(tmp_path, s)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plugins = REPO / "mptcpd-plugins"
    subprocess.run(["make", "-s", "-C", str(plugins), "gwsteer-check"], check=True, timeout=120)
    conf = tmp_path / "gateways.conf"
    conf.write_text("[gwsteer]\nprobe_target = 10.9.0.2\n"
                    "[gateway gw1]\nsource = 10.1.0.2\nhops = 10.1.0.1\n"
                    "[gateway gw2]\nsource = 10.2.0.2\nhops = 10.2.0.1\n" + proc.stdout)
    check = subprocess.run([str(plugins / "gwsteer-check"), "--json", str(conf)],
                           capture_output=True, text=True, check=False, timeout=30)
    assert check.returncode == 0, check.stderr
    gws = {g["id"]: g for g in json.loads(check.stdout)["gateways"]}
    assert set(gws) == {"gw1", "gw2", "gw1-tun", "gw2-tun"}, gws
    for i in (1, 2):
        tun = gws[f"gw{i}-tun"]
        assert (tun["source"], tun["probe"], tun["peers"], tun["route"]) == \
            (f"10.200.{i}.2", "10.200.0.1", ["10.200.0.1/32"], "external"), tun
    assert gws["gw1"]["peers"] == [] and gws["gw1"]["route"] == "gwsteer"

    s["per_gateway"]["path_manager"] = "kernel"
    refused = _cli("gwsteer-gateways", "--config", str(_write(tmp_path, s)))
    assert refused.returncode == 2 and "per_gateway.path_manager" in refused.stdout, refused.stdout


def test_help_explains_the_modes() -> None:
    out = _cli("--help").stdout
    assert "Per-gateway tunnel mode" in out and "Full-tunnel mode" in out
    assert os.access(PKG / "braid-openvpn", os.X_OK)


def test_shipped_example_is_valid() -> None:
    from braid_openvpn.config import load

    cfg = load(PKG / "examples" / "openvpn.json")
    assert cfg.modes() == ["per-gateway", "full-tunnel"]

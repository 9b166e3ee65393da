"""A bad inventory fails before anything changes, and the message names the variable.

Every case runs site.yml (the operator's entry point) against two fresh
Debian root filesystems and checks: the run failed, the output names the
variable, no host reports a change, and the roots carry nothing of braid.
A secret given in a bad form never appears in the output.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ansible_run import chroot_host, run_playbook, write_inventory
from debian_rootfs import unpacked_rootfs

GATEWAYS = [
    {"id": "gw1", "source": "10.1.1.2", "hops": ["10.1.1.1"]},
    {"id": "gw2", "source": "10.1.2.2", "hops": ["10.1.2.1"]},
]
# A key-shaped secret with one bad digit: must be refused and never printed.
BAD_PSK = "z" + "0123456789abcdef" * 4
# (case id, client vars, proxy vars, shared vars, text the failure must show)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], str]] = [
    ("missing-proxy-address", {}, {}, {"braid_proxy_address": None}, "braid_proxy_address"),
    ("unknown-scheduler", {"braid_mptcp_scheduler": "fastest"}, {}, {}, "braid_mptcp_scheduler"),
    ("gateways-not-a-list", {"braid_gwsteer_gateways": "gw1"}, {}, {}, "braid_gwsteer_gateways"),
    ("gateways-empty", {"braid_gwsteer_gateways": []}, {}, {}, "braid_gwsteer_gateways"),
    ("gateway-duplicate-id", {"braid_gwsteer_gateways": [GATEWAYS[0], {**GATEWAYS[1], "id": "gw1"}]}, {}, {},
     "braid_gwsteer_gateways"),
    ("gateway-missing-hops", {"braid_gwsteer_gateways": [{"id": "gw1", "source": "10.1.1.2"}]}, {}, {}, "hops"),
    # Only gwsteer's own validator knows this one: the message carries its words.
    ("gateway-bad-source", {"braid_gwsteer_gateways": [{**GATEWAYS[0], "source": "10.1.1.300"}]}, {}, {},
     "[gateway gw1] source"),
    ("malformed-key", {"braid_proxy_psk": BAD_PSK}, {}, {}, "braid_proxy_psk is malformed"),
    ("bad-client-id", {"braid_proxy_client_id": "box 1"}, {}, {}, "braid_proxy_client_id"),
    # A proxy setting: site.yml must stop before the client boxes change too.
    ("bad-proxy-wan-interface", {}, {"braid_firewall_wan_interface": "eth0; drop"}, {}, "braid_firewall_wan_interface"),
]


@pytest.fixture(scope="module")
def roots(rootfs_tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """One client and one proxy root, shared: every case must leave them untouched."""
    base = tmp_path_factory.mktemp("invalid")
    with unpacked_rootfs(rootfs_tarball, base / "client") as client, \
            unpacked_rootfs(rootfs_tarball, base / "proxy") as proxy:
        yield client, proxy


@pytest.mark.parametrize(("client_vars", "proxy_vars", "shared_vars", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_inventory_fails_before_any_change(
    roots: tuple[Path, Path], artifacts: Path, tmp_path: Path,
    client_vars: dict[str, Any], proxy_vars: dict[str, Any], shared_vars: dict[str, Any], expected: str,
) -> None:
    client, proxy = roots
    shared = {"braid_start_services": False, "braid_artifacts_dir": str(artifacts),
              "braid_proxy_address": "198.51.100.7", **shared_vars}
    shared = {k: v for k, v in shared.items() if v is not None}
    inventory = write_inventory(
        tmp_path / "inventory.yml",
        {"box1": chroot_host(client, **{"braid_gwsteer_gateways": GATEWAYS, **client_vars})},
        {"relay": chroot_host(proxy, **proxy_vars)},
        shared,
    )
    result = run_playbook("site.yml", inventory)
    assert not result.ok, result.output
    assert expected in result.output, result.output
    assert BAD_PSK not in result.output
    for host in ("box1", "relay"):
        assert result.recap.get(host, {"changed": 0})["changed"] == 0, result.output
    for root in (client, proxy):
        for path in ("etc/braid", "usr/local/bin/braid-proxy", "etc/sysctl.d/60-braid-mptcp.conf",
                     "etc/systemd/system/mptcp.service.d"):
            assert not (root / path).exists(), f"{root / path} was created by a failed run"

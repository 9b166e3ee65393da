"""gwsteer-route on the host kernel: what it leaves in the routing tables.

Every check reads the kernel's rules and routes (``ip rule``, ``ip route
show table all``) after running the real command in a namespace.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kernel_routes_srv6

from braid_testbed.gateway_topologies import ROUTE, Topo, onlink, onlink_gateways
from braid_testbed.mptcpd_lab import Lab


def _braid(topo: Topo) -> tuple[list[str], list[str]]:
    """braid's (proto 180) rules and routes in the client namespace."""
    rules = [line for fam in ("-4", "-6") for line in
             topo.cli.run(["ip", fam, "rule"]).stdout.splitlines() if "proto 180" in line]
    routes = [line for fam in ("-4", "-6") for line in
              topo.cli.run(["ip", fam, "route", "show", "table", "all"]).stdout.splitlines()
              if "proto 180" in line]
    return rules, routes


def test_failed_install_keeps_previous_steering(lab: Lab, tmp: Path) -> None:
    topo = onlink(lab, tmp)
    topo.write_config(onlink_gateways(topo))
    topo.route("install")
    before = _braid(topo)
    assert len(before[0]) == 2 and len(before[1]) == 2, before
    # gw2's interface goes down: its address stays (validation passes),
    # the kernel refuses a route through it.
    topo.cli.run(["ip", "link", "set", "e2", "down"])
    p = topo.route("install", check=False)
    assert p.returncode == 1, p.stderr
    assert "previous steering restored" in p.stderr, p.stderr
    rules, routes = _braid(topo)
    # gw1's steering is there as before (the old code removed everything).
    assert [r for r in rules if "lookup 1000" in r] == [r for r in before[0] if "lookup 1000" in r]
    assert [r for r in routes if "table 1000" in r] == [r for r in before[1] if "table 1000" in r]
    assert [r for r in rules if "lookup 1001" in r], rules


def test_uninstall_all_finds_every_table(lab: Lab, tmp: Path) -> None:
    topo = onlink(lab, tmp)
    topo.write_config(onlink_gateways(topo), extra="route_table_base = 5000")
    topo.route("install")
    assert any("table 5000" in r for r in _braid(topo)[1])
    topo.cli.run([ROUTE, "uninstall", "--all"])
    assert _braid(topo) == ([], []), _braid(topo)


@pytest.mark.srv6
def test_decap_never_overwrites_an_operator_route(lab: Lab, tmp: Path) -> None:
    topo = onlink(lab, tmp)
    gw = topo.gws["gw2"]
    gw.sysctl("net.ipv6.conf.all.forwarding", "1")
    gw.run(["ip", "-6", "route", "add", "fc00:2::d4/128", "dev", "s"])
    p = gw.run([ROUTE, "decap", "--sid", "fc00:2::d4", "--nexthop", "10.9.2.2", "--dev", "s"],
               check=False)
    assert p.returncode == 1 and "was not installed by braid" in p.stderr, p.stderr
    route = gw.run(["ip", "-6", "route", "show", "fc00:2::d4/128"]).stdout
    assert "seg6local" not in route and "proto 180" not in route, route
    # transit neither (it used `replace` too).
    p = gw.run([ROUTE, "transit", "--sid", "fc00:2::d4", "--dev", "s"], check=False)
    assert p.returncode == 1 and "was not installed by braid" in p.stderr, p.stderr
    assert gw.run(["ip", "-6", "route", "show", "fc00:2::d4/128"]).stdout == route
    # braid's own SID route is replaced on a second run, not refused.
    gw.run([ROUTE, "decap", "--sid", "fc00:2::d5", "--nexthop", "10.9.2.2", "--dev", "s"])
    gw.run([ROUTE, "decap", "--sid", "fc00:2::d5", "--nexthop", "10.9.2.2", "--dev", "s"])
    assert "End.DX4" in gw.run(["ip", "-6", "route", "show", "fc00:2::d5/128"]).stdout


def test_decap_names_a_kernel_without_segment_routing(lab: Lab, tmp: Path) -> None:
    """On a kernel without SRv6 routes, the refusal says which option it lacks."""
    if kernel_routes_srv6():
        pytest.skip("this kernel has SRv6 routes: its refusal of one cannot be shown here")
    gw = onlink(lab, tmp).gws["gw2"]
    p = gw.run([ROUTE, "decap", "--sid", "fc00:2::d6", "--nexthop", "10.9.2.2", "--dev", "s"],
               check=False)
    assert p.returncode == 1 and "CONFIG_IPV6_SEG6_LWTUNNEL" in p.stderr, p.stderr
    assert gw.run(["ip", "-6", "route", "show", "fc00:2::d6/128"]).stdout == ""


def test_point_to_point_host_and_link_local_hops(lab: Lab, tmp: Path) -> None:
    topo = onlink(lab, tmp)
    cli = topo.cli
    cli.run(["ip", "addr", "add", "10.1.5.2", "peer", "10.1.5.1", "dev", "e1"])  # PPP/LTE style
    cli.run(["ip", "addr", "add", "10.1.6.2/32", "dev", "e2"])                   # /32 source
    cli.run(["ip", "route", "add", "10.1.6.1", "dev", "e2", "scope", "link"])
    cli.run(["ip", "-6", "addr", "add", "fc00:7::2/64", "dev", "e2", "nodad"])
    topo.write_config(
        "[gateway ppp]\nsource = 10.1.5.2\nhops = 10.1.5.1\n"
        "[gateway host]\nsource = 10.1.6.2\nhops = 10.1.6.1\n"
        "[gateway ll]\nsource = fc00:7::2\nhops = fe80::1\nprobe = fe80::1\n")
    p = topo.route("install", check=False)
    assert p.returncode == 0, p.stderr
    rules, routes = _braid(topo)
    assert len(rules) == 3, rules
    assert any("via 10.1.5.1 dev e1" in r for r in routes), routes
    assert any("via 10.1.6.1 dev e2" in r for r in routes), routes
    assert any("via fe80::1 dev e2" in r for r in routes), routes


def test_external_gateway_is_left_to_its_tunnel(lab: Lab, tmp: Path) -> None:
    """route = external: a tunnel's gateway, whose source address and
    device exist only once its tunnel is up, installs nothing and does not
    stop the other gateways' steering."""
    topo = onlink(lab, tmp)
    tunnel = ("[gateway gw1-tun]\nsource = 10.200.1.2\nhops = 10.200.1.1\n"
              "probe = 10.200.0.1\npeers = 10.200.0.1/32\nroute = external\n")
    topo.write_config(onlink_gateways(topo) + tunnel)
    out = topo.route("install").stdout
    assert "gw1-tun: route = external" in out, out
    rules, routes = _braid(topo)
    assert len(rules) == 2 and len(routes) == 2, (rules, routes)
    assert not any("10.200." in line for line in rules + routes), (rules, routes)
    named = topo.route("install", "--gateway", "gw1-tun", check=False)
    assert named.returncode == 1 and "route = external" in named.stderr, named.stderr

"""gwsteer's gateways for the per-gateway tunnels (``path_manager: gwsteer``).

Each tunnel becomes a gwsteer gateway ``<gateway id>-tun`` whose source is
the client's tunnel address. Three of its keys make it one:

* ``peers = <inner address>/32``: it carries exactly the connections to the
  proxy's address inside the tunnels, and the WAN gateways (no ``peers``)
  none of them, since gwsteer picks by longest match as routing does;
* ``route = external``: the tunnel's ``route-up`` hook routes the tunnel
  address (its device exists only while the tunnel is up), so
  ``gwsteer-route install`` leaves it alone;
* ``probe = <inner address>``: the probe crosses the tunnel, so the gateway
  is up exactly while the tunnel carries packets.

``braid-openvpn gwsteer-gateways`` prints these sections for the client
box's ``gateways.conf`` (the Ansible role appends them).
"""

from __future__ import annotations

from braid_openvpn.config import Config, ConfigError, Tunnel


def gateway_id(t: Tunnel) -> str:
    """gwsteer's id of tunnel ``t``'s gateway."""
    return f"{t.gateway.id}-tun"


def gateway_sections(cfg: Config) -> str:
    """The ``[gateway <id>-tun]`` sections, one per tunnel."""
    pg = cfg.per_gateway
    if pg is None or pg.path_manager != "gwsteer":
        raise ConfigError("per_gateway.path_manager: gwsteer's gateways are only for path_manager \"gwsteer\"")
    out = ["# braid-openvpn's per-gateway tunnels (braid-openvpn gwsteer-gateways)\n"]
    for t in pg.tunnels:
        out.append(
            f"[gateway {gateway_id(t)}]\n"
            f"source = {t.client_ip}\n"
            f"hops = {t.proxy_ip}\n"
            f"probe = {pg.inner_address}\n"
            f"peers = {pg.inner_address}/32\n"
            "route = external\n"
        )
    return "\n".join(out)

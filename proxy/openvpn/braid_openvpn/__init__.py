"""braid's OpenVPN transports: per-gateway tunnels for MPTCP subflows, and
Binder's full tunnel (OpenVPN over MPTCP with NAT at the proxy)."""

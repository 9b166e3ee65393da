package e2e

import (
	"net/netip"

	"braid/proxy/internal/dest"
)

func mustDest(s string) dest.Addr { return dest.FromIP(netip.MustParseAddrPort(s)) }

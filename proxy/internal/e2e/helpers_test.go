package e2e

import (
	"net/netip"
	"time"

	"braid/proxy/internal/dest"
)

func mustDest(s string) dest.Addr { return dest.FromIP(netip.MustParseAddrPort(s)) }

// waitFor polls cond for up to 5 s (the other end of a failed exchange may
// still be counting when this end has already seen the failure).
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

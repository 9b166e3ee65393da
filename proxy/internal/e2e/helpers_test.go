package e2e

import (
	"net"
	"net/netip"
	"testing"
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

// serveLoopback listens on a loopback port, closed when the test ends, and
// runs handle for every connection it accepts, each in its own goroutine.
func serveLoopback(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

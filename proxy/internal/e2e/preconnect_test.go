package e2e

import (
	"testing"
	"time"

	"braid/proxy/internal/config"
)

// waitSpare waits until the client holds n idle spare connections.
func (p *pair) waitSpare(n int64) bool {
	return waitFor(func() bool { return p.clM.Snapshot()["preconnect_idle"].(int64) == n })
}

// After the first connection the client keeps a spare connection to the
// server, and the next connection uses it instead of dialing its own.
func TestPreconnectServesNextConnection(t *testing.T) {
	p := startPair(t, opts{})
	if p.counter(p.srvM, "conns_total") != 0 || p.clM.Snapshot()["preconnect_idle"].(int64) != 0 {
		t.Fatal("an unused client dialed the server")
	}
	p.mustWork()
	if !p.waitSpare(1) {
		t.Fatalf("no spare connection after the first use: %v", p.clM.Snapshot())
	}
	p.mustWork()
	if h := p.counter(p.clM, "preconnect_hits"); h != 1 {
		t.Fatalf("preconnect hits %d, want 1: %v", h, p.clM.Snapshot())
	}
	if !p.waitSpare(1) {
		t.Fatal("spare not replaced after use")
	}

	off := startPair(t, opts{clientMut: func(c *config.Client) { c.Preconnect = 0 }})
	off.mustWork()
	time.Sleep(100 * time.Millisecond)
	if n := off.counter(off.srvM, "conns_total"); n != 1 || off.clM.Snapshot()["preconnect_idle"].(int64) != 0 {
		t.Fatalf("preconnect 0: server saw %d connections", n)
	}
}

// A spare the server has closed (its handshake timeout shorter than the
// client's preconnect_max_age: a misconfiguration) is noticed and not used.
func TestPreconnectClosedSpareNotUsed(t *testing.T) {
	p := startPair(t, opts{
		serverMut: func(s *config.Server) { s.FirstByteTimeout = config.Duration(300 * time.Millisecond) },
		clientMut: func(c *config.Client) { c.PreconnectMaxAge = config.Duration(time.Minute) },
	})
	p.mustWork()
	if !p.waitSpare(1) {
		t.Fatal("no spare connection")
	}
	time.Sleep(600 * time.Millisecond) // the server times it out
	p.mustWork()
	if d := p.counter(p.clM, "preconnect_discarded"); d != 1 {
		t.Fatalf("closed spare discarded %d times, want 1: %v", d, p.clM.Snapshot())
	}
}

// At shutdown the server closes connections that have not spoken (spares)
// at once instead of waiting for their handshake timeout.
func TestShutdownClosesSpareAtOnce(t *testing.T) {
	p := startPair(t, opts{})
	p.mustWork()
	if !p.waitSpare(1) {
		t.Fatal("no spare connection")
	}
	start := time.Now()
	p.srv.Shutdown(5 * time.Second)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("shutdown took %v with only a spare open", d)
	}
	if n := p.counter(p.srvM, "auth_failures"); n != 0 {
		t.Fatalf("closing the spare counted %d auth failures", n)
	}
}

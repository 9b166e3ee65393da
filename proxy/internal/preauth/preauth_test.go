package preauth

import (
	"net/netip"
	"testing"
)

// conn stands for an accepted connection: closed records an eviction.
type conn struct{ closed bool }

func (c *conn) close() { c.closed = true }

func TestFullShareEvictsTheSourcesOldest(t *testing.T) {
	var evicted []string
	l := New(func(r string) { evicted = append(evicted, r) })
	a := netip.MustParseAddr("192.0.2.1")
	conns := make([]*conn, 4)
	for i := range conns {
		conns[i] = &conn{}
		if l.Admit(a, 10, 3, conns[i].close) == nil {
			t.Fatalf("connection %d refused", i)
		}
	}
	if !conns[0].closed || conns[1].closed || conns[2].closed || conns[3].closed {
		t.Fatalf("closed %v, want only the oldest", []bool{conns[0].closed, conns[1].closed, conns[2].closed, conns[3].closed})
	}
	if l.Active() != 3 || len(evicted) != 1 || evicted[0] != "source" {
		t.Fatalf("active %d, evictions %v; want 3, [source]", l.Active(), evicted)
	}
}

func TestFullTotalEvictsTheOldestOfAll(t *testing.T) {
	var evicted []string
	l := New(func(r string) { evicted = append(evicted, r) })
	first, second := &conn{}, &conn{}
	l.Admit(netip.MustParseAddr("192.0.2.1"), 2, 5, first.close)
	l.Admit(netip.MustParseAddr("192.0.2.2"), 2, 5, second.close)
	third := &conn{}
	l.Admit(netip.MustParseAddr("192.0.2.3"), 2, 5, third.close)
	if !first.closed || second.closed || third.closed || l.Active() != 2 {
		t.Fatalf("closed %v %v %v, active %d; want the first only, 2 held",
			first.closed, second.closed, third.closed, l.Active())
	}
	if len(evicted) != 1 || evicted[0] != "total" {
		t.Fatalf("evictions %v, want [total]", evicted)
	}
	if l.Sources() != 2 {
		t.Fatalf("%d sources held, want 2 (the evicted one's is gone)", l.Sources())
	}
}

func TestReleaseIsIdempotentAndEvictedSlotsStayFreed(t *testing.T) {
	l := New(nil)
	a := netip.MustParseAddr("192.0.2.1")
	old := &conn{}
	releaseOld := l.Admit(a, 10, 1, old.close)
	releaseNew := l.Admit(a, 10, 1, (&conn{}).close)
	releaseOld() // the evicted connection's handler exits later: nothing to give back
	if l.Active() != 1 {
		t.Fatalf("active %d after the evicted connection's release, want 1", l.Active())
	}
	releaseNew()
	releaseNew()
	if l.Active() != 0 || l.Sources() != 0 {
		t.Fatalf("after release: active %d sources %d, want 0 0", l.Active(), l.Sources())
	}
}

// A flood from one address keeps its newest connections: one from the
// same address (a user behind the same NAT) is never refused, and holds
// its slot until perSource newer connections have arrived.
func TestNewcomerFromTheFloodingAddressGetsASlot(t *testing.T) {
	l := New(nil)
	a := netip.MustParseAddr("198.51.100.7")
	for i := 0; i < 1000; i++ {
		l.Admit(a, 100, 8, func() {})
	}
	honest := &conn{}
	release := l.Admit(a, 100, 8, honest.close)
	for i := 0; i < 7; i++ {
		l.Admit(a, 100, 8, func() {})
	}
	if honest.closed {
		t.Fatal("evicted by fewer than perSource newer connections")
	}
	release()
	if l.Active() != 7 {
		t.Fatalf("active %d, want 7", l.Active())
	}
}

func TestIPv6CountedPer64(t *testing.T) {
	l := New(nil)
	first := &conn{}
	l.Admit(netip.MustParseAddr("2001:db8:1:2::1"), 10, 1, first.close)
	l.Admit(netip.MustParseAddr("2001:db8:1:2:ffff::9"), 10, 1, func() {})
	if !first.closed {
		t.Fatal("another address of the same /64 counted apart")
	}
	other := &conn{}
	l.Admit(netip.MustParseAddr("2001:db8:1:3::1"), 10, 1, other.close)
	mapped := &conn{}
	l.Admit(netip.MustParseAddr("::ffff:192.0.2.1"), 10, 1, mapped.close)
	l.Admit(netip.MustParseAddr("192.0.2.1"), 10, 1, func() {})
	if other.closed || !mapped.closed {
		t.Fatalf("a different /64 evicted (%v), or mapped and plain IPv4 counted apart (%v)", other.closed, !mapped.closed)
	}
}

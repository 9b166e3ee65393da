package preauth

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
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
		if l.Admit(a, 10, 3, conns[i].close, nil) == nil {
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
	l.Admit(netip.MustParseAddr("192.0.2.1"), 2, 5, first.close, nil)
	l.Admit(netip.MustParseAddr("192.0.2.2"), 2, 5, second.close, nil)
	third := &conn{}
	l.Admit(netip.MustParseAddr("192.0.2.3"), 2, 5, third.close, nil)
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
	releaseOld := l.Admit(a, 10, 1, old.close, nil)
	releaseNew := l.Admit(a, 10, 1, (&conn{}).close, nil)
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
		l.Admit(a, 100, 8, func() {}, nil)
	}
	honest := &conn{}
	release := l.Admit(a, 100, 8, honest.close, nil)
	for i := 0; i < 7; i++ {
		l.Admit(a, 100, 8, func() {}, nil)
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
	l.Admit(netip.MustParseAddr("2001:db8:1:2::1"), 10, 1, first.close, nil)
	l.Admit(netip.MustParseAddr("2001:db8:1:2:ffff::9"), 10, 1, func() {}, nil)
	if !first.closed {
		t.Fatal("another address of the same /64 counted apart")
	}
	other := &conn{}
	l.Admit(netip.MustParseAddr("2001:db8:1:3::1"), 10, 1, other.close, nil)
	mapped := &conn{}
	l.Admit(netip.MustParseAddr("::ffff:192.0.2.1"), 10, 1, mapped.close, nil)
	l.Admit(netip.MustParseAddr("192.0.2.1"), 10, 1, func() {}, nil)
	if other.closed || !mapped.closed {
		t.Fatalf("a different /64 evicted (%v), or mapped and plain IPv4 counted apart (%v)", other.closed, !mapped.closed)
	}
}

// A full limit passes over the oldest connection when its first bytes have
// arrived (its hello only waits for its goroutine) and evicts the oldest
// silent one; when the first evictScan have all spoken, the oldest goes.
func TestEvictionPassesOverAConnectionThatHasSpoken(t *testing.T) {
	l := New(nil)
	a := netip.MustParseAddr("192.0.2.1")
	spoke, silent := &conn{}, &conn{}
	l.Admit(a, 2, 10, spoke.close, func() bool { return true })
	l.Admit(a, 2, 10, silent.close, func() bool { return false })
	l.Admit(a, 2, 10, (&conn{}).close, nil)
	if spoke.closed || !silent.closed {
		t.Fatalf("evicted spoke=%v silent=%v, want only the silent one", spoke.closed, silent.closed)
	}

	l = New(nil)
	talkers := make([]*conn, evictScan+1)
	for i := range talkers {
		talkers[i] = &conn{}
		l.Admit(a, evictScan+1, 100, talkers[i].close, func() bool { return true })
	}
	l.Admit(a, evictScan+1, 100, (&conn{}).close, nil)
	if !talkers[0].closed || talkers[1].closed {
		t.Fatal("with every scanned connection speaking, the oldest must go")
	}
}

// HasInput sees bytes waiting in a real socket without consuming them.
func TestHasInputPeeks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server := accepted.(*net.TCPConn)
	defer server.Close()
	if HasInput(server) {
		t.Fatal("input reported before the peer sent a byte")
	}
	client.Write([]byte("hi"))
	deadline := time.Now().Add(2 * time.Second)
	for !HasInput(server) {
		if time.Now().After(deadline) {
			t.Fatal("no input reported 2 s after the peer sent 2 bytes")
		}
		time.Sleep(time.Millisecond)
	}
	var b [2]byte
	if n, err := io.ReadFull(server, b[:]); n != 2 || err != nil {
		t.Fatalf("the peek consumed input: read %d, %v", n, err)
	}
}

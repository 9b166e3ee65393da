package wire

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"braid/proxy/internal/padding"
)

// received is what the far end of a loopback connection read: the
// application's bytes and the padding it dropped.
type received struct {
	data    []byte
	padding int64
}

// loopbackConn returns a sending Conn over TCP loopback and a channel that
// yields what the receiving Conn read once the sender closes.
func loopbackConn(t *testing.T) (*Conn, <-chan received) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan received, 1)
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			out <- received{}
			return
		}
		_, o := aeadPair(t)
		rc := NewConn(&countingConn{c}, o, nil)
		got, _ := io.ReadAll(rc)
		rc.Close()
		out <- received{got, rc.PadTotals().PadReceived}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := aeadPair(t)
	return NewConn(raw.(*net.TCPConn), nil, s), out
}

func finish(t *testing.T, c *Conn, out <-chan received) received {
	t.Helper()
	c.CloseWrite()
	r := <-out
	c.Close()
	return r
}

// twoMembers returns a group padding with cfg and two loopback members.
func twoMembers(t *testing.T, cfg PadConfig) (*PadGroup, *Conn, <-chan received, *Conn, <-chan received) {
	t.Helper()
	g, err := NewPadGroup(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, outA := loopbackConn(t)
	b, outB := loopbackConn(t)
	a.JoinPadGroup(g)
	b.JoinPadGroup(g)
	return g, a, outA, b, outB
}

// The group's budget binds over its members together, every padding frame
// is dropped by the receiver, and the data arrives byte-exact.
func TestPadGroupBudgetOverMembers(t *testing.T) {
	const budget = 0.5
	g, a, outA, b, outB := twoMembers(t, PadConfig{Budget: budget, Idle: 150 * time.Millisecond, Hist: fixedHist(t)})
	var wantA, wantB []byte
	for i := range 20 {
		p := bytes.Repeat([]byte{byte(i)}, 1000+100*i)
		if i%2 == 0 {
			a.Write(p)
			wantA = append(wantA, p...)
		} else {
			b.Write(p)
			wantB = append(wantB, p...)
		}
		time.Sleep(20 * time.Millisecond)
	}
	data, pad := g.Totals()
	if r := float64(pad) / float64(data); r > budget || r < 0.8*budget {
		t.Fatalf("group padding/data %.3f with budget %.2f (want the budget to bind, never exceeded)", r, budget)
	}
	ra, rb := finish(t, a, outA), finish(t, b, outB)
	if !bytes.Equal(ra.data, wantA) || !bytes.Equal(rb.data, wantB) {
		t.Fatalf("receivers got %d and %d bytes, want %d and %d exact", len(ra.data), len(rb.data), len(wantA), len(wantB))
	}
	if got := ra.padding + rb.padding; got != pad {
		t.Fatalf("receivers dropped %d padding bytes, the group sent %d", got, pad)
	}
}

// A page over short connections: each member sends one response and
// closes, as HTTP/1.1 does per object. A per-connection padder has no
// time to fire; the group goes on padding on a member still open (here
// one that sent nothing real) through the gaps, and stops Idle after the
// last real frame.
func TestPadGroupPadsAcrossShortConnections(t *testing.T) {
	var emptied atomic.Int32
	h, err := padding.Parse(padding.TestJSON(0.02, 0.005, 0)) // first dummy 20 ms after data, then every 5 ms
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewPadGroup(PadConfig{Budget: 2, Idle: 200 * time.Millisecond, Hist: &h.Out},
		func() { emptied.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	long, outLong := loopbackConn(t)
	long.JoinPadGroup(g)
	for i := range 5 {
		c, out := loopbackConn(t)
		c.JoinPadGroup(g)
		c.Write(bytes.Repeat([]byte{byte('a' + i)}, 1200))
		// The answer is done (FIN) before the first dummy is due, and the
		// connection lingers a while before it is closed.
		c.CloseWrite()
		r := <-out
		time.Sleep(60 * time.Millisecond)
		c.Close()
		if len(r.data) != 1200 || r.padding != 0 {
			t.Fatalf("object %d: %d bytes, %d padding bytes after its FIN?", i, len(r.data), r.padding)
		}
	}
	if g.Members() != 1 {
		t.Fatalf("%d members after the short connections closed", g.Members())
	}
	time.Sleep(400 * time.Millisecond) // idle: padding must have stopped
	_, before := g.Totals()
	time.Sleep(300 * time.Millisecond)
	if _, after := g.Totals(); after != before {
		t.Fatalf("padding went on while idle: %d -> %d bytes", before, after)
	}
	r := finish(t, long, outLong)
	if len(r.data) != 0 {
		t.Fatalf("the silent member delivered %q", r.data)
	}
	if r.padding == 0 {
		t.Fatal("no padding on the member left open: the gaps between objects were not padded")
	}
	if emptied.Load() != 1 || g.Members() != 0 {
		t.Fatalf("onEmpty ran %d times, %d members left", emptied.Load(), g.Members())
	}
}

// A connection pads either alone or in a group, not both.
func TestPadGroupAndConnPaddingExclusive(t *testing.T) {
	g, err := NewPadGroup(PadConfig{Budget: 1, Idle: time.Second, Hist: fixedHist(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, out := loopbackConn(t)
	if err := c.StartPadding(PadConfig{Budget: 1, Idle: time.Second, Hist: fixedHist(t)}); err != nil {
		t.Fatal(err)
	}
	c.JoinPadGroup(g)
	if g.Members() != 0 {
		t.Fatal("a connection padding alone joined a group")
	}
	finish(t, c, out)
	if _, err := NewPadGroup(PadConfig{Budget: 0, Idle: time.Second, Hist: fixedHist(t)}, nil); err == nil {
		t.Fatal("a group without budget was accepted")
	}
}

// Members that sent their FIN can carry no padding: the group stops aiming
// at them instead of bouncing a fake burst between them.
func TestPadGroupPassesOverMembersAfterTheirFIN(t *testing.T) {
	g, a, outA, b, outB := twoMembers(t, PadConfig{Budget: 10, Idle: time.Second, Hist: fixedHist(t)})
	a.Write(bytes.Repeat([]byte("a"), 1000))
	b.Write(bytes.Repeat([]byte("b"), 1000))
	a.CloseWrite()
	b.CloseWrite()
	<-outA
	<-outB
	time.Sleep(50 * time.Millisecond) // many 1 ms padding timers
	g.mu.Lock()
	last := g.last
	g.mu.Unlock()
	a.Close()
	b.Close()
	if last != nil {
		t.Fatal("padding still aimed at a member that had sent its FIN")
	}
}

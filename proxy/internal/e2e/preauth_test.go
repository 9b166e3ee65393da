package e2e

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"braid/proxy/internal/config"
)

// dialFrom opens a TCP connection to addr from a given loopback source
// (every 127/8 address is local on Linux), so one test can play several
// hosts.
func dialFrom(t testing.TB, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	return c
}

// closedSoon reports whether the server closes c (EOF or reset) within d.
func closedSoon(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := c.Read(b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// One host opening many silent connections holds at most its per-source
// share of the unauthenticated slots, its newest connections: clients from
// other addresses keep being served.
func TestPreauthFloodFromOneSourceDoesNotLockOut(t *testing.T) {
	p := startPair(t, opts{serverMut: func(s *config.Server) {
		s.MaxConns = 40
		s.MaxPreauthPerSource = 8
	}})
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for i := 0; i < 100; i++ {
		flood = append(flood, dialFrom(t, "127.0.0.2", p.serverAddr))
	}
	if !waitFor(func() bool { return p.counter(p.srvM, "conns_evicted_preauth_source") == 92 }) {
		t.Fatalf("per-source evictions %d, want 92 (100 - 8): %v", p.counter(p.srvM, "conns_evicted_preauth_source"), p.srvM.Snapshot())
	}
	for i := 0; i < 5; i++ {
		p.mustWork()
	}
	// The oldest 92 are closed, the newest 8 stay open.
	var open []int
	for i, c := range flood {
		if !closedSoon(c, 20*time.Millisecond) {
			open = append(open, i)
		}
	}
	if len(open) != 8 || open[0] != 92 {
		t.Fatalf("flood connections left open %v, want the newest 8 (92-99)", open)
	}
}

// Users behind one address (a carrier-grade NAT) share it with whoever
// floods from it. A flood that keeps the address's share full does not
// lock them out: each new connection takes the slot of the address's
// oldest, so an honest client's hello has as long as the flood takes to
// open a share's worth of connections. (Refusing new connections instead
// locked a client out for as long as a 1,200-connection flood lasted.)
func TestFloodFromTheClientsOwnAddressDoesNotLockItOut(t *testing.T) {
	const share, flood = 64, 3000
	p := startPair(t, opts{serverMut: func(s *config.Server) {
		s.MaxConns = 1000
		s.MaxPreauthPerSource = share
	}})
	stop, done := make(chan struct{}), make(chan int, 1)
	go func() {
		// paced at about one connection a millisecond, bounded in count;
		// only the newest 2 x share are kept open on this side
		var open []net.Conn
		n := 0
		defer func() {
			for _, c := range open {
				c.Close()
			}
			done <- n
		}()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Timeout: 2 * time.Second}
		for ; n < flood; n++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			c, err := d.Dial("tcp", p.serverAddr)
			if err != nil {
				continue
			}
			if open = append(open, c); len(open) > 2*share {
				open[0].Close()
				open = open[1:]
			}
		}
	}()
	if !waitFor(func() bool { return p.counter(p.srvM, "conns_evicted_preauth_source") > 0 }) {
		t.Fatalf("the flood never filled its address's share: %v", p.srvM.Snapshot())
	}
	for i := 0; i < 5; i++ {
		start := time.Now()
		p.mustWork()
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a client on the flooding address took %v to be served", took)
		}
	}
	close(stop)
	n := <-done
	if n >= flood {
		t.Fatalf("the flood (%d connections) ended before the client's transfers did", n)
	}
	t.Logf("5 transfers served while a flood from their own address opened %d connections; %d evicted",
		n, p.counter(p.srvM, "conns_evicted_preauth_source"))
}

// Unauthenticated connections from many sources together take at most
// max_preauth_conns slots: the rest of max_conns stays for connections that
// have authenticated, so established relays keep working while the flood
// lasts, and a new client connection takes the oldest flood connection's
// slot.
func TestPreauthSlotsReservedForAuthenticated(t *testing.T) {
	p := startPair(t, opts{serverMut: func(s *config.Server) {
		s.MaxConns = 30
		s.MaxPreauthConns = 6
		s.MaxPreauthPerSource = 100
	}})
	p.mustWork()
	if !p.waitSpare(1) { // the client's spare holds one pre-auth slot
		t.Fatal("no spare connection")
	}
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for i := 0; i < 40; i++ {
		flood = append(flood, dialFrom(t, fmt.Sprintf("127.0.1.%d", i+1), p.serverAddr))
	}
	if !waitFor(func() bool { return p.counter(p.srvM, "conns_evicted_preauth_total") >= 35 }) {
		t.Fatalf("total evictions %d, want 35 (40 - 5 free pre-auth slots) or more (the client replaces its evicted spare): %v", p.counter(p.srvM, "conns_evicted_preauth_total"), p.srvM.Snapshot())
	}
	if got := p.srvM.Snapshot()["conns_preauth"].(int64); got != 6 {
		t.Fatalf("conns_preauth %d, want 6", got)
	}
	// The spare was the oldest: the flood evicted it. The client's next
	// connection evicts the oldest flood connection and is served.
	p.mustWorkPastDeadSpare("during the flood")
	for _, c := range flood {
		c.Close()
	}
	if !waitFor(func() bool { return p.srvM.Snapshot()["conns_preauth"].(int64) <= 1 }) {
		t.Fatalf("pre-auth slots not given back after the flood closed: %v", p.srvM.Snapshot())
	}
	// The spare the client dialed during the flood may have been evicted
	// a moment after it looked alive.
	p.mustWorkPastDeadSpare("after the flood")
}

// A connection that never sends a byte is closed after first_byte_timeout;
// one that has started its hello gets handshake_timeout from its first
// byte.
func TestFirstByteTimeoutSeparateFromHandshake(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	p := startPair(t, opts{
		serverMut: func(s *config.Server) {
			s.FirstByteTimeout = config.Duration(300 * time.Millisecond)
			s.HandshakeTimeout = config.Duration(2 * time.Second)
		},
		clientMut: func(c *config.Client) { c.PreconnectMaxAge = config.Duration(200 * time.Millisecond) },
	})
	silent := dialFrom(t, "127.0.0.3", p.serverAddr)
	defer silent.Close()
	started := dialFrom(t, "127.0.0.4", p.serverAddr)
	defer started.Close()
	started.Write([]byte{0x42})
	t0 := time.Now()
	if !closedSoon(silent, 1500*time.Millisecond) {
		t.Fatal("silent connection still open 1.5 s after a 300 ms first-byte timeout")
	}
	if closedSoon(started, 700*time.Millisecond) {
		t.Fatalf("a connection that sent its first byte was closed after %v (handshake timeout 2 s)", time.Since(t0))
	}
	started.SetReadDeadline(time.Now().Add(3 * time.Second))
	io.Copy(io.Discard, started)
	if el := time.Since(t0); el < 1500*time.Millisecond || el > 3*time.Second {
		t.Fatalf("started hello closed after %v, want about the 2 s handshake timeout", el)
	}
	if !waitFor(func() bool {
		return p.counter(p.srvM, "auth_failures_first_byte_timeout") == 1 && p.counter(p.srvM, "auth_failures_handshake_timeout") == 1
	}) {
		t.Fatalf("timeouts not counted apart: %v", p.srvM.Snapshot())
	}
	if !waitFor(func() bool { return p.srvM.Snapshot()["conns_preauth"].(int64) == 0 }) {
		t.Fatalf("pre-auth slots not released: %v", p.srvM.Snapshot())
	}
	p.mustWork()
}

// Connections to the SOCKS port that never send a valid greeting (a port
// scan, a stray HTTP request) open nothing to the server.
func TestNoServerConnectionBeforeSOCKSGreeting(t *testing.T) {
	p := startPair(t, opts{clientMut: func(c *config.Client) { c.Preconnect = 0 }})
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", p.socks)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	p.socksRaw([]byte("GET / HTTP/1.0\r\n\r\n"))
	half, err := net.Dial("tcp", p.socks)
	if err != nil {
		t.Fatal(err)
	}
	half.Write([]byte{5}) // half a greeting, then close
	half.Close()
	if !waitFor(func() bool { return p.counter(p.clM, "socks_errors_malformed") == 7 }) {
		t.Fatalf("client did not see the 7 connections: %v", p.clM.Snapshot())
	}
	time.Sleep(100 * time.Millisecond) // a dial started by them would have landed
	if n := p.counter(p.srvM, "conns_total"); n != 0 {
		t.Fatalf("server saw %d connections from SOCKS connections without a greeting", n)
	}
	p.mustWork()
	if n := p.counter(p.srvM, "conns_total"); n != 1 {
		t.Fatalf("server saw %d connections for one proxied connection", n)
	}
}

// The client's SOCKS port: connections that never make a request hold at
// most a quarter of max_conns, the newest of them; an application on the
// box still gets through, and the stalling connections are closed.
func TestSilentSOCKSConnectionsDoNotLockOutTheBox(t *testing.T) {
	p := startPair(t, opts{clientMut: func(c *config.Client) { c.MaxConns = 8 }})
	var idle []net.Conn
	for range 8 {
		c := dialFrom(t, "127.0.0.1", p.socks)
		defer c.Close()
		idle = append(idle, c)
	}
	if r := p.transfer(p.sink, 1000, 1000); r.Err != nil {
		t.Fatalf("an application locked out by 8 silent SOCKS connections: %v (rejected %d)",
			r.Err, p.counter(p.clM, "conns_rejected_limit"))
	}
	if !closedSoon(idle[0], time.Second) {
		t.Fatal("the oldest silent connection is still held")
	}
	if n := p.counter(p.clM, "socks_evicted_handshake_source"); n < 6 {
		t.Fatalf("%d silent connections closed to make room, want at least 6 of 8", n)
	}
}

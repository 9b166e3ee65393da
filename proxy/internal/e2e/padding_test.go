package e2e

// Adaptive padding through a real client/server pair on
// loopback: a "page" of request/response turns with pauses, every byte
// checked; a tap between client and server counts the bytes on the socket.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
	"braid/proxy/internal/loadgen"
	"braid/proxy/internal/padding"
	"braid/proxy/internal/testserve"
	"braid/proxy/internal/wire"
)

// body is the deterministic content of a request or response.
func body(n uint32, salt uint64) []byte {
	r := rand.New(rand.NewPCG(uint64(n), salt))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// pageServer answers each request (reqLen, respLen, then reqLen bytes,
// checked) with respLen bytes after a short think time. Mismatches are
// counted in bad.
func pageServer(t *testing.T, bad *atomic.Int64) string {
	return testserve.Loopback(t, func(c net.Conn) {
		defer c.Close()
		var hdr [8]byte
		for {
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				return
			}
			req, resp := binary.BigEndian.Uint32(hdr[:]), binary.BigEndian.Uint32(hdr[4:])
			got := make([]byte, req)
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, body(req, 1)) {
				bad.Add(1)
				return
			}
			time.Sleep(time.Duration(resp%7) * time.Millisecond)
			if _, err := c.Write(body(resp, 2)); err != nil {
				return
			}
		}
	})
}

// pageLoad runs conns connections in parallel, each turns request/response
// turns with pauses, through the SOCKS proxy; it fails the test on any
// byte that differs.
func pageLoad(t *testing.T, socks, target string, seed uint64, conns, turns int) {
	t.Helper()
	dial, err := loadgen.SOCKSDialer(socks, target, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for k := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(k)))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := dial(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			for range turns {
				req, resp := uint32(100+r.IntN(1400)), uint32(500+r.IntN(120_000))
				var hdr [8]byte
				binary.BigEndian.PutUint32(hdr[:], req)
				binary.BigEndian.PutUint32(hdr[4:], resp)
				if _, err := c.Write(append(hdr[:], body(req, 1)...)); err != nil {
					errs <- err
					return
				}
				got := make([]byte, resp)
				if _, err := io.ReadFull(c, got); err != nil {
					errs <- fmt.Errorf("reading response: %w", err)
					return
				}
				if !bytes.Equal(got, body(resp, 2)) {
					errs <- fmt.Errorf("response of %d bytes differs", resp)
					return
				}
				time.Sleep(time.Duration(2+r.IntN(30)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// tap forwards TCP to target and counts the bytes each way.
type tap struct {
	addr     string
	up, down atomic.Int64
}

func newTap(t *testing.T, target string) *tap {
	tp := &tap{}
	tp.addr = testserve.Loopback(t, func(c net.Conn) {
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			return
		}
		cp := func(dst, src net.Conn, n *atomic.Int64) {
			buf := make([]byte, 64<<10)
			for {
				k, err := src.Read(buf)
				if k > 0 {
					n.Add(int64(k))
					if _, werr := dst.Write(buf[:k]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			dst.(*net.TCPConn).CloseWrite()
		}
		go cp(s, c, &tp.up)
		cp(c, s, &tp.down)
	})
	return tp
}

func (tp *tap) total() (int64, int64) { return tp.up.Load(), tp.down.Load() }

// padPair starts a pair whose ends pad with the given budgets (0 = off),
// histograms file (""= built-in) and padding_scope ("" = the default),
// the client reaching the server through a tap.
func padPair(t *testing.T, clientBudget, serverBudget float64, hist string, idle time.Duration,
	scope string) (*pair, *tap) {
	var tp *tap
	p := startPair(t, opts{
		serverMut: func(s *config.Server) {
			s.PaddingBudget = serverBudget
			s.PaddingHistograms = hist
			if scope != "" {
				s.PaddingScope = scope
			}
			if idle > 0 {
				s.PaddingIdle = config.Duration(idle)
			}
		},
		clientMut: func(c *config.Client) {
			c.PaddingBudget = clientBudget
			c.PaddingHistograms = hist
			if idle > 0 {
				c.PaddingIdle = config.Duration(idle)
			}
			c.Preconnect = 0
		},
	})
	tp = newTap(t, p.serverAddr)
	// Point the client at the tap: reload with the tap as server.
	cfg := config.DefaultClient()
	cfg.Server = tp.addr
	cfg.SOCKSReply = config.SOCKSReplyEarly // these tests are of early mode's mechanics; auto's own below
	cfg.KeyFile = filepath.Join(p.dir, "client.keys")
	cfg.SOCKSListen = "127.0.0.1:0"
	cfg.GatewayStatusFile = filepath.Join(p.dir, "absent.json")
	cfg.PaddingBudget = clientBudget
	cfg.PaddingHistograms = hist
	cfg.Preconnect = 0
	if scope != "" {
		cfg.PaddingScope = scope
	}
	if idle > 0 {
		cfg.PaddingIdle = config.Duration(idle)
	}
	if err := p.cl.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	return p, tp
}

// eager writes histograms that pad 1 ms after a real frame and every ms
// after, never ending a fake burst: only the budget and idle stop them.
func eager(t *testing.T) string { return fixedHist(t, 1e-3) }

// fixedHist pads 1 ms after a real frame, then every gap seconds.
func fixedHist(t *testing.T, gap float64) string {
	path := filepath.Join(t.TempDir(), "fixed.json")
	if err := os.WriteFile(path, padding.TestJSON(1e-3, gap, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// idleBoth waits until neither end has a connection open.
func idleBoth(p *pair) bool {
	return waitFor(func() bool {
		return p.clM.Snapshot()["conns_active"] == int64(0) && p.srvM.Snapshot()["conns_active"] == int64(0)
	})
}

// Padding never reaches the application: byte-exact pages both ways with
// both ends padding (built-in and eager histograms), and the padding one
// end sent is exactly what the other dropped.
func TestPaddingNeverReachesTheApplication(t *testing.T) {
	for _, hist := range []string{"", "eager"} {
		t.Run("hist="+hist, func(t *testing.T) {
			var bad atomic.Int64
			h := hist
			if h == "eager" {
				h = eager(t)
			}
			p, _ := padPair(t, 0.5, 0.5, h, 0, "")
			target := pageServer(t, &bad)
			pageLoad(t, p.socks, target, 1, 4, 8)
			if bad.Load() != 0 {
				t.Fatalf("%d requests arrived altered", bad.Load())
			}
			idleBoth(p)
			cs, sr := p.counter(p.clM, "padding_bytes_sent"), p.counter(p.srvM, "padding_bytes_received")
			ss, cr := p.counter(p.srvM, "padding_bytes_sent"), p.counter(p.clM, "padding_bytes_received")
			t.Logf("padding up %d (server dropped %d), down %d (client dropped %d); conns padding: client %d server %d",
				cs, sr, ss, cr, p.counter(p.clM, "padding_conns"), p.counter(p.srvM, "padding_conns"))
			// The built-in histograms' delays between bursts are those of
			// loads over 40-120 ms RTTs: this loopback page may not pad.
			if hist == "eager" && (cs == 0 || ss == 0) {
				t.Fatal("no padding sent: the test is vacuous")
			}
			if !waitFor(func() bool {
				return p.counter(p.srvM, "padding_bytes_received") == p.counter(p.clM, "padding_bytes_sent") &&
					p.counter(p.clM, "padding_bytes_received") == p.counter(p.srvM, "padding_bytes_sent")
			}) {
				t.Fatalf("padding sent and dropped differ: up %d/%d down %d/%d", cs, sr, ss, cr)
			}
		})
	}
}

// The budget holds over a page load, whether it covers each connection or
// all of a client's: from the counters (per end, padding over data wire
// bytes) and from the bytes on the socket (the same page with and without
// padding). With the client scope the server forgets a client's group
// once its connections are gone.
func TestPaddingBudgetHoldsOverAPageLoad(t *testing.T) {
	for _, scope := range []string{config.PaddingScopeClient, config.PaddingScopeConnection} {
		t.Run(scope, func(t *testing.T) { budgetHoldsOverAPageLoad(t, scope) })
	}
}

func budgetHoldsOverAPageLoad(t *testing.T, scope string) {
	// Each end's budget binds: a padding frame is one packet, and the
	// server's megabytes of answers would need more 1 ms timers than the
	// page lasts to spend 30 % of them.
	const upBudget, downBudget = 0.3, 0.05
	var bad atomic.Int64
	target := pageServer(t, &bad)
	run := func(clientBudget, serverBudget float64) (*pair, int64, int64) {
		p, tp := padPair(t, clientBudget, serverBudget, eager(t), 0, scope)
		pageLoad(t, p.socks, target, 7, 4, 10)
		idleBoth(p)
		time.Sleep(50 * time.Millisecond)
		up, down := tp.total()
		// The handshake's random tails vary by connection, not with the
		// padding budget: they are not what this compares.
		return p, up - p.counter(p.clM, "handshake_padding_bytes_sent"), down - p.counter(p.srvM, "handshake_padding_bytes_sent")
	}
	_, offUp, offDown := run(0, 0)
	p, onUp, onDown := run(upBudget, downBudget)
	for _, end := range []struct {
		name   string
		pad    int64
		data   int64
		budget float64
	}{
		{"client", p.counter(p.clM, "padding_bytes_sent"), p.counter(p.clM, "padding_data_bytes_sent"), upBudget},
		{"server", p.counter(p.srvM, "padding_bytes_sent"), p.counter(p.srvM, "padding_data_bytes_sent"), downBudget},
	} {
		budget := end.budget
		r := float64(end.pad) / float64(end.data)
		t.Logf("%s: padding %d / data %d wire bytes = %.4f (budget %.2f)", end.name, end.pad, end.data, r, budget)
		if r > budget*1.05 {
			t.Errorf("%s: padding/data %.4f exceeds budget %.2f + 5%%", end.name, r, budget)
		}
		if r < 0.7*budget {
			t.Errorf("%s: padding/data %.4f: the budget does not bind, the test is vacuous", end.name, r)
		}
	}
	ru, rd := float64(onUp-offUp)/float64(offUp), float64(onDown-offDown)/float64(offDown)
	t.Logf("socket: up %d -> %d bytes (+%.4f), down %d -> %d bytes (+%.4f)", offUp, onUp, ru, offDown, onDown, rd)
	if ru > upBudget*1.05 || rd > downBudget*1.05 {
		t.Errorf("socket overhead up %.4f down %.4f exceeds budgets %.2f / %.2f + 5%%", ru, rd, upBudget, downBudget)
	}
	if bad.Load() != 0 {
		t.Fatal("requests arrived altered")
	}
	// A group is kept while its last connection lingers (wire's linger.go).
	if !waitFor(func() bool { return p.counter(p.srvM, "padding_groups") == 0 }) {
		t.Fatalf("the server keeps %d padding groups with no connection open", p.counter(p.srvM, "padding_groups"))
	}
}

// A page's padding goes on after its last connection has ended, until the
// idle bound, as an observer of the page would see it: each end keeps that
// connection's socket open (it lingers) and the other drains it, so the
// bytes after the end reach the tap and every padding frame sent is
// dropped at the other end, none lost to a reset.
func TestPaddingGoesOnAfterThePagesLastConnection(t *testing.T) {
	const idle = 400 * time.Millisecond
	var bad atomic.Int64
	target := pageServer(t, &bad)
	// A padding frame every 20 ms, and a wide budget for the upload's few
	// hundred bytes, leave budget to pad past the end.
	p, tp := padPair(t, config.MaxPaddingBudget, 0.5, fixedHist(t, 0.02), idle, "")
	pageLoad(t, p.socks, target, 3, 1, 3)
	if !idleBoth(p) {
		t.Fatal("connections still open")
	}
	u0, d0 := tp.total()
	time.Sleep(idle + 200*time.Millisecond)
	u1, d1 := tp.total()
	lc, ls := p.counter(p.clM, "padding_linger_conns"), p.counter(p.srvM, "padding_linger_conns")
	t.Logf("after the page's last connection ended: %d bytes up, %d down; lingering conns: client %d, server %d",
		u1-u0, d1-d0, lc, ls)
	if lc != 1 || ls != 1 {
		t.Fatalf("lingering connections: client %d, server %d, want 1 each", lc, ls)
	}
	if u1 == u0 || d1 == d0 {
		t.Fatal("no padding on the wire after the page's last connection ended")
	}
	if !waitFor(func() bool {
		return p.counter(p.srvM, "padding_bytes_received") == p.counter(p.clM, "padding_bytes_sent") &&
			p.counter(p.clM, "padding_bytes_received") == p.counter(p.srvM, "padding_bytes_sent")
	}) {
		t.Fatalf("padding sent and dropped differ: up %d/%d down %d/%d",
			p.counter(p.clM, "padding_bytes_sent"), p.counter(p.srvM, "padding_bytes_received"),
			p.counter(p.srvM, "padding_bytes_sent"), p.counter(p.clM, "padding_bytes_received"))
	}
	if bad.Load() != 0 {
		t.Fatal("requests arrived altered")
	}
}

// Padding stops when the connection is idle: no byte on the socket once
// padding_idle has passed since the last data, while the connection stays
// open; before that, padding flowed.
func TestPaddingStopsWhenIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	var bad atomic.Int64
	target := pageServer(t, &bad)
	// Fake bursts every ~30 ms that never end and a budget that lasts
	// seconds at that rate: only the idle bound stops them in time.
	p, tp := padPair(t, config.MaxPaddingBudget, config.MaxPaddingBudget, fixedHist(t, 0.03), idle, "")
	dial, _ := loadgen.SOCKSDialer(p.socks, target, "", "")
	c, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:], 1000)
	binary.BigEndian.PutUint32(hdr[4:], 50_000)
	c.Write(append(hdr[:], body(1000, 1)...))
	if _, err := io.ReadFull(c, make([]byte, 50_000)); err != nil {
		t.Fatal(err)
	}
	// The client's last data: an empty request (no answer), so its padding
	// (frames of this size) has budget left to run until the idle bound.
	var empty [8]byte
	c.Write(empty[:])
	u0, d0 := tp.total()
	time.Sleep(idle + 150*time.Millisecond)
	u1, d1 := tp.total()
	time.Sleep(1200 * time.Millisecond)
	u2, d2 := tp.total()
	t.Logf("after the last data: %d/%d bytes up/down within idle+150ms, then %d/%d in the next 1.2 s",
		u1-u0, d1-d0, u2-u1, d2-d1)
	if u1 == u0 || d1 == d0 {
		t.Fatal("no padding after the last data before the idle bound: the test is vacuous")
	}
	if u2 != u1 || d2 != d1 {
		t.Fatalf("padding went on while idle: %d bytes up, %d down", u2-u1, d2-d1)
	}
	// And it starts again with new data.
	c.Write(append(hdr[:], body(1000, 1)...))
	if _, err := io.ReadFull(c, make([]byte, 50_000)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle / 2)
	if u3, _ := tp.total(); u3-u2 <= 1000 {
		t.Fatal("padding did not resume with new data")
	}
}

// Off by default: default configurations send and receive no padding.
func TestPaddingOffByDefault(t *testing.T) {
	if config.DefaultClient().PaddingBudget != 0 || config.DefaultServer().PaddingBudget != 0 {
		t.Fatal("padding_budget defaults to on")
	}
	var bad atomic.Int64
	target := pageServer(t, &bad)
	p := startPair(t, opts{})
	pageLoad(t, p.socks, target, 3, 4, 8)
	time.Sleep(100 * time.Millisecond) // connections closing (a spare stays open)
	for _, n := range []string{"padding_bytes_sent", "padding_bytes_received", "padding_frames_sent", "padding_conns"} {
		if v := p.counter(p.clM, n) + p.counter(p.srvM, n); v != 0 {
			t.Errorf("%s = %d with padding off", n, v)
		}
	}
}

// A client that predates padding (no hello flag) gets a reply it can parse
// and no padding frame from a padding server.
func TestPaddingServerSparesAnOldClient(t *testing.T) {
	var bad atomic.Int64
	target := pageServer(t, &bad)
	p, _ := padPair(t, 0, 5, eager(t), 0, "")
	raw, err := net.Dial("tcp", p.serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	hs, hello, err := auth.NewClientHello(auth.NoisePSK([]byte(hexOf(keyHex))), nil, 0, time.Now(), wire.AppendRequest(nil, mustDest(target)))
	if err != nil {
		t.Fatal(err)
	}
	raw.Write(hello)
	var sh [auth.ServerHelloLen]byte
	if _, err := io.ReadFull(raw, sh[:]); err != nil {
		t.Fatal(err)
	}
	reply, keys, _, err := hs.ReadServerHello(sh[:])
	if err != nil {
		t.Fatal(err)
	}
	if st, err := wire.ParseReply(reply); err != nil || st != wire.StatusOK {
		t.Fatalf("an old client's parse of the reply: %v %v", st, err)
	}
	c2s, _ := wire.NewAEAD(keys.C2S)
	s2c, _ := wire.NewAEAD(keys.S2C)
	sealer, opener := wire.NewSealer(c2s), wire.NewOpener(s2c)
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:], 500)
	binary.BigEndian.PutUint32(hdr[4:], 40_000)
	raw.Write(sealer.Append(nil, 0, append(hdr[:], body(500, 1)...)))
	raw.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	got := 0
	for {
		flags, payload, err := opener.ReadFrame(raw, nil)
		if err != nil {
			break // the deadline
		}
		if flags&wire.FlagPadding != 0 {
			t.Fatal("a padding frame went to a client that did not announce support")
		}
		got += len(payload)
	}
	if got != 40_000 {
		t.Fatalf("got %d response bytes", got)
	}
	if p.counter(p.srvM, "padding_peer_unsupported") != 1 {
		t.Fatalf("padding_peer_unsupported = %d", p.counter(p.srvM, "padding_peer_unsupported"))
	}
}

// A padding client facing a server that predates padding (its reply has
// no flag) sends it no padding frame.
func TestPaddingClientSparesAnOldServer(t *testing.T) {
	p, _ := padPair(t, 5, 0, eager(t), 0, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := config.DefaultClient()
	cfg.Server = ln.Addr().String()
	cfg.SOCKSReply = config.SOCKSReplyEarly // these tests are of early mode's mechanics; auto's own below
	cfg.KeyFile = filepath.Join(p.dir, "client.keys")
	cfg.SOCKSListen = "127.0.0.1:0"
	cfg.GatewayStatusFile = filepath.Join(p.dir, "absent.json")
	cfg.PaddingBudget = 5
	cfg.PaddingHistograms = eager(t)
	cfg.Preconnect = 0
	if err := p.cl.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			res <- err
			return
		}
		defer c.Close()
		v := &auth.Verifier{PSKs: auth.PSKs(auth.Keys{"box1": []byte(hexOf(keyHex))}), MaxSkew: time.Minute, Replay: auth.NewReplayCache(time.Minute, 100)}
		// This server starts after the client stamped its hello; a real
		// one would refuse that hello's early data as possibly replayed.
		v.Replay.Start = time.Time{}
		var hello [auth.ClientHelloLen]byte
		if _, err := io.ReadFull(c, hello[:]); err != nil {
			res <- err
			return
		}
		acc, err := v.Verify(hello[:])
		if err == nil {
			_, err = io.CopyN(io.Discard, c, int64(acc.Pad)) // the hello's random tail
		}
		if err != nil {
			res <- err
			return
		}
		sh, keys, _ := acc.ServerHello(wire.AppendReply(nil, wire.StatusOK)) // an old server: no flag
		c.Write(sh)
		ek, _ := wire.NewAEAD(acc.EarlyKey())
		c2s, _ := wire.NewAEAD(keys.C2S)
		s2c, _ := wire.NewAEAD(keys.S2C)
		o := wire.NewOpener(ek)
		if acc.Flags&auth.FlagEarlyData == 0 {
			o = wire.NewOpener(c2s)
		} else {
			o.SetNext(c2s)
		}
		s := wire.NewSealer(s2c)
		c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
		answered := false
		for {
			flags, payload, err := o.ReadFrame(c, nil)
			if err != nil {
				res <- nil // the deadline: no padding seen
				return
			}
			if flags&wire.FlagPadding != 0 {
				res <- fmt.Errorf("padding frame sent to a server that did not announce support")
				return
			}
			if len(payload) > 0 && !answered {
				answered = true
				c.Write(s.Append(nil, 0, make([]byte, 20_000)))
			}
		}
	}()
	dial, _ := loadgen.SOCKSDialer(p.socks, "127.0.0.1:9", "", "")
	c, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(make([]byte, 3000))
	if _, err := io.ReadFull(c, make([]byte, 20_000)); err != nil {
		select {
		case serr := <-res:
			t.Fatalf("%v (the old server: %v)", err, serr)
		case <-time.After(time.Second):
			t.Fatal(err)
		}
	}
	c.Write(make([]byte, 3000)) // more data after the answer: padding would follow it
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if p.counter(p.clM, "padding_peer_unsupported") == 0 {
		t.Fatal("padding_peer_unsupported not counted")
	}
}

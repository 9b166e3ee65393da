package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/client"
	"braid/proxy/internal/config"
	"braid/proxy/internal/loadgen"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/server"
	"braid/proxy/internal/socks5"
	"braid/proxy/internal/wire"
)

var keyHex = strings.Repeat("5a", 32)

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type pair struct {
	t          testing.TB
	sink       string // loadgen server address
	socks      string
	serverAddr string
	srv        *server.Server
	cl         *client.Client
	srvM, clM  *metrics.Registry
	srvLog     *syncBuf
	clLog      *syncBuf
	keyFile    string
	dir        string
	cancel     context.CancelFunc
}

// fastTimeouts shortens handshake timeouts for tests that wait for them.
var fastTimeouts = opts{
	serverMut: func(s *config.Server) {
		s.HandshakeTimeout = config.Duration(time.Second)
		s.FirstByteTimeout = config.Duration(time.Second)
	},
	clientMut: func(c *config.Client) {
		c.HandshakeTimeout = config.Duration(time.Second)
		// Spare connections must be used before the server's handshake
		// timeout closes them.
		c.PreconnectMaxAge = config.Duration(500 * time.Millisecond)
	},
}

// connected makes the client answer SOCKS only after the server has reached
// the destination, so refusals arrive as SOCKS reply codes.
func connected(c *config.Client) { c.SOCKSReply = config.SOCKSReplyConnected }

// both applies two client mutations.
func both(a, b func(*config.Client)) func(*config.Client) {
	return func(c *config.Client) { a(c); b(c) }
}

// isReset reports whether a transfer ended with the connection reset, which
// is how an early-answered SOCKS connection learns that the server refused.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

type opts struct {
	serverMut func(*config.Server)
	clientMut func(*config.Client)
	clientKey string // hex; default keyHex
	// dns, if set, answers the server's resolver; default: every name
	// but those in /etc/hosts fails at once.
	dns func(ctx context.Context, network, addr string) (net.Conn, error)
}

func writeSecret(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func startPair(t testing.TB, o opts) *pair {
	t.Helper()
	p := &pair{t: t, dir: t.TempDir(), srvLog: &syncBuf{}, clLog: &syncBuf{}}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel

	sinkLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go loadgen.Serve(sinkLn)
	p.sink = sinkLn.Addr().String()

	p.keyFile = filepath.Join(p.dir, "server.keys")
	writeSecret(t, p.keyFile, "box1 "+keyHex+"\n")
	scfg := config.DefaultServer()
	scfg.Listen = "127.0.0.1:0"
	scfg.KeyFile = p.keyFile
	scfg.AllowCIDRs = []string{"127.0.0.1/32"}
	if o.serverMut != nil {
		o.serverMut(scfg)
	}
	if err := scfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p.srvM = metrics.New()
	p.srv, err = server.New(scfg, slog.New(slog.NewTextHandler(p.srvLog, &slog.HandlerOptions{Level: slog.LevelDebug})), p.srvM)
	if err != nil {
		t.Fatal(err)
	}
	// No DNS traffic leaves the host in tests: /etc/hosts answers
	// "localhost", everything else fails at once.
	p.srv.Resolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("DNS disabled in tests")
	}}
	if o.dns != nil {
		p.srv.Resolver.Dial = o.dns
	}
	sln, err := server.Listen(ctx, scfg.Listen, slog.New(slog.NewTextHandler(p.srvLog, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p.serverAddr = sln.Addr().String()
	go p.srv.Serve(ctx, sln)

	ck := keyHex
	if o.clientKey != "" {
		ck = o.clientKey
	}
	ckFile := filepath.Join(p.dir, "client.keys")
	writeSecret(t, ckFile, "box1 "+ck+"\n")
	ccfg := config.DefaultClient()
	ccfg.Server = p.serverAddr
	ccfg.SOCKSReply = config.SOCKSReplyEarly // these tests are of early mode's mechanics; auto's own below
	ccfg.KeyFile = ckFile
	ccfg.SOCKSListen = "127.0.0.1:0"
	ccfg.GatewayStatusFile = filepath.Join(p.dir, "absent.json")
	if o.clientMut != nil {
		o.clientMut(ccfg)
	}
	if err := ccfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p.clM = metrics.New()
	p.cl, err = client.New(ccfg, slog.New(slog.NewTextHandler(p.clLog, &slog.HandlerOptions{Level: slog.LevelDebug})), p.clM)
	if err != nil {
		t.Fatal(err)
	}
	cln, err := client.ListenLocal(ctx, ccfg.SOCKSListen)
	if err != nil {
		t.Fatal(err)
	}
	p.socks = cln.Addr().String()
	go p.cl.ServeSOCKS(ctx, cln)

	t.Cleanup(func() {
		cancel()
		sinkLn.Close()
		p.cl.Shutdown(time.Second)
		p.srv.Shutdown(time.Second)
		for _, l := range []string{p.srvLog.String(), p.clLog.String()} {
			if strings.Contains(l, keyHex) || strings.Contains(l, hexOf(keyHex)) {
				t.Errorf("key material in logs")
			}
		}
		if t.Failed() {
			t.Logf("server log (tail):\n%s\nclient log (tail):\n%s", tail(p.srvLog.String()), tail(p.clLog.String()))
		}
	})
	return p
}

func hexOf(s string) string { b, _ := hex.DecodeString(s); return string(b) }

func (p *pair) transfer(target string, down, up uint64) loadgen.Result {
	p.t.Helper()
	dial, err := loadgen.SOCKSDialer(p.socks, target, "", "")
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return loadgen.Transfer(ctx, dial, 42, down, up, true)
}

func (p *pair) mustWork() {
	p.t.Helper()
	if r := p.transfer(p.sink, 100_000, 50_000); r.Err != nil {
		p.t.Fatalf("a well-behaved client was not served: %v\nserver metrics %v\nclient metrics %v", r.Err, p.srvM.Snapshot(), p.clM.Snapshot())
	}
}

// mustWorkPastDeadSpare is mustWork for a client whose spare the server
// may have just closed: its close reaches the client a moment later (an
// MPTCP DATA_FIN leaves from a kernel worker), so the client can take the
// spare as alive within that moment. One failure is allowed for it; the
// connection after it must be served.
func (p *pair) mustWorkPastDeadSpare(when string) {
	p.t.Helper()
	if r := p.transfer(p.sink, 100_000, 50_000); r.Err != nil {
		p.t.Logf("first connection %s: %v", when, r.Err)
		p.mustWork()
	}
}

func (p *pair) counter(m *metrics.Registry, name string) int64 { return m.Counter(name).Load() }

// socksRaw sends raw bytes to the SOCKS listener and returns everything the
// client sends back before closing.
func (p *pair) socksRaw(in []byte) []byte {
	p.t.Helper()
	c, err := net.Dial("tcp", p.socks)
	if err != nil {
		p.t.Fatal(err)
	}
	defer c.Close()
	c.Write(in)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	out, _ := io.ReadAll(c)
	return out
}

func TestByteExactThroughPair(t *testing.T) {
	p := startPair(t, opts{})
	r := p.transfer(p.sink, 20<<20, 5<<20)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// By name: "localhost" resolves at the server (127.0.0.1 is allowed).
	_, port, _ := net.SplitHostPort(p.sink)
	if r := p.transfer("localhost:"+port, 1<<20, 1<<20); r.Err != nil {
		t.Fatalf("by name: %v", r.Err)
	}
	if p.counter(p.srvM, "bytes_down") < 21<<20 || p.counter(p.clM, "bytes_up") < 6<<20 {
		t.Fatalf("byte counters not updated: %v", p.srvM.Snapshot())
	}
}

func TestPlaintextNeedsServerConsent(t *testing.T) {
	plain := func(c *config.Client) { c.Encrypt = false }
	p := startPair(t, opts{clientMut: both(plain, connected)})
	if r := p.transfer(p.sink, 1000, 1000); r.Err == nil || !strings.Contains(r.Err.Error(), "code 2") {
		t.Fatalf("plaintext relay accepted without allow_plaintext: %v", r.Err)
	}
	e := startPair(t, opts{clientMut: plain}) // early answer: the refusal is a reset
	if r := e.transfer(e.sink, 1000, 1000); !isReset(r.Err) {
		t.Fatalf("early: plaintext relay accepted without allow_plaintext: %v", r.Err)
	}
	if !waitFor(func() bool {
		return e.counter(e.srvM, "refused_plaintext") == 1 && e.counter(e.clM, "upstream_refused") == 1
	}) {
		t.Fatalf("early refusal not counted: server %v client %v", e.srvM.Snapshot(), e.clM.Snapshot())
	}
	q := startPair(t, opts{
		clientMut: func(c *config.Client) { c.Encrypt = false },
		serverMut: func(s *config.Server) { s.AllowPlaintext = true },
	})
	if r := q.transfer(q.sink, 5<<20, 1<<20); r.Err != nil {
		t.Fatalf("allowed plaintext relay: %v", r.Err)
	}
}

func TestWrongKey(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	// The server answers a wrong key with nothing until its handshake
	// deadline (unauthclose.go): short ones keep the test short.
	wrong := fastTimeouts
	wrong.clientKey = strings.Repeat("a5", 32)
	e := startPair(t, wrong)
	if r := e.transfer(e.sink, 10, 10); !isReset(r.Err) {
		t.Fatalf("wrong key, early answer: %v", r.Err)
	}
	wrong.clientMut = both(fastTimeouts.clientMut, connected)
	p := startPair(t, wrong)
	r := p.transfer(p.sink, 10, 10)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "code 1") {
		t.Fatalf("wrong key: %v", r.Err)
	}
	if !waitFor(func() bool {
		return p.counter(p.srvM, "auth_failures_bad_hello") == 1 && p.counter(p.clM, "upstream_auth_failures") == 1
	}) {
		t.Fatalf("counters: %v", p.srvM.Snapshot())
	}
	if !strings.Contains(p.srvLog.String(), "authentication failed") || !strings.Contains(p.clLog.String(), "wrong key") {
		t.Logf("S=%q C=%q", p.srvLog.String(), p.clLog.String())
		t.Fatal("auth failure not logged")
	}
}

// rawServer dials the server directly (no client), bypassing the client,
// and returns what the server sent and whether it closed the connection
// (rather than the read timing out after 5 s).
func (p *pair) rawServer(in []byte) ([]byte, bool) {
	p.t.Helper()
	c := p.dialServer()
	defer c.Close()
	return rawExchange(c, in)
}

// rawExchange writes in to c and returns what came back and whether the
// peer closed c (rather than the read timing out after 5 s).
func rawExchange(c net.Conn, in []byte) ([]byte, bool) {
	c.Write(in)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	out, err := io.ReadAll(c)
	var ne net.Error
	return out, !(errors.As(err, &ne) && ne.Timeout())
}

func (p *pair) dialServer() net.Conn {
	p.t.Helper()
	var d net.Dialer
	d.SetMultipathTCP(true)
	c, err := d.Dial("tcp", p.serverAddr)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// rawServerN writes in to the server and reads at most n bytes.
func (p *pair) rawServerN(in []byte, n int) []byte {
	p.t.Helper()
	c := p.dialServer()
	defer c.Close()
	c.Write(in)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	out := make([]byte, n)
	k, _ := io.ReadFull(c, out)
	return out[:k]
}

// Probes get no byte back, and the server closes them at its handshake
// deadline (1-1.5 s here), whatever their length: a hello-sized one that no
// key opens is read and discarded until then (unauthclose.go).
func TestServerRefusesUnauthenticated(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	p := startPair(t, fastTimeouts)
	junk := bytes.Repeat([]byte{0x5a}, auth.ClientHelloLen+100)
	// Plain SOCKS5 straight at the server (an open-proxy probe), HTTP,
	// a v1 hello's start, a hello-sized block of junk, nothing. Each waits
	// for the deadline on its own connection, all at once.
	probes := []string{"\x05\x01\x00\x05\x01\x00\x01\x01\x01\x01\x01\x00\x50", "GET / HTTP/1.1\r\n\r\n", "BRD\x01\x00\xffxx", string(junk), ""}
	type result struct {
		out    []byte
		closed bool
		el     time.Duration
	}
	results := make([]result, len(probes))
	var wg sync.WaitGroup
	for i, probe := range probes {
		start := time.Now()
		c := p.dialServer()
		defer c.Close()
		wg.Go(func() {
			out, closed := rawExchange(c, []byte(probe))
			results[i] = result{out, closed, time.Since(start)}
		})
	}
	wg.Wait()
	for i, probe := range probes {
		r := results[i]
		if len(r.out) != 0 {
			t.Fatalf("server answered an unauthenticated probe %q with %q", probe, r.out)
		}
		if !r.closed || r.el > 3*time.Second {
			t.Fatalf("probe %.20q: server closed %v after %v (handshake timeout 1 s)", probe, r.closed, r.el)
		}
	}
	if !waitFor(func() bool {
		return p.counter(p.srvM, "auth_failures") == 5 && p.counter(p.srvM, "auth_failures_bad_hello") == 1 &&
			p.counter(p.srvM, "auth_failures_handshake_timeout") == 3 && p.counter(p.srvM, "auth_failures_first_byte_timeout") == 1
	}) {
		t.Fatalf("auth failures not counted: %v", p.srvM.Snapshot())
	}
	p.mustWork()
}

func TestReplayedHandshake(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	p := startPair(t, fastTimeouts) // the refused replay is drained until the handshake deadline
	_, port, _ := net.SplitHostPort(p.sink)
	_, first, err := auth.NewClientHello(testPSK(), nil, 0, time.Now(), wire.AppendRequest(nil, mustDest("127.0.0.1:"+port)))
	if err != nil {
		t.Fatal(err)
	}
	if out := p.rawServerN(first, auth.ServerHelloLen); len(out) < auth.ServerHelloLen {
		t.Fatalf("genuine first flight not answered: %d bytes", len(out))
	}
	if out, closed := p.rawServer(first); len(out) != 0 || !closed {
		t.Fatalf("replayed hello answered with %d bytes (closed %v)", len(out), closed)
	}
	if !waitFor(func() bool { return p.counter(p.srvM, "auth_failures_replay") == 1 }) {
		t.Fatalf("replay not counted: %v", p.srvM.Snapshot())
	}
	if !strings.Contains(p.srvLog.String(), "reason=replay") {
		t.Fatal("replay not logged")
	}
	p.mustWork()
}

func TestSOCKSErrors(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	p := startPair(t, opts{serverMut: fastTimeouts.serverMut, clientMut: both(fastTimeouts.clientMut, connected)})
	_, port, _ := net.SplitHostPort(p.sink)
	reply := func(code byte) string {
		return "\x05\x00\x05" + string([]byte{code}) + "\x00\x01\x00\x00\x00\x00\x00\x00"
	}
	for _, tc := range []struct {
		name string
		in   string
		want string
	}{
		{"bind", "\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", reply(socks5.ReplyCmdNotSupported)},
		{"udp associate", "\x05\x01\x00\x05\x03\x00\x01\x7f\x00\x00\x01\x00\x50", reply(socks5.ReplyCmdNotSupported)},
		{"bad address type", "\x05\x01\x00\x05\x01\x00\x09", reply(socks5.ReplyAddrTypeNotSupport)},
		{"bad name", "\x05\x01\x00\x05\x01\x00\x03\x03a\x00b\x00\x50", reply(socks5.ReplyAddrTypeNotSupport)},
		{"socks4", "\x04\x01\x00\x50\x7f\x00\x00\x01\x00", ""},
		{"no methods", "\x05\x00", ""},
		{"auth only offered", "\x05\x01\x02", "\x05\xff"},
		{"bad request version", "\x05\x01\x00\x04\x01\x00\x01\x7f\x00\x00\x01\x00\x50", "\x05\x00\x05\x01\x00\x01\x00\x00\x00\x00\x00\x00"},
		{"truncated (oversized length)", "\x05\x01\x00\x05\x01\x00\x03\xffshort", "\x05\x00"},
		{"refused loopback", "\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x02" + string([]byte{byte(portNum(port) >> 8), byte(portNum(port))}), reply(socks5.ReplyNotAllowed)},
		{"refused metadata", "\x05\x01\x00\x05\x01\x00\x01\xa9\xfe\xa9\xfe\x00\x50", reply(socks5.ReplyNotAllowed)},
		{"refused private", "\x05\x01\x00\x05\x01\x00\x01\x0a\x00\x00\x01\x00\x50", reply(socks5.ReplyNotAllowed)},
		{"connection refused", "\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x01", reply(socks5.ReplyConnRefused)},
		{"unknown name", "\x05\x01\x00\x05\x01\x00\x03\x11nxdomain.invalid.\x00\x50", reply(socks5.ReplyHostUnreachable)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out := p.socksRaw([]byte(tc.in))
			if string(out) != tc.want {
				t.Fatalf("reply %q, want %q", out, tc.want)
			}
			if time.Since(start) > 4*time.Second {
				t.Fatal("connection not closed promptly")
			}
		})
	}
	if !waitFor(func() bool {
		return p.counter(p.clM, "socks_errors") >= 6 && p.counter(p.srvM, "refused_destinations") >= 3
	}) {
		t.Fatalf("errors not counted: client %v server %v", p.clM.Snapshot(), p.srvM.Snapshot())
	}
	if !strings.Contains(p.clLog.String(), "SOCKS request rejected") || !strings.Contains(p.srvLog.String(), "destination refused") {
		t.Fatal("rejections not logged")
	}
	p.mustWork()
}

func TestSlowlorisCutByHandshakeTimeout(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	p := startPair(t, fastTimeouts)
	c, err := net.Dial("tcp", p.socks)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{5}) // and then nothing
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	io.ReadAll(c)
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("idle half-greeting kept open for %v", el)
	}
	p.mustWork()
}

// A hello that fails to authenticate is not closed at once: the server
// reads and discards until its handshake deadline (between handshake
// timeout and 1.5 times it, drawn per server), or until a byte budget (at
// most a hello plus 8 KiB) is spent, so garbage of any length meets no fixed
// close.
func TestFailedHelloIsDrainedUntilTheDeadline(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	p := startPair(t, fastTimeouts)
	garbage := make([]byte, auth.ClientHelloLen)
	rand.Read(garbage)
	closedAfter := func(extra int) time.Duration {
		c, err := net.Dial("tcp", p.serverAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if _, err := c.Write(garbage); err != nil {
			t.Fatal(err)
		}
		if extra > 0 {
			c.Write(make([]byte, extra)) // may fail once the budget is spent
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		if n != 0 {
			t.Fatalf("the server answered garbage with %d bytes", n)
		}
		return time.Since(start)
	}
	if el := closedAfter(0); el < 900*time.Millisecond || el > 2500*time.Millisecond {
		t.Fatalf("a failed hello was closed after %v, not at the server's deadline (1-1.5 s)", el)
	}
	if el := closedAfter(9 << 10); el > 800*time.Millisecond {
		t.Fatalf("garbage past the byte budget was read for %v, not closed", el)
	}
	if !waitFor(func() bool { return p.counter(p.srvM, "auth_failures_bad_hello") == 2 }) {
		t.Fatalf("failures not counted: %v", p.srvM.Snapshot())
	}
	p.mustWork()
}

func TestSOCKSUserPass(t *testing.T) {
	usersFile := filepath.Join(t.TempDir(), "users")
	writeSecret(t, usersFile, "alice:s3cret\n")
	p := startPair(t, opts{clientMut: func(c *config.Client) { c.SOCKSUsersFile = usersFile }})
	dial, _ := loadgen.SOCKSDialer(p.socks, p.sink, "alice", "s3cret")
	if r := loadgen.Transfer(context.Background(), dial, 1, 1000, 1000, true); r.Err != nil {
		t.Fatal(r.Err)
	}
	bad, _ := loadgen.SOCKSDialer(p.socks, p.sink, "alice", "wrong")
	if r := loadgen.Transfer(context.Background(), bad, 1, 1000, 1000, true); r.Err == nil {
		t.Fatal("wrong password accepted")
	}
	noauth, _ := loadgen.SOCKSDialer(p.socks, p.sink, "", "")
	if r := loadgen.Transfer(context.Background(), noauth, 1, 1000, 1000, true); r.Err == nil {
		t.Fatal("no-auth accepted while users are configured")
	}
	if strings.Contains(p.clLog.String(), "s3cret") || strings.Contains(p.clLog.String(), "wrong") {
		t.Fatal("password in logs")
	}
	if p.counter(p.clM, "socks_auth_failures") != 1 {
		t.Fatalf("auth failures %d", p.counter(p.clM, "socks_auth_failures"))
	}
}

// A SOCKS client that greets but never authenticates must not make the
// client dial the server: otherwise anyone who reaches the SOCKS port could
// spend the server's per-source budget and lock the real users out.
func TestSOCKSUnauthenticatedDialsNothing(t *testing.T) {
	usersFile := filepath.Join(t.TempDir(), "users")
	writeSecret(t, usersFile, "alice:s3cret\n")
	p := startPair(t, opts{clientMut: func(c *config.Client) {
		c.SOCKSUsersFile = usersFile
		c.Preconnect = 0
	}})
	const silent = 20
	for range silent {
		c, err := net.Dial("tcp", p.socks)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// version 5, one method: user name and password; then nothing
		if _, err := c.Write([]byte{5, 1, 2}); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, 2)
		if _, err := io.ReadFull(c, reply); err != nil || reply[1] != 2 {
			t.Fatalf("method reply %v, %v", reply, err)
		}
	}
	// A dial started at the greeting reaches the loopback server in
	// microseconds; give it far longer than that.
	time.Sleep(200 * time.Millisecond)
	if n := p.counter(p.srvM, "conns_total"); n != 0 {
		t.Fatalf("%d greetings without authentication opened %d server connections", silent, n)
	}
	dial, _ := loadgen.SOCKSDialer(p.socks, p.sink, "alice", "s3cret")
	if r := loadgen.Transfer(context.Background(), dial, 1, 1000, 1000, true); r.Err != nil {
		t.Fatal(r.Err)
	}
	if n := p.counter(p.srvM, "conns_total"); n != 1 {
		t.Fatalf("one authenticated client opened %d server connections", n)
	}
}

// Destinations are logged at debug level only; a failed lookup's error
// names what was looked up.
func TestFailedLookupNamesNoDestinationAtInfo(t *testing.T) {
	p := startPair(t, opts{clientMut: connected})
	const name = "private-destination.example"
	dial, _ := loadgen.SOCKSDialer(p.socks, name+":80", "", "")
	if r := loadgen.Transfer(context.Background(), dial, 1, 100, 100, true); r.Err == nil {
		t.Fatal("a name that cannot resolve was reached")
	}
	logged := false
	for _, line := range strings.Split(p.srvLog.String(), "\n") {
		if strings.Contains(line, "level=INFO") && strings.Contains(line, "name resolution failed") {
			logged = true
			if strings.Contains(line, name) {
				t.Fatalf("destination at info level: %s", line)
			}
		}
	}
	if !logged {
		t.Fatalf("no info line for the failed lookup:\n%s", p.srvLog.String())
	}
}

// Once a client has authenticated, the pre-authentication deadline no
// longer runs: a destination that takes longer than handshake_timeout to
// resolve still gets its real answer (host unreachable), not a cut
// connection that the client takes for a dead relay.
func TestSlowDestinationGetsItsAnswer(t *testing.T) {
	p := startPair(t, opts{
		serverMut: func(s *config.Server) {
			s.HandshakeTimeout = config.Duration(300 * time.Millisecond)
			s.DialTimeout = config.Duration(5 * time.Second)
		},
		clientMut: connected,
		dns: func(context.Context, string, string) (net.Conn, error) {
			time.Sleep(time.Second)
			return nil, errors.New("slow DNS")
		},
	})
	r := p.transfer("slow.example:80", 10, 10)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "code 4") {
		t.Fatalf("want SOCKS code 4 (host unreachable), got %v\nserver log: %s", r.Err, tail(p.srvLog.String()))
	}
	if n := p.counter(p.clM, "upstream_auth_failures"); n != 0 {
		t.Fatalf("client counted %d authentication failures for a slow destination", n)
	}
}

func TestPerClientLimit(t *testing.T) {
	p := startPair(t, opts{serverMut: func(s *config.Server) { s.MaxConnsPerClient = 2 }, clientMut: connected})
	// Hold two connections open.
	var held []net.Conn
	for i := 0; i < 2; i++ {
		dial, _ := loadgen.SOCKSDialer(p.socks, p.sink, "", "")
		c, err := dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	if r := p.transfer(p.sink, 10, 10); r.Err == nil || !strings.Contains(r.Err.Error(), "code 2") {
		t.Fatalf("third connection: %v", r.Err)
	}
	for _, c := range held {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if r := p.transfer(p.sink, 10, 10); r.Err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("limit not released after connections closed")
}

func TestIdleTimeout(t *testing.T) {
	p := startPair(t, opts{serverMut: func(s *config.Server) { s.IdleTimeout = config.Duration(200 * time.Millisecond) }})
	dial, _ := loadgen.SOCKSDialer(p.socks, p.sink, "", "")
	c, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	n, _ := c.Read(make([]byte, 1))
	if n != 0 || time.Since(start) > 3*time.Second {
		t.Fatalf("idle relay not closed (read %d after %v)", n, time.Since(start))
	}
}

func TestRacePicksWorkingGateway(t *testing.T) {
	dir := t.TempDir()
	gw := filepath.Join(dir, "gw.json")
	// gw-bad's source is not a local address, so its dial fails at once;
	// it is rated best, so without racing the client falls back to the
	// kernel's choice, with racing gw-good wins.
	os.WriteFile(gw, []byte(`{"version":1,"updated":"2026-01-01T00:00:00Z","gateways":[
	 {"id":"gw-bad","source":"192.0.2.1","up":true,"backup":false,"ewma_ms":1,"rtt_ms":1,"last_change":"2026-01-01T00:00:00Z"},
	 {"id":"gw-good","source":"127.0.0.3","up":true,"backup":false,"ewma_ms":5,"rtt_ms":5,"last_change":"2026-01-01T00:00:00Z"}]}`), 0o644)
	p := startPair(t, opts{clientMut: func(c *config.Client) { c.GatewayStatusFile = gw; c.Race = true }})
	p.mustWork()
	// The spare connections the client preconnects are raced too.
	if w := p.clM.Gateway("gw-good").RaceWins.Load(); w < 1 || p.clM.Gateway("gw-bad").RaceWins.Load() != 0 {
		t.Fatalf("race wins for gw-good: %d (%v)", w, p.clM.Snapshot())
	}
	q := startPair(t, opts{clientMut: func(c *config.Client) { c.GatewayStatusFile = gw }})
	q.mustWork()
	if n := q.clM.Gateway("default").Conns.Load(); n != 1 {
		t.Fatalf("no fallback to the kernel's choice: %v", q.clM.Snapshot())
	}
}

func TestConcurrent1000NoLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	p := startPair(t, opts{})
	p.mustWork()
	time.Sleep(100 * time.Millisecond)
	g0, fd0 := runtime.NumGoroutine(), openFDs(t)

	dial, _ := loadgen.SOCKSDialer(p.socks, p.sink, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop, peakHeap := make(chan struct{}), make(chan uint64, 1)
	go func() {
		var ms runtime.MemStats
		var peak uint64
		for {
			select {
			case <-stop:
				peakHeap <- peak
				return
			case <-time.After(50 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
	}()
	// Meanwhile one host floods the server with silent connections: it
	// keeps its per-source share of pre-authentication slots (1024 by
	// default), each connection beyond it closing that source's oldest,
	// and the authenticated clients (another source) are all served.
	const flood = 1500
	floodDone := make(chan []net.Conn, 1)
	go func() {
		var held []net.Conn
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
		for i := 0; i < flood; i++ {
			if c, err := d.Dial("tcp", p.serverAddr); err == nil {
				held = append(held, c)
			}
		}
		floodDone <- held
	}()
	const n = 1000
	s := loadgen.Run(ctx, dial, n, n, 64<<10, 16<<10, true)
	close(stop)
	peak := <-peakHeap
	held := <-floodDone
	if s.Failed != 0 {
		t.Fatalf("%d of %d failed: %s", s.Failed, n, s.FirstError)
	}
	t.Logf("1000 concurrent + %d-connection flood from one source: %.2fs, setup median %.1f ms p90 %.1f ms, peak heap %d MiB", flood, s.ElapsedS, s.SetupMedMs, s.SetupP90Ms, peak>>20)
	if !waitFor(func() bool {
		return p.counter(p.srvM, "conns_evicted_preauth_source") == flood-config.DefaultMaxPreauthPerSource
	}) {
		t.Fatalf("flood: %d evicted, want %d: %v", p.counter(p.srvM, "conns_evicted_preauth_source"), flood-config.DefaultMaxPreauthPerSource, p.srvM.Snapshot())
	}
	for _, c := range held {
		c.Close()
	}
	// Everything (client, server, sink and 1000 test clients) shares this
	// process; 1000 relays hold 2x32 KiB frame buffers at each end.
	if peak > 400<<20 {
		t.Fatalf("peak heap %d MiB", peak>>20)
	}
	deadline := time.Now().Add(10 * time.Second)
	var g, fd int
	for time.Now().Before(deadline) {
		g, fd = runtime.NumGoroutine(), openFDs(t)
		if g <= g0+5 && fd <= fd0+5 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if g > g0+5 || fd > fd0+5 {
		buf := make([]byte, 1<<16)
		t.Fatalf("leak: goroutines %d -> %d, fds %d -> %d\n%s", g0, g, fd0, fd, buf[:runtime.Stack(buf, true)])
	}
	// What the server still counts are the client's idle spare connections
	// (one being replaced may still be on its way out).
	var a, spare int64
	if !waitFor(func() bool {
		a, spare = p.srvM.Snapshot()["conns_active"].(int64), p.clM.Snapshot()["preconnect_idle"].(int64)
		return a == spare
	}) {
		t.Fatalf("server still counts %d active, the client holds %d spare", a, spare)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc")
	}
	return len(ents)
}

func portNum(s string) int { var n int; fmt.Sscan(s, &n); return n }

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

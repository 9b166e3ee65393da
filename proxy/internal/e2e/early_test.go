package e2e

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
	"braid/proxy/internal/testserve"
	"braid/proxy/internal/wire"
)

// In early mode the client answers SOCKS before the server has
// reached the destination; a refusal then reaches the application as a
// reset, and is still counted and logged at both ends.
func TestEarlyAnswerRefusedDestinationResets(t *testing.T) {
	p := startPair(t, fastTimeouts)
	_, port, _ := net.SplitHostPort(p.sink)
	c, err := net.Dial("tcp", p.socks)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 127.0.0.2 is loopback but not in the test server's allow_cidrs. The
	// request and the early data (never delivered) go in one write: a
	// second write after the reset would consume the reset's error.
	c.Write([]byte("\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x02" + string([]byte{byte(portNum(port) >> 8), byte(portNum(port))}) +
		"GET / HTTP/1.0\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(4 * time.Second))
	got := make([]byte, 12)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("SOCKS answer: %v", err)
	}
	if want := "\x05\x00\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00"; string(got) != want {
		t.Fatalf("SOCKS answer %q, want %q (early success)", got, want)
	}
	n, err := c.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after the refusal: read %d bytes, err %v; want a reset", n, err)
	}
	if !waitFor(func() bool {
		return p.counter(p.srvM, "refused_destinations") == 1 && p.counter(p.clM, "upstream_refused") == 1
	}) {
		t.Fatalf("refusal not counted: server %v client %v", p.srvM.Snapshot(), p.clM.Snapshot())
	}
	if !strings.Contains(p.clLog.String(), "upstream refused") || !strings.Contains(p.srvLog.String(), "destination refused") {
		t.Fatal("refusal not logged")
	}
	p.mustWork()
}

// In auto mode (the default) a destination the client has not reached
// lately waits for the server's answer: a refused one gets its SOCKS reply
// code (0x02, not allowed by ruleset) instead of a reset; a reached one is
// answered early from its second connection on.
func TestAutoReplyGivesARefusalItsCode(t *testing.T) {
	p := startPair(t, opts{serverMut: fastTimeouts.serverMut, clientMut: func(c *config.Client) {
		fastTimeouts.clientMut(c)
		c.SOCKSReply = config.SOCKSReplyAuto
	}})
	_, port, _ := net.SplitHostPort(p.sink)
	request := "\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x02" + string([]byte{byte(portNum(port) >> 8), byte(portNum(port))})
	for range 2 { // a refusal is never remembered as reached
		c, err := net.Dial("tcp", p.socks)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(request))
		c.SetReadDeadline(time.Now().Add(4 * time.Second))
		got := make([]byte, 12)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("SOCKS answer: %v", err)
		}
		c.Close()
		if want := "\x05\x00\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00"; string(got) != want {
			t.Fatalf("SOCKS answer %q, want %q (not allowed by ruleset)", got, want)
		}
	}
	p.mustWork()
	if n := p.counter(p.clM, "socks_early_replies"); n != 0 {
		t.Fatalf("%d early replies before the sink was reached", n)
	}
	p.mustWork()
	if n := p.counter(p.clM, "socks_early_replies"); n != 1 {
		t.Fatalf("%d early replies to a destination reached before, want 1", n)
	}
}

// testPSK is the Noise PSK of the test key.
func testPSK() [auth.KeyLen]byte {
	key, _ := hex.DecodeString(keyHex)
	return auth.NoisePSK(key)
}

// earlyFlight is a client's whole first flight with early data: the hello
// (carrying the request) and one data frame sealed with the early key. It
// returns the early sealer for what follows.
func earlyFlight(t *testing.T, stamp time.Time, target string, data []byte) (*auth.ClientHandshake, []byte, *wire.Sealer) {
	t.Helper()
	hs, msg, err := auth.NewClientHello(testPSK(), nil, auth.FlagEarlyData, stamp, wire.AppendRequest(nil, mustDest(target)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := wire.NewAEAD(hs.EarlyKey())
	s := wire.NewSealer(a)
	return hs, s.Append(msg, 0, data), s
}

// The server takes data that follows the hello in the first flight, under
// the early key, and relays it once the destination is connected: one write
// from the client, the echo comes back. Data after the client's key update
// is under the forward-secret session key, and the server follows.
func TestEarlyDataInFirstFlight(t *testing.T) {
	p := startPair(t, opts{})
	echo := echoServer(t)
	msg := []byte("hello before the answer")
	hs, flight, early := earlyFlight(t, time.Now(), echo, msg)

	c, reply, keys := sendFlight(t, p, hs, flight)
	if st, err := wire.ParseReply(reply); err != nil || st != wire.StatusOK {
		t.Fatalf("reply %v %v", st, err)
	}
	a, _ := wire.NewAEAD(keys.S2C)
	o := wire.NewOpener(a)
	_, echoed, err := o.ReadFrame(c, nil)
	if err != nil || !bytes.Equal(echoed, msg) {
		t.Fatalf("echo %q, %v; want %q", echoed, err, msg)
	}
	c2s, _ := wire.NewAEAD(keys.C2S)
	c.Write(wire.NewSealer(c2s).Append(early.Update(nil, c2s), 0, []byte("after the key update")))
	if _, echoed, err := o.ReadFrame(c, nil); err != nil || string(echoed) != "after the key update" {
		t.Fatalf("echo after the key update %q, %v", echoed, err)
	}
}

// Early data stamped before the server started may have been recorded
// before a restart, where no replay cache remembers it: refused without a
// byte back. The same hello time without early data is answered.
func TestEarlyDataOlderThanServerRefused(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	p := startPair(t, fastTimeouts) // the refusal is drained until the handshake deadline
	time.Sleep(20 * time.Millisecond)
	_, port, _ := net.SplitHostPort(p.sink)
	old := time.Now().Add(-time.Second)
	_, flight, _ := earlyFlight(t, old, "127.0.0.1:"+port, []byte("x"))
	if out, closed := p.rawServer(flight); len(out) != 0 || !closed {
		t.Fatalf("early data older than the server answered with %d bytes (closed %v)", len(out), closed)
	}
	if !waitFor(func() bool { return p.counter(p.srvM, "auth_failures_replay") == 1 }) {
		t.Fatalf("not counted as a replay: %v", p.srvM.Snapshot())
	}
	_, first, _ := auth.NewClientHello(testPSK(), nil, 0, old, wire.AppendRequest(nil, mustDest("127.0.0.1:"+port)))
	if out := p.rawServerN(first, auth.ServerHelloLen); len(out) != auth.ServerHelloLen {
		t.Fatalf("hello without early data not answered: %d bytes", len(out))
	}
}

// A plaintext relay's early data (raw bytes right behind the hello) that
// arrives with the hello is read in the same buffer as the handshake and
// must still reach the destination first, ahead of the spliced rest.
func TestPlaintextEarlyDataInFirstFlight(t *testing.T) {
	p := startPair(t, opts{serverMut: func(s *config.Server) { s.AllowPlaintext = true }})
	echo := echoServer(t)
	hs, flight, err := auth.NewClientHello(testPSK(), nil, auth.FlagEarlyData|auth.FlagPlaintext, time.Now(), wire.AppendRequest(nil, mustDest(echo)))
	if err != nil {
		t.Fatal(err)
	}
	flight = append(flight, "first bytes|"...)
	c, reply, _ := sendFlight(t, p, hs, flight)
	if st, err := wire.ParseReply(reply); err != nil || st != wire.StatusOK {
		t.Fatalf("reply %v, %v", st, err)
	}
	checkEcho(t, c, "later bytes", "first bytes|later bytes")
}

// A SOCKS client may send its greeting, request and first data in one
// write without waiting for the answers; the data read along with the
// request is relayed first, ahead of the rest.
func TestSOCKSPipelinedData(t *testing.T) {
	p := startPair(t, opts{})
	echo := echoServer(t)
	_, port, _ := net.SplitHostPort(echo)
	c, err := net.Dial("tcp", p.socks)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pn := portNum(port)
	c.Write([]byte("\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01" + string([]byte{byte(pn >> 8), byte(pn)}) + "pipelined|"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	answers := make([]byte, 12)
	if _, err := io.ReadFull(c, answers); err != nil || answers[3] != 0 {
		t.Fatalf("SOCKS answers %q, %v", answers, err)
	}
	checkEcho(t, c, "after", "pipelined|after")
}

// echoServer returns the address of a loopback server that echoes every
// connection.
func echoServer(t *testing.T) string {
	t.Helper()
	return testserve.Loopback(t, testserve.Echo)
}

// checkEcho writes then on c and expects want back from an echoServer: the
// bytes sent before then come back first.
func checkEcho(t *testing.T, c net.Conn, then, want string) {
	t.Helper()
	c.Write([]byte(then))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("echo %q, %v; want %q", got, err, want)
	}
}

// sendFlight dials the server as a client box does, writes a first flight
// and checks the server's hello; it returns the connection (closed when
// the test ends), the reply and the session keys.
func sendFlight(t *testing.T, p *pair, hs *auth.ClientHandshake, flight []byte) (net.Conn, []byte, auth.SessionKeys) {
	t.Helper()
	var d net.Dialer
	d.SetMultipathTCP(true)
	c, err := d.Dial("tcp", p.serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(flight); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	sh := make([]byte, auth.ServerHelloLen)
	if _, err := io.ReadFull(c, sh); err != nil {
		t.Fatalf("server hello: %v", err)
	}
	reply, keys, _, err := hs.ReadServerHello(sh)
	if err != nil {
		t.Fatal(err)
	}
	return c, reply, keys
}

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
	"braid/proxy/internal/wire"
)

// In early mode (the default) the client answers SOCKS before the server has
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

// earlyFlight is a client's whole first flight with early data: hello,
// request and one data frame, all sealed with the early key.
func earlyFlight(t *testing.T, stamp time.Time, target string, data []byte) (*auth.ClientHello, []byte) {
	t.Helper()
	key, _ := hex.DecodeString(keyHex)
	ch, err := auth.NewClientHello("box1", key, auth.FlagEarlyData, stamp)
	if err != nil {
		t.Fatal(err)
	}
	early := auth.EarlyKey(key, ch)
	a, _ := wire.NewAEAD(early)
	s := wire.NewSealer(a)
	out := s.Append(append([]byte{}, ch.Raw...), 0, wire.AppendRequest(nil, mustDest(target)))
	return ch, s.Append(out, 0, data)
}

// The server takes data that follows the request in the first flight, under
// the early key, and relays it once the destination is connected: one write
// from the client, the echo comes back.
func TestEarlyDataInFirstFlight(t *testing.T) {
	p := startPair(t, opts{})
	echo := echoServer(t)
	msg := []byte("hello before the answer")
	ch, flight := earlyFlight(t, time.Now(), echo, msg)

	c, ns := sendFlight(t, p, ch, flight)
	key, _ := hex.DecodeString(keyHex)
	s2c := auth.NewSessionSecret(key, ch, ns).S2C()
	a, _ := wire.NewAEAD(s2c)
	o := wire.NewOpener(a)
	_, reply, err := o.ReadFrame(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := wire.ParseReply(reply); err != nil || st != wire.StatusOK {
		t.Fatalf("reply %v %v", st, err)
	}
	_, echoed, err := o.ReadFrame(c, nil)
	if err != nil || !bytes.Equal(echoed, msg) {
		t.Fatalf("echo %q, %v; want %q", echoed, err, msg)
	}
}

// Early data stamped before the server started may have been recorded
// before a restart, where no replay cache remembers it: refused without a
// byte back. The same hello time without early data is answered.
func TestEarlyDataOlderThanServerRefused(t *testing.T) {
	p := startPair(t, opts{})
	time.Sleep(20 * time.Millisecond)
	_, port, _ := net.SplitHostPort(p.sink)
	old := time.Now().Add(-time.Second)
	_, flight := earlyFlight(t, old, "127.0.0.1:"+port, []byte("x"))
	if out := p.rawServer(flight); len(out) != 0 {
		t.Fatalf("early data older than the server answered with %d bytes", len(out))
	}
	if !waitFor(func() bool { return p.counter(p.srvM, "auth_failures_replay") == 1 }) {
		t.Fatalf("not counted as a replay: %v", p.srvM.Snapshot())
	}
	key, _ := hex.DecodeString(keyHex)
	ch, _ := auth.NewClientHello("box1", key, 0, old)
	early := auth.EarlyKey(key, ch)
	a, _ := wire.NewAEAD(early)
	first := wire.NewSealer(a).Append(append([]byte{}, ch.Raw...), 0, wire.AppendRequest(nil, mustDest("127.0.0.1:"+port)))
	if out := p.rawServerN(first, auth.ServerHelloLen); len(out) != auth.ServerHelloLen {
		t.Fatalf("hello without early data not answered: %d bytes", len(out))
	}
}

// A plaintext relay's early data (raw bytes right behind the request) that
// arrives with the hello is read in the same buffer as the handshake and
// must still reach the destination first, ahead of the spliced rest.
func TestPlaintextEarlyDataInFirstFlight(t *testing.T) {
	p := startPair(t, opts{serverMut: func(s *config.Server) { s.AllowPlaintext = true }})
	echo := echoServer(t)
	key, _ := hex.DecodeString(keyHex)
	ch, err := auth.NewClientHello("box1", key, auth.FlagEarlyData|auth.FlagPlaintext, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := wire.NewAEAD(auth.EarlyKey(key, ch))
	flight := wire.NewSealer(a).Append(append([]byte{}, ch.Raw...), 0, wire.AppendRequest(nil, mustDest(echo)))
	flight = append(flight, "first bytes|"...)

	c, ns := sendFlight(t, p, ch, flight)
	b, _ := wire.NewAEAD(auth.NewSessionSecret(key, ch, ns).S2C())
	if _, reply, err := wire.NewOpener(b).ReadFrame(c, nil); err != nil || len(reply) == 0 {
		t.Fatalf("reply %q, %v", reply, err)
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

// echoServer returns the address of a loopback server that echoes one
// connection.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	return ln.Addr().String()
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
// the test ends) and the server's nonce.
func sendFlight(t *testing.T, p *pair, ch *auth.ClientHello, flight []byte) (net.Conn, [auth.NonceLen]byte) {
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
	key, _ := hex.DecodeString(keyHex)
	ns, err := auth.CheckServerHello(key, ch, sh)
	if err != nil {
		t.Fatal(err)
	}
	return c, ns
}

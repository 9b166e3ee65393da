package e2e

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/wire"
)

// FuzzServerHandshake sends arbitrary first flights to a real server over
// loopback. Without a valid hello nothing may come back and the server must
// close the connection (here: at the end of the input, which the fuzzer
// half-closes); after a valid hello (mode 1), arbitrary early-data frames
// may only produce the server's answer and frames, never a hang or a
// crash; and the server keeps serving.
func FuzzServerHandshake(f *testing.F) {
	p := startPair(f, fastTimeouts)
	_, port, _ := net.SplitHostPort(p.sink)
	target := "127.0.0.1:" + port
	// A hello under another key: the right size and shape, no key opens it.
	wrongKey := auth.NoisePSK(bytes.Repeat([]byte{0xa5}, 32))
	_, hello, _ := auth.NewClientHello(wrongKey, nil, auth.FlagEarlyData, time.Now(), wire.AppendRequest(nil, mustDest(target)))
	f.Add(byte(0), hello)
	f.Add(byte(0), []byte("\x05\x01\x00"))
	f.Add(byte(0), make([]byte, auth.ClientHelloLen))
	f.Add(byte(1), []byte{})
	f.Add(byte(1), make([]byte, wire.HeaderLen+wire.TagLen))
	f.Fuzz(func(t *testing.T, mode byte, in []byte) {
		valid := mode&1 == 1
		flight := in
		if valid {
			hs, h, err := auth.NewClientHello(testPSK(), nil, auth.FlagEarlyData, time.Now(), wire.AppendRequest(nil, mustDest(target)))
			if err != nil {
				t.Fatal(err)
			}
			_ = hs
			flight = append(h, in...)
		}
		var d net.Dialer
		c, err := d.Dial("tcp", p.serverAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(flight)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		out, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("server kept the connection open 5 s after a %d-byte flight (valid hello: %v)", len(flight), valid)
		}
		if !valid && len(out) != 0 {
			t.Fatalf("server answered %d bytes to an unauthenticated flight", len(out))
		}
		if valid && len(out) != 0 && len(out) < auth.ServerHelloLen {
			t.Fatalf("server sent %d bytes, less than its hello", len(out))
		}
	})
}

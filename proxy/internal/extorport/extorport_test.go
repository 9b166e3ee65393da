package extorport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/proxy/internal/extorport/faketor"
)

// seen is what the fake tor learnt, and the first bytes that followed
// its OKAY (the OR protocol).
type seen struct {
	faketor.Seen
	after []byte
}

// fakeTor is tor's side with cookie and the final reply.
func fakeTor(cookie Cookie, final uint16) faketor.Tor {
	return faketor.Tor{Cookie: cookie, Final: final}
}

// run connects a transport (cookie, client) to f and returns both sides'
// results.
func run(t *testing.T, f faketor.Tor, cookie Cookie, client netip.AddrPort) (seen, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan seen, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- seen{Seen: faketor.Seen{Err: err}}
			return
		}
		defer c.Close()
		s := seen{Seen: f.Serve(c)}
		if s.Err == nil && s.AuthOK && f.Final == replyOkay {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			s.after = buf[:n]
		}
		done <- s
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	herr := Handshake(c, cookie, client, "braid")
	if herr == nil {
		c.Write([]byte("OR protocol"))
	} else {
		c.Close()
	}
	return <-done, herr
}

func testCookie(b byte) Cookie {
	var c Cookie
	for i := range c {
		c[i] = b + byte(i)
	}
	return c
}

func TestHandshakeGoodCookie(t *testing.T) {
	cookie := testCookie(1)
	for _, tc := range []struct{ client, want string }{
		{"10.1.1.2:40000", "10.1.1.2:40000"},
		{"[::ffff:10.1.2.2]:4433", "10.1.2.2:4433"}, // a dual-stack listener's view of IPv4
		{"[2001:db8::7]:5678", "[2001:db8::7]:5678"},
	} {
		s, err := run(t, fakeTor(cookie, replyOkay), cookie, netip.MustParseAddrPort(tc.client))
		if err != nil {
			t.Fatalf("%s: handshake: %v (tor side: %v)", tc.client, err, s.Err)
		}
		if !s.AuthOK || s.UserAddr != tc.want || s.Transport != "braid" {
			t.Fatalf("%s: tor saw %+v, want USERADDR %s and TRANSPORT braid", tc.client, s, tc.want)
		}
		if string(s.after) != "OR protocol" {
			t.Fatalf("after OKAY tor got %q", s.after)
		}
	}
}

func TestHandshakeSkipsUnknownReplies(t *testing.T) {
	cookie := testCookie(1)
	unknown := []byte{0x10, 0x02, 0, 3, 'a', 'b', 'c'} // CONTROL with a body
	f := fakeTor(cookie, replyOkay)
	f.Extra = unknown
	s, err := run(t, f, cookie, netip.MustParseAddrPort("10.0.0.1:1"))
	if err != nil || string(s.after) != "OR protocol" {
		t.Fatalf("handshake: %v; tor saw %+v", err, s)
	}
}

func TestHandshakeBadCookie(t *testing.T) {
	s, err := run(t, fakeTor(testCookie(1), replyOkay), testCookie(2), netip.MustParseAddrPort("10.0.0.1:1"))
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "hash does not verify") {
		t.Fatalf("handshake with the wrong cookie: %v", err)
	}
	if s.AuthOK || s.UserAddr != "" {
		t.Fatalf("tor side: %+v", s)
	}
	// The error never shows the cookie.
	for _, c := range []Cookie{testCookie(1), testCookie(2)} {
		if strings.Contains(err.Error(), string(c[:])) || strings.Contains(err.Error(), "0102030405") {
			t.Fatalf("error shows a cookie: %v", err)
		}
	}
}

func TestHandshakeTorRefusesHash(t *testing.T) {
	cookie := testCookie(1)
	f := fakeTor(cookie, replyOkay)
	f.RefuseHash = true
	_, err := run(t, f, cookie, netip.MustParseAddrPort("10.0.0.1:1"))
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "refused our hash") {
		t.Fatalf("got %v", err)
	}
}

func TestHandshakeDeny(t *testing.T) {
	cookie := testCookie(1)
	s, err := run(t, fakeTor(cookie, replyDeny), cookie, netip.MustParseAddrPort("10.0.0.1:1"))
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("got %v", err)
	}
	if s.UserAddr != "10.0.0.1:1" || s.Transport != "braid" {
		t.Fatalf("tor side: %+v", s)
	}
}

func TestHandshakeNoSafeCookie(t *testing.T) {
	cookie := testCookie(1)
	f := fakeTor(cookie, replyOkay)
	f.AuthTypes = []byte{7, 9}
	_, err := run(t, f, cookie, netip.MustParseAddrPort("10.0.0.1:1"))
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "no SAFE_COOKIE") {
		t.Fatalf("got %v", err)
	}
}

func TestHandshakeTorCloses(t *testing.T) {
	for n := range 4 { // tor closes after the auth types, its hash, the status, DONE
		server := serverBytes(testCookie(1), []byte{0x10, 0x00, 0, 0})
		cut := []int{2, 2 + 2*CookieLen, 3 + 2*CookieLen, len(server) - 4}[n]
		err := handshake(&fakeConn{r: bytes.NewReader(server[:cut])}, testCookie(1), netip.MustParseAddrPort("10.0.0.1:1"), "braid", zeroReader{})
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
}

func TestParseCookie(t *testing.T) {
	good := append([]byte(CookieHeader), bytes.Repeat([]byte{7}, CookieLen)...)
	c, err := ParseCookie(good)
	if err != nil || c != Cookie(bytes.Repeat([]byte{7}, CookieLen)) {
		t.Fatalf("good cookie: %v %x", err, c)
	}
	bad := map[string][]byte{
		"short":        good[:len(good)-1],
		"long":         append(append([]byte{}, good...), '\n'),
		"wrong header": append([]byte("! Control Port Auth Cookie !!!!\x0a"), good[32:]...),
		"bare cookie":  good[32:],
		"empty":        nil,
	}
	for name, b := range bad {
		if _, err := ParseCookie(b); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "\x07") {
			t.Errorf("%s: error shows the cookie: %v", name, err)
		}
	}
	path := filepath.Join(t.TempDir(), "extended_orport_auth_cookie")
	os.WriteFile(path, good, 0o600)
	if rc, err := ReadCookie(path); err != nil || rc != c {
		t.Fatalf("ReadCookie: %v", err)
	}
	if _, err := ReadCookie(path + ".missing"); err == nil {
		t.Fatal("missing file read")
	}
}

// fakeConn reads tor's bytes from r and swallows what the transport writes.
type fakeConn struct {
	r io.Reader
}

func (f *fakeConn) Read(b []byte) (int, error)  { return f.r.Read(b) }
func (f *fakeConn) Write(b []byte) (int, error) { return len(b), nil }

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// serverBytes is everything a tor with cookie sends to a transport whose
// client nonce is all zeros (zeroReader): SAFE_COOKIE offered, its valid
// hash and nonce, status 1, then replies.
func serverBytes(cookie Cookie, replies []byte) []byte {
	serverNonce := bytes.Repeat([]byte{0x33}, CookieLen)
	b := []byte{1, 0}
	b = append(b, mac(cookie, serverHashKey, make([]byte, CookieLen), serverNonce)...)
	b = append(b, serverNonce...)
	b = append(b, 1)
	return append(b, replies...)
}

// FuzzHandshake feeds arbitrary bytes as tor's side. With the first byte
// odd, they follow a valid authentication, so the replies' parsing is
// reached too. The handshake must never panic, and succeed only where the
// bytes hold an OKAY.
func FuzzHandshake(f *testing.F) {
	f.Add([]byte{1, 0x10, 0x00, 0, 0})
	f.Add([]byte{1, 0x10, 0x01, 0, 0})
	f.Add([]byte{1, 0x10, 0x02, 0, 2, 'h', 'i', 0x10, 0x00, 0, 0})
	f.Add([]byte{1, 0x10, 0x00, 0xff, 0xff})
	f.Add([]byte{0, 1, 0})
	f.Add([]byte{0, 3, 2, 1, 0})
	cookie := testCookie(9)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		server := data[1:]
		if data[0]&1 == 1 {
			server = serverBytes(cookie, server)
		}
		err := handshake(&fakeConn{r: bytes.NewReader(server)}, cookie, netip.MustParseAddrPort("10.0.0.1:1"), "braid", zeroReader{})
		if err == nil && !bytes.Contains(server, []byte{0x10, 0x00}) {
			t.Fatalf("success without OKAY from %x", server)
		}
	})
}

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"braid/proxy/internal/config"
	"braid/proxy/internal/tlsauth"
)

// tlsFiles writes a certificate pair for name into dir and returns the
// cert path, key path and pin.
func tlsFiles(t *testing.T, dir, name string) (string, string, string) {
	t.Helper()
	cert, key, pin, err := tlsauth.Generate(name)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := tlsauth.WriteFiles(cf, kf, cert, key); err != nil {
		t.Fatal(err)
	}
	return cf, kf, pin
}

// tlsBox1 writes the server's and box1's certificates and a peers file
// that pins box1 into dir; it returns the server's TLS settings, the
// peers file and the files and pins (cert, key, server pin) box1 uses.
func tlsBox1(t *testing.T, dir string) (srv func(*config.Server), peers, ccrt, ckey, spin string) {
	t.Helper()
	scrt, skey, spin := tlsFiles(t, dir, "server")
	ccrt, ckey, cpin := tlsFiles(t, dir, "box1")
	peers = filepath.Join(dir, "peers")
	writeSecret(t, peers, "box1 "+cpin+"\n")
	srv = func(s *config.Server) {
		s.Auth, s.TLSCertFile, s.TLSKeyFile, s.TLSPeersFile = "tls", scrt, skey, peers
	}
	return srv, peers, ccrt, ckey, spin
}

func TestTLSMode(t *testing.T) {
	dir := t.TempDir()
	srv, _, ccrt, ckey, spin := tlsBox1(t, dir)
	xcrt, xkey, _ := tlsFiles(t, dir, "stranger")
	p := startPair(t, opts{serverMut: srv, clientMut: func(c *config.Client) {
		c.Auth, c.TLSCertFile, c.TLSKeyFile, c.TLSServerPin = "tls", ccrt, ckey, spin
	}})
	if r := p.transfer(p.sink, 10<<20, 3<<20); r.Err != nil {
		t.Fatalf("TLS relay: %v", r.Err)
	}
	c := startPair(t, opts{serverMut: srv, clientMut: func(c *config.Client) {
		c.Auth, c.TLSCertFile, c.TLSKeyFile, c.TLSServerPin = "tls", ccrt, ckey, spin
		connected(c)
	}})
	if r := c.transfer(c.sink, 1<<20, 1<<20); r.Err != nil {
		t.Fatalf("TLS relay, SOCKS answered when connected: %v", r.Err)
	}
	// A valid host name of 251-253 bytes does not fit TLS mode's 1-byte
	// request length: refused at the client (it used to send a wrapped
	// length, and the server read garbage), and the server saw nothing.
	label := strings.Repeat("a", 63) + "."
	long := strings.Repeat(label, 3) + strings.Repeat("b", 61) + ":80"
	if r := c.transfer(long, 10, 10); r.Err == nil || !strings.Contains(r.Err.Error(), "code 1") {
		t.Fatalf("253-byte host name in TLS mode: %v", r.Err)
	}
	if n := c.counter(c.srvM, "bad_requests"); n != 0 {
		t.Fatalf("the server read %d malformed requests", n)
	}
	// A client with an unknown certificate is refused by the server.
	q := startPair(t, opts{serverMut: srv, clientMut: func(c *config.Client) {
		c.Auth, c.TLSCertFile, c.TLSKeyFile, c.TLSServerPin = "tls", xcrt, xkey, spin
	}})
	if r := q.transfer(q.sink, 10, 10); r.Err == nil {
		t.Fatal("unpinned client certificate accepted")
	}
	if !waitFor(func() bool { return q.counter(q.srvM, "auth_failures_tls") == 1 }) {
		t.Fatalf("TLS auth failure not counted: %v", q.srvM.Snapshot())
	}
	// A client pinning another server certificate refuses the server.
	r := startPair(t, opts{serverMut: srv, clientMut: func(c *config.Client) {
		c.Auth, c.TLSCertFile, c.TLSKeyFile, c.TLSServerPin = "tls", ccrt, ckey, strings.Repeat("0", 64)
	}})
	if res := r.transfer(r.sink, 10, 10); res.Err == nil {
		t.Fatal("client accepted a server with the wrong pin")
	}
	if !waitFor(func() bool { return strings.Contains(r.clLog.String(), "server TLS handshake failed") }) {
		t.Fatal("pin mismatch not logged")
	}
}

// A peer removed from the peers file and reloaded is refused from then on,
// also on a connection it opened before the reload (a spare, kept ready
// for its next SOCKS request): the pins are those current when its
// handshake starts.
func TestTLSRevokedPeerRefusedOnItsSpare(t *testing.T) {
	dir := t.TempDir()
	srv, peers, ccrt, ckey, spin := tlsBox1(t, dir)
	_, _, otherPin := tlsFiles(t, dir, "box2")
	var scfg *config.Server
	p := startPair(t, opts{serverMut: func(s *config.Server) {
		srv(s)
		scfg = s
	}, clientMut: func(c *config.Client) {
		c.Auth, c.TLSCertFile, c.TLSKeyFile, c.TLSServerPin = "tls", ccrt, ckey, spin
		c.Preconnect = 1
	}})
	if r := p.transfer(p.sink, 1000, 1000); r.Err != nil {
		t.Fatalf("before the revocation: %v", r.Err)
	}
	if !waitFor(func() bool { return p.counter(p.srvM, "conns_total") >= 2 }) {
		t.Fatal("the client opened no spare")
	}
	writeSecret(t, peers, "box2 "+otherPin+"\n")
	if err := p.srv.Reload(scfg); err != nil {
		t.Fatal(err)
	}
	if r := p.transfer(p.sink, 1000, 1000); r.Err == nil {
		t.Fatal("a revoked peer relayed through a connection it opened before the reload")
	}
}

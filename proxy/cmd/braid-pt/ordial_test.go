package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/proxy/internal/extorport"
	"braid/proxy/internal/extorport/faketor"
	"braid/proxy/internal/pt"
	"braid/proxy/internal/socks5"
	"braid/proxy/internal/testserve"
)

// fakeExtORPort is tor's Extended ORPort (package faketor) with cookie,
// answering reply (faketor.Okay: then echo what follows, as the ORPort
// stand-in does). What each connection that reached DONE named goes to the
// returned channel.
func fakeExtORPort(t *testing.T, cookie []byte, reply uint16) (string, <-chan faketor.Seen) {
	seen := make(chan faketor.Seen, 8)
	tor := faketor.Tor{Cookie: [32]byte(cookie), Final: reply}
	addr := testserve.Loopback(t, func(c net.Conn) {
		defer c.Close()
		s := tor.Serve(c)
		if s.Err != nil || !s.AuthOK {
			return
		}
		seen <- s
		if reply == faketor.Okay {
			testserve.Echo(c)
		}
	})
	return addr, seen
}

// writeCookie writes tor's cookie file for cookie.
func writeCookie(t *testing.T, cookie []byte) string {
	path := filepath.Join(t.TempDir(), "extended_orport_auth_cookie")
	if err := os.WriteFile(path, append([]byte(extorport.CookieHeader), cookie...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostIPv4 is a non-loopback address of this host (bind tests need a
// destination the bind address applies to), or invalid.
func hostIPv4() netip.Addr {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() && ip.IsGlobalUnicast() {
				return ip.Unmap()
			}
		}
	}
	return netip.Addr{}
}

// startExtPair starts a server transport in front of the Extended ORPort
// extOR (cookie file cookieFile) and a client transport; the server
// listens on listen, the client gets clientEnv.
func startExtPair(t *testing.T, extOR, cookieFile string, listen netip.Addr, clientEnv map[string]string) (pair, string) {
	dir := t.TempDir()
	// The plain ORPort is there (tor always gives it) but must not be used.
	orport := testserve.Loopback(t, func(c net.Conn) { t.Error("the plain ORPort got a connection"); c.Close() })
	srv := startPT(t, map[string]string{
		"TOR_PT_MANAGED_TRANSPORT_VER": "1",
		"TOR_PT_STATE_LOCATION":        filepath.Join(dir, "server"),
		"TOR_PT_SERVER_TRANSPORTS":     "braid",
		"TOR_PT_SERVER_BINDADDR":       "braid-" + netip.AddrPortFrom(listen, 0).String(),
		"TOR_PT_ORPORT":                orport,
		"TOR_PT_EXTENDED_SERVER_PORT":  extOR,
		"TOR_PT_AUTH_COOKIE_FILE":      cookieFile,
		"TOR_PT_EXIT_ON_STDIN_CLOSE":   "1",
	})
	sm, ok := srv.line("SMETHOD braid ")
	f := strings.Fields(sm)
	if !ok || len(f) != 4 {
		t.Fatalf("server said %q", srv.lines)
	}
	p := pair{server: srv, serverAddr: netip.MustParseAddrPort(f[2]), pub: strings.TrimPrefix(f[3], "ARGS:pub=")}
	env := map[string]string{
		"TOR_PT_MANAGED_TRANSPORT_VER": "1",
		"TOR_PT_STATE_LOCATION":        filepath.Join(dir, "client"),
		"TOR_PT_CLIENT_TRANSPORTS":     "braid",
		"TOR_PT_EXIT_ON_STDIN_CLOSE":   "1",
	}
	for k, v := range clientEnv {
		env[k] = v
	}
	p.client = startPT(t, env)
	cm := strings.Fields(p.client.lines[1])
	if len(cm) != 4 || cm[0] != "CMETHOD" {
		t.Fatalf("client said %q", p.client.lines)
	}
	p.socks = cm[3]
	return p, filepath.Join(dir, "server", "braid-pt.log")
}

// The server transport names each client to tor's Extended ORPort: its
// address as the server saw it (here the client transport's outbound bind
// address, so both are checked) and the transport, then relays.
func TestServerNamesClientToExtendedORPort(t *testing.T) {
	cookie := make([]byte, 32)
	rand.Read(cookie)
	extOR, seen := fakeExtORPort(t, cookie, faketor.Okay)
	listen, wantHost, clientEnv := netip.MustParseAddr("127.0.0.1"), "127.0.0.1", map[string]string(nil)
	if host := hostIPv4(); host.IsValid() {
		// A non-loopback destination, so the client's bind address
		// applies: its connection comes from 127.0.0.2.
		listen, wantHost = host, "127.0.0.2"
		clientEnv = map[string]string{"TOR_PT_OUTBOUND_BIND_ADDRESS_V4": "127.0.0.2"}
	} else {
		t.Log("no non-loopback IPv4 address: the client's bind address is not tested")
	}
	p, _ := startExtPair(t, extOR, writeCookie(t, cookie), listen, clientEnv)
	c, rep := socksConnect(t, p.socks, "pub="+p.pub, p.serverAddr)
	defer c.Close()
	if rep != socks5.ReplySucceeded {
		t.Fatalf("SOCKS reply %#x", rep)
	}
	mustEcho(t, c, 64<<10, "relay through the Extended ORPort")
	s := <-seen
	ap, err := netip.ParseAddrPort(s.UserAddr)
	if err != nil || ap.Addr().String() != wantHost || ap.Port() == 0 || s.Transport != "braid" {
		t.Fatalf("tor was told USERADDR %q TRANSPORT %q; want %s:<port> and braid", s.UserAddr, s.Transport, wantHost)
	}
}

// DENY and a wrong cookie close the client's connection, with the reason in
// the server's log and never the cookie.
func TestExtendedORPortRefusals(t *testing.T) {
	cookie := make([]byte, 32)
	rand.Read(cookie)
	other := make([]byte, 32)
	rand.Read(other)
	for _, tc := range []struct {
		name       string
		fileCookie []byte
		reply      uint16
		reason     string
	}{
		{"deny", cookie, faketor.Deny, "DENY"},
		{"wrong cookie", other, faketor.Okay, "hash does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extOR, _ := fakeExtORPort(t, cookie, tc.reply)
			p, logPath := startExtPair(t, extOR, writeCookie(t, tc.fileCookie), netip.MustParseAddr("127.0.0.1"), nil)
			c, rep := socksConnect(t, p.socks, "pub="+p.pub, p.serverAddr)
			c.Close()
			if rep == socks5.ReplySucceeded {
				t.Fatal("connection relayed")
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				log, _ := os.ReadFile(logPath)
				if bytes.Contains(log, []byte("Extended ORPort refused the client's connection")) && bytes.Contains(log, []byte(tc.reason)) {
					for _, secret := range [][]byte{cookie, other} {
						if bytes.Contains(log, secret) || bytes.Contains(log, []byte(hex.EncodeToString(secret))) {
							t.Fatal("the log shows a cookie")
						}
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("no log line with the reason %q:\n%s", tc.reason, log)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// The server transport's connection to tor leaves from the outbound bind
// address, except to a loopback address (pt-spec).
func TestORDialerOutboundBind(t *testing.T) {
	peer := make(chan netip.Addr, 1)
	handle := func(c net.Conn) {
		peer <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		c.Close()
	}
	bind := pt.Common{OutboundV4: netip.MustParseAddr("127.0.0.2")}
	log := slog.New(slog.DiscardHandler)
	check := func(target string, want string) {
		t.Helper()
		env := &pt.Server{Common: bind, ORPort: netip.MustParseAddrPort(target)}
		d, err := newORDialer(env, 0, log)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := d.dial(ctx, netip.MustParseAddrPort("192.0.2.9:1"))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if got := <-peer; got.String() != want {
			t.Fatalf("connection to %s came from %s, want %s", target, got, want)
		}
	}
	check(testserve.Loopback(t, handle), "127.0.0.1") // loopback: bind ignored
	host := hostIPv4()
	if !host.IsValid() {
		t.Skip("no non-loopback IPv4 address to connect to")
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(host, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	check(ln.Addr().String(), "127.0.0.2")
}

// Without a cookie file the Extended ORPort is not used; a cookie file
// that is not one is refused at start.
func TestORDialerChoice(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	orport, ext := netip.MustParseAddrPort("127.0.0.1:9001"), netip.MustParseAddrPort("127.0.0.1:9002")
	d, err := newORDialer(&pt.Server{ORPort: orport, ExtORPort: ext}, 0, log)
	if err != nil || d.extended || d.target != orport {
		t.Fatalf("no cookie file: %+v %v", d, err)
	}
	d, err = newORDialer(&pt.Server{ORPort: orport, ExtORPort: ext, AuthCookie: writeCookie(t, make([]byte, 32))}, 0, log)
	if err != nil || !d.extended || d.target != ext {
		t.Fatalf("with cookie file: %+v %v", d, err)
	}
	bad := filepath.Join(t.TempDir(), "cookie")
	os.WriteFile(bad, []byte("not a cookie"), 0o600)
	if _, err := newORDialer(&pt.Server{ORPort: orport, ExtORPort: ext, AuthCookie: bad}, 0, log); err == nil || !strings.Contains(err.Error(), "TOR_PT_AUTH_COOKIE_FILE") {
		t.Fatalf("bad cookie file: %v", err)
	}
	if _, err := newORDialer(&pt.Server{ExtORPort: ext}, 0, log); err == nil {
		t.Fatal("Extended ORPort without cookie or ORPort accepted")
	}
}

package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"braid/proxy/internal/config"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/tlsauth"
)

// TCP_DEFER_ACCEPT on the MPTCP listener delays every MP_JOIN subflow by a
// second or more (see sockopt.Listener); the listener must not have it.
func TestListenerDoesNotDeferAccept(t *testing.T) {
	ln, err := Listen(context.Background(), "127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	rc.Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT)
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if v != 0 {
		t.Fatalf("TCP_DEFER_ACCEPT = %d on the server listener, want 0", v)
	}
}

// A TLS peers file others can write would let them add a peer: the server
// refuses it as it refuses readable key files.
func TestTLSPeersFileModeChecked(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, _, err := tlsauth.Generate("server")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, peers := filepath.Join(dir, "crt"), filepath.Join(dir, "key"), filepath.Join(dir, "peers")
	if err := tlsauth.WriteFiles(cert, key, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(peers, []byte("box1 "+strings.Repeat("ab", 32)+"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(peers, 0o666)
	cfg := config.DefaultServer()
	cfg.Auth, cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSPeersFile = "tls", cert, key, peers
	if _, err := New(cfg, slog.New(slog.DiscardHandler), metrics.New()); err == nil || !strings.Contains(err.Error(), "tls_peers_file") {
		t.Fatalf("world-writable peers file accepted: %v", err)
	}
	os.Chmod(peers, 0o600)
	if _, err := New(cfg, slog.New(slog.DiscardHandler), metrics.New()); err != nil {
		t.Fatalf("peers file 0600 refused: %v", err)
	}
}

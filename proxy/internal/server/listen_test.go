package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
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

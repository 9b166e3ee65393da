package mptcpinfo

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

func TestSubflowsLoopback(t *testing.T) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(true)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peerClosed := make(chan struct{})
	go func() {
		defer close(peerClosed)
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	var d net.Dialer
	d.SetMultipathTCP(true)
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	if ok, _ := tc.MultipathTCP(); !ok {
		t.Skip("MPTCP not available")
	}
	payload := make([]byte, 1<<20)
	if _, err := tc.Write(payload); err != nil {
		t.Fatal(err)
	}
	tc.CloseWrite()
	var sf []Subflow
	for i := 0; i < 100; i++ { // wait for the ACKs
		if sf, err = Subflows(tc); err != nil {
			t.Fatal(err)
		}
		if len(sf) == 1 && sf[0].BytesAcked >= 1<<20 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(sf) != 1 || sf[0].Local.Addr().String() != "127.0.0.1" || sf[0].Remote.String() != ln.Addr().String() || sf[0].BytesAcked < 1<<20 {
		t.Fatalf("subflows %+v", sf)
	}
	// The two ways of reading are compared below, one after the other: let
	// the counters settle first (our FIN acknowledged, the peer's FIN
	// received), or a loaded machine sees them move between the reads.
	<-peerClosed
	for i := 0; i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
		again, err := Subflows(tc)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) == 1 && again[0] == sf[0] {
			break
		}
		sf = again
	}
	// Kernels without MPTCP_FULL_INFO are asked with two options: both
	// ways must read the same subflow.
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ferr error
	raw.Control(func(fd uintptr) { _, ferr = fullInfo(fd, new(queryBufs)) })
	if ferr != nil {
		t.Logf("MPTCP_FULL_INFO unavailable (%v): both reads used the older options", ferr)
	}
	old, err := subflowsTwoQueries(tc, raw, new(queryBufs))
	if err != nil || len(old) != 1 || old[0] != sf[0] {
		t.Fatalf("two-query subflows %+v (%v), full info %+v", old, err, sf)
	}
}

func TestSubflowsPlainTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := Subflows(c.(*net.TCPConn)); err != ErrNotMPTCP {
		t.Fatalf("plain TCP: got %v, want ErrNotMPTCP", err)
	}
}

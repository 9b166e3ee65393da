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
	go func() {
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

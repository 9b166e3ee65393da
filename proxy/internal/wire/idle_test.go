package wire

import (
	"net"
	"testing"
	"time"
)

// readableWaiter's wait is for the peer's first byte without taking it, and
// returns at the peer's close and at its own side's close.
func TestReadableWaiter(t *testing.T) {
	a, b := tcpPair(t)
	done := make(chan struct{})
	go func() { readableWaiter(a)(); close(done) }()
	select {
	case <-done:
		t.Fatal("returned before the peer sent anything")
	case <-time.After(100 * time.Millisecond):
	}
	b.Write([]byte("xy"))
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the peer sent")
	}
	got := make([]byte, 2)
	if n, err := a.Read(got); n != 2 || string(got) != "xy" || err != nil {
		t.Fatalf("the read after the wait got %q, %v: the wait took data", got[:n], err)
	}

	// The peer's close is something to read (EOF), and so is this side's.
	b.Close()
	readableWaiter(a)()
	c, d := tcpPair(t)
	defer d.Close()
	go func() { time.Sleep(50 * time.Millisecond); c.Close() }()
	readableWaiter(c)()
}

func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

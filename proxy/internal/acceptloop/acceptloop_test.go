package acceptloop

import (
	"context"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first accepts with errs, then hands out the
// real listener's connections.
type failingListener struct {
	net.Listener
	errs []error
}

func (l *failingListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	return l.Listener.Accept()
}

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// Kernel shortages and a firewall's refusal are about one accept: the loop
// backs off and goes on, and the next connection is served.
func TestRunOutlastsAcceptErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: ln, errs: []error{
		acceptErr(syscall.EMFILE), acceptErr(syscall.ENOBUFS), acceptErr(syscall.ENOMEM),
		acceptErr(syscall.EPERM), acceptErr(syscall.EPROTO),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan net.Conn, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, fl, slog.New(slog.DiscardHandler), func(c net.Conn) { served <- c }) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case s := <-served:
		s.Close()
	case err := <-done:
		t.Fatalf("accept loop ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("connection not served after the accept errors")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ended by its context: %v", err)
	}
}

// A listener closed under the loop ends it with an error.
func TestRunEndsWhenListenerCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), ln, slog.New(slog.DiscardHandler), func(c net.Conn) { c.Close() })
	}()
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a closed listener ended the loop without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("loop still running on a closed listener")
	}
}

package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns two connected TCP sockets on loopback.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); ch <- c }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-ch
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

type ctr struct{ up, down atomic.Int64 }

func (c *ctr) Add(up bool, n int64) {
	if up {
		c.up.Add(n)
	} else {
		c.down.Add(n)
	}
}

func TestRelayHalfClose(t *testing.T) {
	// app <-> [aIn | relay | bOut] <-> far
	app, aIn := tcpPair(t)
	bOut, far := tcpPair(t)
	var c ctr
	done := make(chan Result, 1)
	go func() { done <- Relay(context.Background(), aIn, bOut, 0, &c, nil) }()

	up := make([]byte, 1<<20)
	rand.Read(up)
	go func() { app.Write(up); app.CloseWrite() }()
	got, err := io.ReadAll(far) // EOF must arrive at far after app's CloseWrite
	if err != nil || !bytes.Equal(got, up) {
		t.Fatalf("upstream: %d bytes, %v", len(got), err)
	}
	// The other direction still works after the half-close.
	far.Write([]byte("late reply"))
	far.CloseWrite()
	back, err := io.ReadAll(app)
	if err != nil || string(back) != "late reply" {
		t.Fatalf("downstream after half-close: %q %v", back, err)
	}
	res := <-done
	if res.Up != 1<<20 || res.Down != 10 || c.up.Load() != 1<<20 || c.down.Load() != 10 || res.Err != nil {
		t.Fatalf("result %+v counters %d/%d", res, c.up.Load(), c.down.Load())
	}
}

func TestRelayIdleTimeout(t *testing.T) {
	_, aIn := tcpPair(t)
	bOut, _ := tcpPair(t)
	start := time.Now()
	res := Relay(context.Background(), aIn, bOut, 100*time.Millisecond, nil, nil)
	if res.Reason != "idle timeout" || time.Since(start) > 2*time.Second {
		t.Fatalf("result %+v after %v", res, time.Since(start))
	}
}

// A plain TCP pair (the splice path) that keeps moving a byte every 100 ms
// is in use: an idle timeout of 1 s must not cut it, though no splice
// step fills up.
func TestRelayTrickleIsNotIdle(t *testing.T) {
	app, aIn := tcpPair(t)
	bOut, far := tcpPair(t)
	done := make(chan Result, 1)
	go func() { done <- Relay(context.Background(), aIn, bOut, time.Second, nil, nil) }()
	got := make(chan int, 32)
	go func() {
		b := make([]byte, 16)
		for {
			n, err := far.Read(b)
			if err != nil {
				close(got)
				return
			}
			got <- n
		}
	}()
	for i := range 20 {
		if _, err := app.Write([]byte{1}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
		select {
		case r := <-done:
			t.Fatalf("relay ended after %d writes 100 ms apart: %+v", i+1, r)
		default:
		}
	}
	received := 0
	for len(got) > 0 {
		received += <-got
	}
	if received != 20 {
		t.Fatalf("far side received %d of 20 bytes", received)
	}
	// Quiet from now on: the idle timeout ends it.
	select {
	case r := <-done:
		if r.Reason != "idle timeout" || r.Up != 20 {
			t.Fatalf("relay ended with %+v, want idle timeout after 20 bytes up", r)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("idle relay not closed")
	}
}

func TestRelayCancel(t *testing.T) {
	_, aIn := tcpPair(t)
	bOut, _ := tcpPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if res := Relay(ctx, aIn, bOut, 0, nil, nil); res.Reason != "shutdown" {
		t.Fatalf("result %+v", res)
	}
}

// A Deferred far side is written before its answer arrives, and nothing is
// read from it before Await; a failed Await ends the relay with its error.
func TestRelayDeferredFarSide(t *testing.T) {
	for _, fail := range []bool{false, true} {
		app, aIn := tcpPair(t)
		bOut, far := tcpPair(t)
		answered := make(chan struct{})
		d := &Deferred{Conn: bOut, Await: func() error {
			<-answered
			if fail {
				return io.ErrUnexpectedEOF
			}
			return nil
		}}
		done := make(chan Result, 1)
		go func() { done <- Relay(context.Background(), aIn, d, 5*time.Second, &ctr{}, nil) }()

		app.Write([]byte("early"))
		got := make([]byte, 5)
		if _, err := io.ReadFull(far, got); err != nil || string(got) != "early" {
			t.Fatalf("fail=%v: data written before the answer: %q %v", fail, got, err)
		}
		far.Write([]byte("reply"))
		app.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, _ := app.Read(make([]byte, 5)); n != 0 {
			t.Fatalf("fail=%v: relayed back before Await", fail)
		}
		close(answered)
		app.SetReadDeadline(time.Now().Add(5 * time.Second))
		if fail {
			res := <-done
			if res.Err != io.ErrUnexpectedEOF {
				t.Fatalf("failed Await: result %+v", res)
			}
			continue
		}
		if _, err := io.ReadFull(app, got); err != nil || string(got) != "reply" {
			t.Fatalf("after the answer: %q %v", got, err)
		}
		app.CloseWrite()
		far.CloseWrite()
		if res := <-done; res.Err != nil || res.Up != 5 || res.Down != 5 {
			t.Fatalf("result %+v", res)
		}
	}
}

// A far side that answers and hangs up while the upload is still being
// written, or before its end is forwarded (a server refusing early data:
// its reset fails the write or the FIN before Await reads) still has its
// answer read: the relay fails with Await's verdict, not with the upload's
// error.
func TestRelayReadsTheAnswerOfAFarSideThatHungUp(t *testing.T) {
	uploads := map[string]func(app *net.TCPConn){
		"write": func(app *net.TCPConn) { go app.Write(make([]byte, 8<<20)) }, // more than the buffers hold
		"fin": func(app *net.TCPConn) {
			time.Sleep(50 * time.Millisecond) // the reset is in
			app.CloseWrite()
		},
	}
	for name, upload := range uploads {
		t.Run(name, func(t *testing.T) {
			app, aIn := tcpPair(t)
			bOut, far := tcpPair(t)
			refused := errors.New("refused")
			answer := make([]byte, 2)
			var readErr error
			d := &Deferred{Conn: bOut, Await: func() error {
				time.Sleep(300 * time.Millisecond) // the upload meets the reset first
				bOut.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, readErr = io.ReadFull(bOut, answer); readErr != nil {
					return readErr
				}
				return refused
			}}
			done := make(chan Result, 1)
			go func() { done <- Relay(context.Background(), aIn, d, 0, nil, nil) }()
			far.Write([]byte("no"))
			far.SetLinger(0)
			far.Close() // a reset
			upload(app)
			res := <-done
			if res.Err != refused || string(answer) != "no" {
				t.Fatalf("relay ended with %+v, Await read %q (%v); want the answer's verdict", res, answer, readErr)
			}
		})
	}
}

func TestRelaySamplesOnce(t *testing.T) {
	cases := map[string]func(app, far *net.TCPConn){
		// Both directions end cleanly: one reading, when the second ends.
		"clean": func(app, far *net.TCPConn) {
			app.Write([]byte("up"))
			app.CloseWrite()
			io.ReadAll(far)
			far.Write([]byte("down"))
			far.CloseWrite()
			io.ReadAll(app)
		},
		// Only one direction ends, then the idle timeout closes the pair.
		"idle": func(app, far *net.TCPConn) {
			app.CloseWrite()
			io.ReadAll(far)
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			app, aIn := tcpPair(t)
			bOut, far := tcpPair(t)
			var samples atomic.Int32
			done := make(chan Result, 1)
			go func() {
				done <- Relay(context.Background(), aIn, bOut, 200*time.Millisecond, nil, func() { samples.Add(1) })
			}()
			run(app, far)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("relay did not finish")
			}
			if n := samples.Load(); n != 1 {
				t.Fatalf("sampled %d times, want once", n)
			}
		})
	}
}

// A failed relay resets the application's side: a close with a FIN would
// look like the end of its stream.
func TestRelayErrorResetsApplicationSide(t *testing.T) {
	app, aIn := tcpPair(t)
	bOut, _ := tcpPair(t)
	refused := &Deferred{Conn: bOut, Await: func() error { return errors.New("refused") }}
	res := Relay(context.Background(), aIn, refused, 0, nil, nil)
	if res.Reason != "error" {
		t.Fatalf("relay ended with %q, want error", res.Reason)
	}
	app.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := app.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("application read %v, want a reset", err)
	}
}

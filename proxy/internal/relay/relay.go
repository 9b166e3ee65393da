// Package relay copies a connection pair in both directions with correct
// half-close: when one side finishes sending (EOF), the other side's write
// half is shut and the opposite direction keeps flowing until it ends too.
// An error in either direction, the idle timeout or context cancellation
// closes both connections at once.
//
// Plain TCP/MPTCP pairs are copied with the kernel's splice path (the
// standard library takes it for *net.TCPConn); each copy step is bounded in
// bytes and, under an idle timeout, in time, so byte counters and the idle
// clock advance during long transfers and slow trickles alike.
package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Conn is one side of a relay.
type Conn interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// Deferred is a Conn that can be written at once but read only after an
// exchange completes: a client sending early data writes before the
// server's answer has arrived. Relay calls Await once, before the first
// read, and then copies the underlying Conn directly (so plain TCP keeps
// the splice path). Await must return in bounded time (its reads under a
// deadline): an upload that fails waits for it.
type Deferred struct {
	Conn
	Await func() error
}

// Counters receives byte counts as they are copied.
type Counters interface {
	// Add reports n bytes copied; up is true for the a->b direction.
	Add(up bool, n int64)
}

// Result describes a finished relay.
type Result struct {
	Up, Down int64 // bytes a->b and b->a
	Reason   string
	Err      error // first non-EOF error, if any
}

const step = 256 * 1024

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

// Relay copies a<->b until both directions end. idle > 0 closes the pair
// when no byte moved in either direction for that long. When the relay
// fails (a read, write or Await error), a, the application's side, is reset
// if it is a TCP socket, not closed with a FIN: the application must not
// take a broken relay for the end of its stream. sample, if not nil,
// runs once: when the second direction ends, before its FIN is forwarded
// (so the peer cannot have torn the connection down yet), or before the
// connections are closed early. That is the moment to read socket
// statistics that closing destroys; one reading per connection keeps its
// cost (a system call) off every direction.
func Relay(ctx context.Context, a, b Conn, idle time.Duration, ctr Counters, sample func()) Result {
	var (
		last       atomic.Int64
		closeOne   sync.Once
		sampleOnce sync.Once
		ended      atomic.Int32 // directions that ended cleanly
		reason     atomic.Value
	)
	last.Store(time.Now().UnixNano())
	takeSample := func() {
		if sample != nil {
			sampleOnce.Do(sample)
		}
	}
	closeBoth := func(why string) {
		closeOne.Do(func() {
			reason.Store(why)
			takeSample()
			if tc, ok := a.(*net.TCPConn); ok && why == "error" {
				tc.SetLinger(0)
			}
			a.Close()
			b.Close()
		})
	}
	stopCtx := context.AfterFunc(ctx, func() { closeBoth("shutdown") })
	defer stopCtx()

	var timer *time.Timer
	if idle > 0 {
		var check func()
		check = func() {
			since := time.Duration(time.Now().UnixNano() - last.Load())
			if since >= idle {
				closeBoth("idle timeout")
				return
			}
			timer.Reset(idle - since)
		}
		timer = time.AfterFunc(idle, check)
		defer timer.Stop()
	}

	// A far side whose answer is deferred: an upload that fails before the
	// answer arrived (its write, or its FIN) has most often met a server
	// that refused what was sent early, answered why and hung up (its reset
	// fails the write). Closing both then would leave Await reading a
	// closed socket; the upload's failure waits for the answer instead, so
	// that the relay fails with the answer's verdict and the caller learns
	// from it.
	var res Result
	var errMu sync.Mutex
	keepFirstErr := func(err error) {
		errMu.Lock()
		if res.Err == nil {
			res.Err = err
		}
		errMu.Unlock()
	}
	var answered chan struct{}
	if d, ok := b.(*Deferred); ok {
		answered = make(chan struct{})
		await := d.Await
		b = &Deferred{Conn: d.Conn, Await: func() error {
			// The verdict is kept before the waiting upload is let go:
			// otherwise the upload's error could be kept first.
			defer close(answered)
			err := await()
			if err != nil {
				keepFirstErr(err)
			}
			return err
		}}
	}
	awaitAnswer := func(up bool) {
		if up && answered != nil {
			<-answered
		}
	}

	var wg sync.WaitGroup
	pipe := func(dst, src Conn, up bool, total *int64) {
		defer wg.Done()
		err := copyCounted(dst, src, up, ctr, &last, total, idle/4)
		if err != nil {
			awaitAnswer(up)
			keepFirstErr(err)
			closeBoth("error")
			return
		}
		last := ended.Add(1) == 2
		if last {
			takeSample()
		}
		// A plain socket's FIN is also sent by the Close that follows the
		// last direction at once (nothing is left unread, so it is a FIN,
		// not a reset): shutting it first would cost a system call more.
		if _, plain := dst.(*net.TCPConn); last && plain {
			return
		}
		if cerr := dst.CloseWrite(); cerr != nil {
			awaitAnswer(up)
			closeBoth("error")
		}
	}
	// Downstream runs on the caller's goroutine: one goroutine (and its
	// start-up and hand-off) less per connection.
	wg.Add(2)
	go pipe(b, a, true, &res.Up)
	pipe(a, b, false, &res.Down)
	wg.Wait()
	closeBoth("done")
	res.Reason, _ = reason.Load().(string)
	if res.Reason != "error" {
		res.Err = nil // errors after an idle/shutdown close are consequences
	}
	return res
}

// copyCounted copies src to dst until EOF. tick > 0 bounds a splice step in
// time: a step returns only after step bytes, so a connection that trickles
// (an SSH session, a chat's keepalives) would otherwise move bytes for the
// whole idle timeout without the idle clock seeing one.
func copyCounted(dst, src Conn, up bool, ctr Counters, last *atomic.Int64, total *int64, tick time.Duration) error {
	if d, ok := dst.(*Deferred); ok {
		dst = d.Conn
	}
	if d, ok := src.(*Deferred); ok {
		if err := d.Await(); err != nil {
			return err
		}
		src = d.Conn
	}
	// Splice path: TCP to TCP (MPTCP sockets are *net.TCPConn too).
	if dtc, ok := dst.(*net.TCPConn); ok {
		if stc, ok := src.(*net.TCPConn); ok {
			lr := &io.LimitedReader{R: stc}
			for {
				lr.N = step
				if tick > 0 {
					stc.SetReadDeadline(time.Now().Add(tick))
				}
				n, err := dtc.ReadFrom(lr)
				account(n, up, ctr, last, total)
				if tick > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
					continue // the step's time is up: what it moved is counted
				}
				if err != nil {
					return err
				}
				if lr.N > 0 { // short copy without error: EOF
					return nil
				}
			}
		}
	}
	// Framed side: let it read straight from the source.
	if rf, ok := dst.(io.ReaderFrom); ok {
		if _, isTCP := dst.(*net.TCPConn); !isTCP {
			n, err := rf.ReadFrom(countingReader{src, up, ctr, last, total})
			_ = n
			return err
		}
	}
	// Framed source: let it write decrypted frames straight out.
	if wt, ok := src.(io.WriterTo); ok {
		if _, isTCP := src.(*net.TCPConn); !isTCP {
			_, err := wt.WriteTo(countingWriter{dst, up, ctr, last, total})
			return err
		}
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			account(int64(n), up, ctr, last, total)
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

type countingReader struct {
	r     io.Reader
	up    bool
	ctr   Counters
	last  *atomic.Int64
	total *int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		account(int64(n), c.up, c.ctr, c.last, c.total)
	}
	return n, err
}

// SyscallConn lets a framed destination wait until the source is readable
// before it takes a buffer for the read (wire.Conn.ReadFrom).
func (c countingReader) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.r.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

type countingWriter struct {
	w     io.Writer
	up    bool
	ctr   Counters
	last  *atomic.Int64
	total *int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n > 0 {
		account(int64(n), c.up, c.ctr, c.last, c.total)
	}
	return n, err
}

func account(n int64, up bool, ctr Counters, last *atomic.Int64, total *int64) {
	if n <= 0 {
		return
	}
	atomic.AddInt64(total, n)
	last.Store(time.Now().UnixNano())
	if ctr != nil {
		ctr.Add(up, n)
	}
}

// IsClosedErr reports errors that only mean "the other side went away".
func IsClosedErr(err error) bool {
	return err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF)
}

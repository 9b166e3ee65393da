package wire

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// notifyConn reports when its socket is finally closed.
type notifyConn struct {
	*net.TCPConn
	once   sync.Once
	closed chan time.Time
}

func (c *notifyConn) Close() error {
	c.once.Do(func() { c.closed <- time.Now() })
	return c.TCPConn.Close()
}

// framedPair returns two Conns facing each other over TCP loopback and the
// times their sockets close.
func framedPair(t *testing.T) (a, b *Conn, aClosed, bClosed <-chan time.Time) {
	t.Helper()
	ra, rb := tcpPair(t)
	na := &notifyConn{TCPConn: ra, closed: make(chan time.Time, 1)}
	nb := &notifyConn{TCPConn: rb, closed: make(chan time.Time, 1)}
	sa, oa := aeadPair(t)
	sb, ob := aeadPair(t)
	return NewConn(na, oa, sa), NewConn(nb, ob, sb), na.closed, nb.closed
}

// endBoth sends data from snd to rcv and ends both directions cleanly, the
// way a relay does: each reads the other's FIN frame, then both Close.
// It returns the time Close was called.
func endBoth(t *testing.T, snd, rcv *Conn, data []byte) time.Time {
	t.Helper()
	go func() {
		snd.Write(data)
		snd.CloseWrite()
	}()
	got, err := io.ReadAll(rcv)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("received %d of %d bytes, err %v", len(got), len(data), err)
	}
	rcv.CloseWrite()
	if _, err := io.ReadAll(snd); err != nil {
		t.Fatalf("sender reading the receiver's end: %v", err)
	}
	now := time.Now()
	snd.Close()
	rcv.Close()
	return now
}

func waitClosed(t *testing.T, ch <-chan time.Time, within time.Duration) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(within):
		t.Fatalf("socket still open %v after Close", within)
		return time.Time{}
	}
}

// A page's last connection pads after its FIN frame towards a peer that
// drains, until its group goes idle: the padding frames after the FIN are
// all received and dropped, nothing is reset, and the socket closes about
// Idle after the last real frame.
func TestLingeringConnPadsAfterItsFIN(t *testing.T) {
	const idle = 300 * time.Millisecond
	snd, rcv, sndClosed, rcvClosed := framedPair(t)
	snd.LingerForPadding()
	rcv.DrainOnClose()
	g, err := NewPadGroup(PadConfig{Budget: 10, Idle: idle, Hist: fixedHist(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd.JoinPadGroup(g)
	closedAt := endBoth(t, snd, rcv, bytes.Repeat([]byte("x"), 100_000))
	atClose := snd.PadTotals().PadSent

	sndAt := waitClosed(t, sndClosed, idle+MaxDrain)
	rcvAt := waitClosed(t, rcvClosed, MaxDrain)
	after := snd.PadTotals().PadSent - atClose
	t.Logf("padding %d bytes before Close (budget %d), %d after; sender closed %v, receiver %v after Close",
		atClose, 10*snd.PadTotals().DataSent, after, sndAt.Sub(closedAt), rcvAt.Sub(closedAt))
	if after <= 0 {
		t.Fatal("no padding frame after the connection's end")
	}
	if sent, got := snd.PadTotals().PadSent, rcv.PadTotals().PadReceived; sent != got {
		t.Fatalf("padding sent %d, received and dropped %d", sent, got)
	}
	if snd.werr != nil {
		t.Fatalf("a padding write failed: %v", snd.werr)
	}
	if d := sndAt.Sub(closedAt); d > idle+200*time.Millisecond {
		t.Fatalf("the sender lingered %v, past its group's idle bound %v", d, idle)
	}
	if g.Members() != 0 {
		t.Fatal("the lingering connection is still in its group")
	}
}

// Towards a peer that does not drain, the FIN frame ends the padding.
func TestNoPaddingAfterFINWithoutLinger(t *testing.T) {
	snd, rcv, sndClosed, _ := framedPair(t)
	g, err := NewPadGroup(PadConfig{Budget: 10, Idle: time.Second, Hist: fixedHist(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd.JoinPadGroup(g)
	if _, err := snd.Write(bytes.Repeat([]byte("x"), 100_000)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // let padding flow
	snd.CloseWrite()
	atFIN := snd.PadTotals().PadSent
	if atFIN == 0 {
		t.Fatal("no padding before the FIN: the test is vacuous")
	}
	if _, err := io.ReadAll(rcv); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if after := snd.PadTotals().PadSent; after != atFIN {
		t.Fatalf("%d padding bytes after the FIN frame", after-atFIN)
	}
	snd.Close()
	waitClosed(t, sndClosed, 100*time.Millisecond)
	rcv.Close()
}

// A padder that never goes idle lingers MaxLinger at most; the peer's drain
// outlasts it, so the end is a FIN on both sides, not a reset.
func TestLingerIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("takes MaxLinger")
	}
	snd, rcv, sndClosed, rcvClosed := framedPair(t)
	snd.LingerForPadding()
	rcv.DrainOnClose()
	// Eager padding with budget for seconds, an idle bound beyond the cap.
	if err := snd.StartPadding(PadConfig{Budget: 1000, Idle: time.Minute, Hist: fixedHist(t)}); err != nil {
		t.Fatal(err)
	}
	closedAt := endBoth(t, snd, rcv, bytes.Repeat([]byte("x"), 50_000))
	sndAt := waitClosed(t, sndClosed, MaxDrain)
	rcvAt := waitClosed(t, rcvClosed, MaxDrain)
	t.Logf("sender closed %v, receiver %v after Close", sndAt.Sub(closedAt), rcvAt.Sub(closedAt))
	if d := sndAt.Sub(closedAt); d < MaxLinger-100*time.Millisecond || d > MaxLinger+500*time.Millisecond {
		t.Fatalf("the sender lingered %v, want MaxLinger %v", d, MaxLinger)
	}
	if d := rcvAt.Sub(closedAt); d >= MaxDrain {
		t.Fatalf("the receiver drained until its bound (%v), not until the sender's FIN", d)
	}
	if sent, got := snd.PadTotals().PadSent, rcv.PadTotals().PadReceived; sent != got || snd.werr != nil {
		t.Fatalf("padding sent %d, dropped %d, write error %v", sent, got, snd.werr)
	}
}

// A padding frame being written when Close comes (the padder holds the
// write lock for it) does not make a clean end close without lingering;
// a writer that holds the lock for good does, after closeLockWait.
func TestCloseLingersThoughAPaddingFrameIsBeingWritten(t *testing.T) {
	for _, held := range []time.Duration{10 * time.Millisecond, 10 * closeLockWait} {
		snd, rcv, sndClosed, _ := framedPair(t)
		snd.LingerForPadding()
		rcv.DrainOnClose()
		if err := snd.StartPadding(PadConfig{Budget: 1000, Idle: 200 * time.Millisecond, Hist: fixedHist(t)}); err != nil {
			t.Fatal(err)
		}
		go func() {
			snd.Write(bytes.Repeat([]byte("x"), 50_000))
			snd.CloseWrite()
		}()
		if _, err := io.ReadAll(rcv); err != nil {
			t.Fatal(err)
		}
		rcv.CloseWrite()
		if _, err := io.ReadAll(snd); err != nil {
			t.Fatal(err)
		}
		snd.wmu.Lock() // as the padder does while it writes a frame
		go func() {
			time.Sleep(held)
			snd.wmu.Unlock()
		}()
		snd.Close()
		if lingers := snd.ClosesInBackground(); lingers != (held < closeLockWait) {
			t.Errorf("write lock held %v at Close: closes in the background %v", held, lingers)
		}
		rcv.Close()
		waitClosed(t, sndClosed, MaxDrain)
	}
}

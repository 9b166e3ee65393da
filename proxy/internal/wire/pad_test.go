package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"braid/proxy/internal/padding"
)

// A padding frame has the wire size of a data frame of as many bytes, is
// dropped by the receiver and counted; tampering with it still fails.
func TestPaddingFrameDroppedAndSameSize(t *testing.T) {
	s, o := aeadPair(t)
	pad := s.Append(nil, FlagPadding, make([]byte, 700))
	data := s.Append(nil, 0, bytes.Repeat([]byte("d"), 700))
	if len(pad) != len(data) || len(pad) != 700+FrameOverhead {
		t.Fatalf("padding frame %d bytes, data frame %d", len(pad), len(data))
	}
	stream := append(append(append([]byte{}, pad...), data...), s.Append(nil, FlagFIN, nil)...)
	a, b := net.Pipe()
	defer a.Close()
	go func() { a.Write(stream); a.Close() }()
	c := NewConn(pipeHalf{b}, o, nil)
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte("d"), 700)) {
		t.Fatalf("read %d bytes, err %v: padding reached the reader?", len(got), err)
	}
	if tot := c.PadTotals(); tot.PadReceived != int64(700+FrameOverhead) {
		t.Fatalf("padding received %d", tot.PadReceived)
	}
	for i := 0; i < len(pad); i += 7 {
		_, o2 := aeadPair(t)
		bad := append([]byte{}, pad...)
		bad[i] ^= 1
		if _, _, err := o2.ReadFrame(bytes.NewReader(bad), nil); !errors.Is(err, ErrAuth) {
			t.Fatalf("tampered padding byte %d: %v", i, err)
		}
	}
}

type pipeHalf struct{ net.Conn }

func (pipeHalf) CloseWrite() error { return nil }

// Unknown flags, and padding combined with FIN or a key update, are
// refused (authenticated, yet not understood).
func TestUnknownFrameFlagsRefused(t *testing.T) {
	for _, f := range []byte{0x08, 0x10, 0x80, FlagPadding | FlagFIN, FlagPadding | FlagKeyUpdate} {
		s, o := aeadPair(t)
		stream := s.Append(nil, f, nil)
		if _, _, err := o.ReadFrame(bytes.NewReader(stream), nil); !errors.Is(err, ErrFrameFlags) {
			t.Errorf("flags 0x%02x: err %v, want ErrFrameFlags", f, err)
		}
	}
}

func TestReplyFlags(t *testing.T) {
	for _, flags := range []byte{ReplyFlagPadding, ReplyFlagPadding | ReplyFlagLinger | ReplyFlagDrain} {
		st, f, err := ParseReplyFlags(AppendReplyFlags(nil, StatusOK, flags))
		if err != nil || st != StatusOK || f != flags {
			t.Fatal(st, f, err)
		}
	}
	// A reply with the flag is malformed to a parser without it (an old
	// client): the server only sets it for clients that asked.
	if _, err := ParseReply(AppendReplyFlags(nil, StatusOK, ReplyFlagPadding)); err == nil {
		t.Fatal("ParseReply accepted a flagged reply")
	}
	if _, _, err := ParseReplyFlags([]byte{Version | 0x10, 0}); err == nil {
		t.Fatal("unknown reply flag accepted")
	}
}

// fixedHist pads at once and never ends a fake burst: only the budget and
// the idle bound stop it.
func fixedHist(t *testing.T) *padding.Direction {
	h, err := padding.Parse(padding.TestJSON(1e-3, 1e-3, 0))
	if err != nil {
		t.Fatal(err)
	}
	return &h.Out
}

// The budget holds on one Conn: padding ≤ budget × data, and it binds.
func TestConnPaddingBudgetAndIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wire countingConn
	done := make(chan []byte)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, o := aeadPair(t)
		_ = s
		wire.Conn = c
		rc := NewConn(&wire, o, nil)
		got, _ := io.ReadAll(rc)
		done <- got
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := aeadPair(t)
	c := NewConn(raw.(*net.TCPConn), nil, s)
	const budget = 0.5
	if err := c.StartPadding(PadConfig{Budget: budget, Idle: 150 * time.Millisecond, Hist: fixedHist(t)}); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 20 {
		b := bytes.Repeat([]byte{byte(i)}, 1000+100*i)
		want = append(want, b...)
		c.Write(b)
		time.Sleep(20 * time.Millisecond)
	}
	tot := c.PadTotals()
	if r := float64(tot.PadSent) / float64(tot.DataSent); r > budget || r < 0.8*budget {
		t.Fatalf("padding/data %.3f with budget %.2f (want the budget to bind, never exceeded)", r, budget)
	}
	// Idle: nothing more once 150 ms have passed since the last write
	// (the budget is raised by a last big write first, so only idle stops it).
	for range 30 {
		c.Write(bytes.Repeat([]byte("z"), 1000))
		want = append(want, bytes.Repeat([]byte("z"), 1000)...)
	}
	time.Sleep(300 * time.Millisecond)
	before := c.PadTotals().PadSent
	time.Sleep(400 * time.Millisecond)
	if after := c.PadTotals().PadSent; after != before {
		t.Fatalf("padding went on while idle: %d -> %d bytes", before, after)
	}
	if before == tot.PadSent {
		t.Fatal("no padding after the last write: the idle check is vacuous")
	}
	c.CloseWrite()
	got := <-done
	c.Close()
	if !bytes.Equal(got, want) {
		t.Fatalf("receiver got %d bytes, want %d exact", len(got), len(want))
	}
}

type countingConn struct{ net.Conn }

func (c *countingConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

// A padding frame is at most one packet: after 16 KB frames every
// padding frame takes PadMaxWire wire bytes, after a short frame its
// size, both for a connection that pads alone and for a group's member.
func TestPaddingFramesAreOnePacket(t *testing.T) {
	wide := PadConfig{Budget: 10, Idle: 100 * time.Millisecond, Hist: fixedHist(t)}
	alone, outAlone := loopbackConn(t)
	if err := alone.StartPadding(wide); err != nil {
		t.Fatal(err)
	}
	g, err := NewPadGroup(wide, nil)
	if err != nil {
		t.Fatal(err)
	}
	member, outMember := loopbackConn(t)
	member.JoinPadGroup(g)
	for name, c := range map[string]*Conn{"alone": alone, "group member": member} {
		var frames, sent int64
		for _, size := range []int{16 * 1024, 300} {
			for range 3 {
				c.Write(bytes.Repeat([]byte("x"), size))
				time.Sleep(20 * time.Millisecond)
			}
			// idle: no padding frame of this size is left to go out
			// after the snapshot
			time.Sleep(wide.Idle + 50*time.Millisecond)
			tot := c.PadTotals()
			df, ds := tot.PadFrames-frames, tot.PadSent-sent
			frames, sent = tot.PadFrames, tot.PadSent
			want := int64(min(size+FrameOverhead, PadMaxWire))
			if df == 0 || ds != df*want {
				t.Fatalf("%s: after %d-byte frames %d padding frames of %d wire bytes in all, want each %d",
					name, size, df, ds, want)
			}
		}
	}
	finish(t, alone, outAlone)
	finish(t, member, outMember)
}

// A padding frame that falls due while the write lock is held by something
// other than a real write (the FIN frame's write, Close deciding whether to
// linger) does not end the padding: it is sent once the lock is free.
func TestPaddingGoesOnAfterTheWriteLockWasHeld(t *testing.T) {
	cfg := PadConfig{Budget: 1000, Idle: time.Second, Hist: fixedHist(t)}
	for _, grouped := range []bool{false, true} {
		snd, rcv, _, _ := framedPair(t)
		go io.Copy(io.Discard, rcv)
		if grouped {
			g, err := NewPadGroup(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			snd.JoinPadGroup(g)
		} else if err := snd.StartPadding(cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := snd.Write(bytes.Repeat([]byte("x"), 10_000)); err != nil {
			t.Fatal(err)
		}
		snd.wmu.Lock() // across a dozen of the padder's 1 ms gaps
		time.Sleep(20 * time.Millisecond)
		atRelease := snd.PadTotals().PadFrames
		snd.wmu.Unlock()
		// The frames due during the wait are not sent back to back once
		// it ends: the next gap counts from the late frame.
		deadline := time.Now().Add(50 * time.Millisecond)
		for snd.PadTotals().PadFrames == atRelease && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		first := time.Now()
		time.Sleep(2 * time.Millisecond)
		burst := snd.PadTotals().PadFrames - atRelease
		window := time.Since(first)
		time.Sleep(time.Until(deadline))
		sent := snd.PadTotals().PadFrames - atRelease
		t.Logf("grouped %v: %d padding frames in the %v from the first one after the lock was free, %d in 50 ms", grouped, burst, window, sent)
		if sent == 0 {
			t.Errorf("grouped %v: no padding frame in the 50 ms after the write lock was free", grouped)
		}
		// One a gap (1 ms), and the first two and one in flight.
		if allowed := int64(window/time.Millisecond) + 3; burst > allowed {
			t.Errorf("grouped %v: %d padding frames within %v after the wait (1 ms gaps): the frames due during the wait went back to back", grouped, burst, window)
		}
		snd.Close()
		rcv.Close()
	}
}

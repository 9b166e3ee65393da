package acceptloop

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestConnsLimit(t *testing.T) {
	var c Conns
	first, second := c.Admit(2), c.Admit(2)
	if first == nil || second == nil {
		t.Fatal("two connections under a limit of 2 refused")
	}
	if c.Admit(2) != nil {
		t.Fatal("third connection admitted over a limit of 2")
	}
	first.Done()
	if c.Admit(2) == nil {
		t.Fatal("slot not released by Done")
	}
	if got := c.Active(); got != 2 {
		t.Fatalf("Active() = %d, want 2", got)
	}
}

// A connection closed to make room frees its place at once (Free); Drain
// still waits for its goroutine (Done), and Done after Free frees nothing
// twice.
func TestConnsFreeEarly(t *testing.T) {
	var c Conns
	evicted := c.Admit(1)
	if c.Admit(1) != nil {
		t.Fatal("second connection admitted over a limit of 1")
	}
	evicted.Free()
	evicted.Free()
	if got := c.Active(); got != 0 {
		t.Fatalf("Active() = %d after Free, want 0", got)
	}
	next := c.Admit(1)
	if next == nil {
		t.Fatal("the place Free gave back was not reusable")
	}
	evicted.Done()
	if got := c.Active(); got != 1 {
		t.Fatalf("Active() = %d after the freed connection's Done, want 1 (the next one's)", got)
	}
	go func() { time.Sleep(50 * time.Millisecond); next.Done() }()
	start := time.Now()
	c.Drain(5*time.Second, func() { t.Error("cut called although the connection ended within grace") })
	if time.Since(start) < 40*time.Millisecond {
		t.Fatal("Drain returned before the admitted connection ended")
	}
}

func TestConnsDrainWaitsThenRefuses(t *testing.T) {
	var c Conns
	slot := c.Admit(10)
	go func() { time.Sleep(50 * time.Millisecond); slot.Done() }()
	start := time.Now()
	c.Drain(5*time.Second, func() { t.Error("cut called although the connection ended within grace") })
	if time.Since(start) < 40*time.Millisecond {
		t.Fatal("Drain returned before the admitted connection ended")
	}
	if c.Admit(10) != nil {
		t.Fatal("connection admitted after Drain")
	}
}

func TestConnsDrainCutsAfterGrace(t *testing.T) {
	var c Conns
	slot := c.Admit(10)
	var cut atomic.Bool
	c.Drain(20*time.Millisecond, func() { cut.Store(true); slot.Done() })
	if !cut.Load() {
		t.Fatal("cut not called when grace ran out")
	}
}

// Admissions racing with Drain: run with -race; every admitted connection
// must be waited for.
func TestConnsAdmitRacingDrain(t *testing.T) {
	var c Conns
	var running atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if slot := c.Admit(1 << 20); slot != nil {
				running.Add(1)
				go func() { time.Sleep(time.Millisecond); running.Add(-1); slot.Done() }()
			}
		}
	}()
	time.Sleep(5 * time.Millisecond)
	c.Drain(5*time.Second, func() { t.Error("cut called") })
	close(stop)
	if n := running.Load(); n != 0 {
		t.Fatalf("Drain returned with %d admitted connections still running", n)
	}
}

package acceptloop

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestConnsLimit(t *testing.T) {
	var c Conns
	if !c.Admit(2) || !c.Admit(2) {
		t.Fatal("two connections under a limit of 2 refused")
	}
	if c.Admit(2) {
		t.Fatal("third connection admitted over a limit of 2")
	}
	c.Done()
	if !c.Admit(2) {
		t.Fatal("slot not released by Done")
	}
	if got := c.Active(); got != 2 {
		t.Fatalf("Active() = %d, want 2", got)
	}
}

func TestConnsDrainWaitsThenRefuses(t *testing.T) {
	var c Conns
	c.Admit(10)
	go func() { time.Sleep(50 * time.Millisecond); c.Done() }()
	start := time.Now()
	c.Drain(5*time.Second, func() { t.Error("cut called although the connection ended within grace") })
	if time.Since(start) < 40*time.Millisecond {
		t.Fatal("Drain returned before the admitted connection ended")
	}
	if c.Admit(10) {
		t.Fatal("connection admitted after Drain")
	}
}

func TestConnsDrainCutsAfterGrace(t *testing.T) {
	var c Conns
	c.Admit(10)
	var cut atomic.Bool
	c.Drain(20*time.Millisecond, func() { cut.Store(true); c.Done() })
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
			if c.Admit(1 << 20) {
				running.Add(1)
				go func() { time.Sleep(time.Millisecond); running.Add(-1); c.Done() }()
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

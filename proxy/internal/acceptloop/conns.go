package acceptloop

import (
	"sync"
	"sync/atomic"
	"time"
)

// Conns counts the connections an accept loop hands out, enforces the
// concurrent limit and lets shutdown drain them.
//
// Admission and Drain share a lock: once Drain has started no connection is
// admitted, so its wait cannot miss one accepted at the same moment (a bare
// WaitGroup.Add racing with Wait can, and the race detector says so).
type Conns struct {
	mu       sync.Mutex
	draining bool
	wg       sync.WaitGroup
	active   atomic.Int64
}

// Admit reserves a slot for a new connection; false when at limit or
// draining (the caller closes the connection). Every admitted connection
// must call Done when it ends.
func (c *Conns) Admit(limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining || c.active.Load() >= int64(limit) {
		return false
	}
	c.active.Add(1)
	c.wg.Add(1)
	return true
}

// Done releases a slot taken by Admit.
func (c *Conns) Done() {
	c.active.Add(-1)
	c.wg.Done()
}

// Active is the number of admitted connections still running.
func (c *Conns) Active() int64 { return c.active.Load() }

// Drain stops admitting and waits up to grace for admitted connections to
// end; when grace runs out it calls cut (which must make them end) and waits
// for the rest.
func (c *Conns) Drain(grace time.Duration, cut func()) {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cut()
		<-done
	}
}

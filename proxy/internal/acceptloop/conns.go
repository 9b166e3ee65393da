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

// Admit reserves a place for a new connection; nil when at limit or
// draining (the caller closes the connection). Every admitted connection
// must call its Slot's Done when it ends.
func (c *Conns) Admit(limit int) *Slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining || c.active.Load() >= int64(limit) {
		return nil
	}
	c.active.Add(1)
	c.wg.Add(1)
	return &Slot{conns: c}
}

// Slot is one admitted connection's place under the limit.
type Slot struct {
	conns *Conns
	freed atomic.Bool
}

// Free gives the place back before the connection's goroutine ends: a
// connection the server has closed to make room (a pre-authentication
// eviction) must not count against the limit while its goroutine waits to
// be scheduled, or a fast flood would fill max_conns with connections
// already closed and refuse the clients the eviction made room for.
// Drain still waits for the goroutine (Done). Calling it again does nothing.
func (s *Slot) Free() {
	if s.freed.CompareAndSwap(false, true) {
		s.conns.active.Add(-1)
	}
}

// Done ends the connection: it frees the place if Free has not, and lets
// Drain stop waiting for it.
func (s *Slot) Done() {
	s.Free()
	s.conns.wg.Done()
}

// Active is the number of places held: admitted connections that have
// neither ended nor been freed early.
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

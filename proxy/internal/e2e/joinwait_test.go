package e2e

import (
	"testing"
	"time"

	"braid/proxy/internal/config"
)

// On loopback no second subflow ever joins: join_wait must run out at its
// bound, be counted, and leave the relay working; with join_wait 0 (the
// default) no connection waits. (That the join does come first against
// braid's kernel is checked on the wire in the VM:
// eval/tests/vm/test_page_split.py, series "no spares, client waits".)
func TestJoinWaitIsBoundedAndCounted(t *testing.T) {
	const wait = 150 * time.Millisecond
	p := startPair(t, opts{clientMut: func(c *config.Client) {
		c.Preconnect = 0
		c.JoinWait = config.Duration(wait)
	}})
	start := time.Now()
	p.mustWork()
	took := time.Since(start)
	waits, timeouts := p.counter(p.clM, "join_waits"), p.counter(p.clM, "join_wait_timeouts")
	waited := time.Duration(p.counter(p.clM, "join_wait_us_total")) * time.Microsecond
	if waits != 1 || timeouts != 1 {
		t.Fatalf("join_waits %d, join_wait_timeouts %d: want 1 and 1 (nothing joins on loopback)", waits, timeouts)
	}
	if waited < wait || waited > wait+500*time.Millisecond || took < wait {
		t.Fatalf("waited %s (transfer %s) with join_wait %s", waited, took, wait)
	}

	q := startPair(t, opts{clientMut: func(c *config.Client) { c.Preconnect = 0 }})
	q.mustWork()
	if n := q.counter(q.clM, "join_waits"); n != 0 {
		t.Fatalf("join_wait 0 waited %d times", n)
	}
}

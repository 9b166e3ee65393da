package metrics

import (
	"fmt"
	"testing"
	"time"
)

// Looking up an existing counter must not wait for the registry's lock
// (held here as a slow creation or a status request would): the relay
// path looks counters up per connection and per relayed chunk.
func TestCounterLookupTakesNoGlobalLock(t *testing.T) {
	r := New()
	r.Counter("bytes_up").Add(1)
	r.Gateway("gw1")
	r.mu.Lock()
	defer r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.Counter("bytes_up").Add(1)
		r.Gateway("gw1").Up.Add(1)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("counter lookup blocked on the registry lock")
	}
}

// The server keys subflow counters by client address: an address space's
// worth of clients must not grow them without bound.
func TestSubflowCountersBounded(t *testing.T) {
	r := New()
	for i := 0; i < 5000; i++ {
		g := r.Subflow(fmt.Sprintf("198.51.%d.%d", i/256, i%256))
		g.Conns.Add(1)
		g.Up.Add(10)
	}
	sfs := r.Snapshot()["subflows"].(map[string]map[string]int64)
	if len(sfs) != MaxSubflowKeys+1 {
		t.Fatalf("%d subflow keys, want %d addresses + %q", len(sfs), MaxSubflowKeys, OtherSubflows)
	}
	var conns, bytes int64
	for _, v := range sfs {
		conns += v["subflows"]
		bytes += v["bytes_sent"]
	}
	if conns != 5000 || bytes != 50000 || sfs[OtherSubflows]["subflows"] != 5000-MaxSubflowKeys {
		t.Fatalf("totals lost: %d subflows %d bytes, other %v", conns, bytes, sfs[OtherSubflows])
	}
}

package client

import (
	"fmt"
	"testing"

	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
)

func testSet(t *testing.T, policy string, weights ...int) *relaySet {
	t.Helper()
	cfg := config.DefaultClient()
	for i, w := range weights {
		cfg.Servers = append(cfg.Servers, config.Relay{Address: fmt.Sprintf("relay%d.example:7443", i), Weight: w})
	}
	cfg.ServerPolicy = policy
	s, err := newRelaySet(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func host(i int) dest.Addr { return dest.Addr{Name: fmt.Sprintf("site%d.example", i), Port: 443} }

// failover takes the first relay that is up, and the first of all when
// none is; the relay that just failed is never picked again at once.
func TestPickFailover(t *testing.T) {
	s := testSet(t, config.PolicyFailover, 1, 1, 1)
	if r := s.pick(dest.Addr{}, nil); r != s.list[0] {
		t.Fatalf("picked %s", r.addr)
	}
	s.list[0].h.up.Store(false)
	if r := s.pick(dest.Addr{}, nil); r != s.list[1] {
		t.Fatalf("with the first down: %s", r.addr)
	}
	if r := s.pick(dest.Addr{}, s.list[1]); r != s.list[2] {
		t.Fatalf("retry after the second failed: %s", r.addr)
	}
	for _, r := range s.list {
		r.h.up.Store(false)
	}
	if r := s.pick(dest.Addr{}, nil); r != s.list[0] {
		t.Fatalf("all down: %s, want the first", r.addr)
	}
	one := testSet(t, config.PolicyFailover, 1)
	if r := one.pick(dest.Addr{}, one.list[0]); r != nil {
		t.Fatalf("a single relay that failed was picked for the retry")
	}
}

// spread deals exact shares per round of sum(weights) connections, and a
// relay that is down gets none while the others keep their proportion.
func TestPickSpreadExactShares(t *testing.T) {
	s := testSet(t, config.PolicySpread, 1, 2, 3)
	count := map[*relayHost]int{}
	for range 6 * 10 {
		count[s.pick(dest.Addr{}, nil)]++
	}
	for i, r := range s.list {
		if count[r] != 10*r.weight {
			t.Errorf("relay %d (weight %d): %d of 60", i, r.weight, count[r])
		}
	}
	s.list[2].h.up.Store(false)
	clear(count)
	for range 3 * 10 {
		count[s.pick(dest.Addr{}, nil)]++
	}
	if count[s.list[2]] != 0 || count[s.list[0]] < 8 || count[s.list[0]] > 12 {
		t.Errorf("with relay 2 down: %d, %d, %d of 30", count[s.list[0]], count[s.list[1]], count[s.list[2]])
	}
}

// sticky keeps a host on one relay, and a relay going down moves only its
// own hosts; weights shift the hosts' shares.
func TestPickStickyMovesOnlyTheDeadRelaysHosts(t *testing.T) {
	s := testSet(t, config.PolicySticky, 1, 1, 2)
	const n = 4000
	before := make([]*relayHost, n)
	count := map[*relayHost]int{}
	for i := range n {
		before[i] = s.pick(host(i), nil)
		count[before[i]]++
		if again := s.pick(host(i), nil); again != before[i] {
			t.Fatalf("host %d: %s then %s", i, before[i].addr, again.addr)
		}
	}
	// Expected 1000, 1000, 2000; sd about 27 and 32: ±200 is over 6 sd.
	for i, want := range []int{1000, 1000, 2000} {
		if c := count[s.list[i]]; c < want-200 || c > want+200 {
			t.Errorf("relay %d has %d hosts, want about %d", i, c, want)
		}
	}
	s.list[1].h.up.Store(false)
	for i := range n {
		after := s.pick(host(i), nil)
		if before[i] != s.list[1] && after != before[i] {
			t.Fatalf("host %d moved from %s to %s", i, before[i].addr, after.addr)
		}
		if after == s.list[1] {
			t.Fatalf("host %d still on the dead relay", i)
		}
	}
}

// A reload keeps the health of relays that stay in the list.
func TestReloadKeepsRelayHealth(t *testing.T) {
	old := testSet(t, config.PolicyFailover, 1, 1)
	old.list[1].h.up.Store(false)
	cfg := config.DefaultClient()
	cfg.Servers = []config.Relay{{Address: "relay1.example:7443"}, {Address: "new.example:7443"}}
	s, err := newRelaySet(cfg, old)
	if err != nil {
		t.Fatal(err)
	}
	if s.list[0].h != old.list[1].h || s.list[0].h.up.Load() || !s.list[1].h.up.Load() {
		t.Fatal("health not carried over by address")
	}
}

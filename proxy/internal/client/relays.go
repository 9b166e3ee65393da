package client

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
)

// relayHost is one braid-proxy server the client may use (an entry of
// servers, or the single server).
type relayHost struct {
	addr   string
	weight int
	pub    []byte // its static public key, or nil
	h      *relayHealth
}

// relayHealth is what the client knows about a relay's health and use. It
// is kept across reloads for an address that stays in the list.
type relayHealth struct {
	// up is false from a failed dial, handshake or health check until a
	// health check or a real connection succeeds. A relay starts up.
	up atomic.Bool
	// probeFails counts consecutive failed health checks.
	probeFails atomic.Int32
	// lastUse is when a connection last chose the relay (unix ns): spares
	// are kept only for relays in use.
	lastUse atomic.Int64

	conns, failures, probeFailures, cut atomic.Int64

	mu       sync.Mutex
	inflight map[*inflight]struct{}
}

// inflight is a relayed connection, tracked so that it can be closed when
// its relay is found dead instead of hanging until the idle timeout.
type inflight struct{ raw *net.TCPConn }

func (h *relayHealth) add(f *inflight) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight[f] = struct{}{}
}

func (h *relayHealth) remove(f *inflight) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.inflight, f)
}

func (h *relayHealth) active() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return int64(len(h.inflight))
}

// cutAll closes every connection in flight and returns how many.
func (h *relayHealth) cutAll() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range h.inflight {
		f.raw.Close()
	}
	return len(h.inflight)
}

// relaySet is the configured relays and the policy that chooses among
// them.
type relaySet struct {
	list   []*relayHost // in configuration order (failover's order)
	policy string

	mu  sync.Mutex
	bag []*relayHost // spread: the tickets left in this round
}

// newRelaySet builds the relays of cfg, keeping the health of those old
// already knew.
func newRelaySet(cfg *config.Client, old *relaySet) (*relaySet, error) {
	known := map[string]*relayHealth{}
	if old != nil {
		for _, r := range old.list {
			known[r.addr] = r.h
		}
	}
	s := &relaySet{policy: cfg.ServerPolicy}
	for _, rc := range cfg.Relays() {
		r := &relayHost{addr: rc.Address, weight: rc.Weight, h: known[rc.Address]}
		if r.h == nil {
			r.h = &relayHealth{inflight: map[*inflight]struct{}{}}
			r.h.up.Store(true)
		}
		if rc.ServerPublicKey != "" {
			var err error
			if r.pub, err = auth.ParsePublicKey(rc.ServerPublicKey); err != nil {
				return nil, err
			}
		}
		s.list = append(s.list, r)
	}
	return s, nil
}

// byAddr returns the relay with address addr, or nil.
func (s *relaySet) byAddr(addr string) *relayHost {
	for _, r := range s.list {
		if r.addr == addr {
			return r
		}
	}
	return nil
}

// needsDest reports whether the choice depends on the destination (so a
// connection cannot be opened before its request is read).
func (s *relaySet) needsDest() bool {
	return s.policy == config.PolicySticky && len(s.list) > 1
}

// pick chooses the relay for a new connection to d, never not (the relay
// that just failed it); nil if there is none left. Down relays are
// skipped; when every candidate is down, they are tried anyway (a dial
// that works marks its relay up again), in the list's order.
func (s *relaySet) pick(d dest.Addr, not *relayHost) *relayHost {
	var healthy, all []*relayHost
	for _, r := range s.list {
		if r == not {
			continue
		}
		all = append(all, r)
		if r.h.up.Load() {
			healthy = append(healthy, r)
		}
	}
	if len(healthy) == 0 {
		if len(all) == 0 {
			return nil
		}
		return all[0]
	}
	switch s.policy {
	case config.PolicySpread:
		return s.draw(healthy)
	case config.PolicySticky:
		return rendezvous(d, healthy)
	}
	return healthy[0]
}

// draw deals spread's choice from a shuffled bag holding weight tickets
// per relay, refilled when empty: random order, but each round of
// sum(weights) connections gives every relay exactly its share (i.i.d.
// draws would stray by several per cent over a few hundred connections).
// Tickets of relays that are not candidates now are skipped, so the
// healthy ones keep their proportions.
func (s *relaySet) draw(candidates []*relayHost) *relayHost {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range 2 {
		for i, r := range s.bag {
			if slices.Contains(candidates, r) {
				s.bag = slices.Delete(s.bag, i, i+1)
				return r
			}
		}
		s.bag = s.bag[:0]
		for _, r := range s.list {
			for range r.weight {
				s.bag = append(s.bag, r)
			}
		}
		rand.Shuffle(len(s.bag), func(i, j int) { s.bag[i], s.bag[j] = s.bag[j], s.bag[i] })
	}
	return candidates[0] // unreachable: every candidate has a ticket
}

// rendezvous is weighted rendezvous (highest random weight) hashing of d's
// host over candidates: each relay scores weight / -ln(u), u a uniform
// hash of (host, relay), and the highest wins. A destination stays with
// its relay while that one is healthy, and when a relay leaves the
// candidates only its own destinations move (each to its second choice).
func rendezvous(d dest.Addr, candidates []*relayHost) *relayHost {
	host := d.Name
	if host == "" {
		host = d.IP.String()
	}
	var best *relayHost
	bestScore := math.Inf(-1)
	for _, r := range candidates {
		h := fnv.New64a()
		h.Write([]byte(host))
		h.Write([]byte{0})
		h.Write([]byte(r.addr))
		u := (float64(mix(h.Sum64())>>11) + 0.5) / (1 << 53) // in (0, 1)
		score := float64(r.weight) / -math.Log(u)
		if score > bestScore {
			best, bestScore = r, score
		}
	}
	return best
}

// mix is SplitMix64's finaliser: FNV's output alone is poorly spread in
// its high bits for inputs that differ only at the end.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

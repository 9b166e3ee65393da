package auth

import (
	"sync"
	"time"
)

// ReplayCache remembers the nonces of accepted hellos for TTL, per client
// id. Each id has its own budget (PerID entries): when an id's share is
// full its new hellos are refused (fail closed, rather than forget nonces
// that may still be replayed), and no key holder can use up another's.
// Memory is bounded by the number of ids in the key file times PerID.
//
// A TTL change (a reload with a new max_clock_skew) never shortens the life
// of entries already stored: a longer TTL applies to them at once (they
// must outlive the wider clock window), a shorter one only once every entry
// stored under the old TTL has expired.
type ReplayCache struct {
	PerID int
	Start time.Time // nothing before this was seen

	mu         sync.Mutex
	ttl        time.Duration
	pendingTTL time.Duration // a shorter TTL waiting for pendingAt
	pendingAt  time.Time
	ids        map[string]*idNonces
	entries    int
}

// idNonces is one client id's share; order is insertion order, which is
// expiry order because every entry expires TTL after it was added.
type idNonces struct {
	seen  map[[PublicLen]byte]struct{}
	order []replayEntry
	head  int
}

type replayEntry struct {
	nonce [PublicLen]byte
	added time.Time
}

// NewReplayCache returns a cache that keeps nonces for ttl, at most perID
// per client id.
func NewReplayCache(ttl time.Duration, perID int) *ReplayCache {
	// Hello times have millisecond resolution.
	start := time.UnixMilli(time.Now().UnixMilli())
	return &ReplayCache{PerID: perID, Start: start, ttl: ttl, ids: map[string]*idNonces{}}
}

// Add records id's nonce and reports whether it was new (and within id's
// budget).
func (c *ReplayCache) Add(id string, nonce [PublicLen]byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pendingAt.IsZero() && !now.Before(c.pendingAt) {
		c.ttl, c.pendingAt = c.pendingTTL, time.Time{}
	}
	n := c.ids[id]
	if n == nil {
		n = &idNonces{seen: map[[PublicLen]byte]struct{}{}}
		c.ids[id] = n
	}
	for n.head < len(n.order) && now.Sub(n.order[n.head].added) > c.ttl {
		delete(n.seen, n.order[n.head].nonce)
		n.head++
		c.entries--
	}
	if n.head > 1024 && n.head*2 > len(n.order) {
		n.order = append(n.order[:0:0], n.order[n.head:]...)
		n.head = 0
	}
	if _, dup := n.seen[nonce]; dup {
		return false
	}
	if c.PerID > 0 && len(n.seen) >= c.PerID {
		return false
	}
	n.seen[nonce] = struct{}{}
	n.order = append(n.order, replayEntry{nonce, now})
	c.entries++
	return true
}

// SetTTL changes how long nonces are kept (on configuration reload),
// never shortening the life of entries already stored.
func (c *ReplayCache) SetTTL(ttl time.Duration) { c.setTTL(ttl, time.Now()) }

func (c *ReplayCache) setTTL(ttl time.Duration, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pendingAt.IsZero() && !now.Before(c.pendingAt) {
		c.ttl, c.pendingAt = c.pendingTTL, time.Time{}
	}
	if ttl >= c.ttl {
		c.ttl, c.pendingAt = ttl, time.Time{}
		return
	}
	// Entries added until now may need the current TTL: keep it until
	// the last of them has expired under it.
	c.pendingTTL, c.pendingAt = ttl, now.Add(c.ttl)
}

// Len returns the number of remembered nonces.
func (c *ReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries
}

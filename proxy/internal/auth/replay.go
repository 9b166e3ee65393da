package auth

import (
	"sync"
	"time"
)

// ReplayCache remembers the nonces of accepted hellos for TTL, per client
// id. Each id has its own budget (PerID entries), so no key holder can use
// up another's, and memory is bounded by the number of ids in the key file
// times PerID. When an id's share is full (a key holder sending hellos
// faster than PerID per TTL), what a forgotten nonce would let through
// decides:
//   - a hello with early data is refused (Add returns ReplayFull): its data
//     must never be acted on twice;
//   - a hello without early data is accepted and its id's oldest nonce
//     forgotten (fail open): replayed, such a hello makes the server dial
//     its destination once more, and nothing else, since the replayer
//     cannot produce the data that follows under the session keys.
//
// So a flood of valid hellos for one id costs that id's clients their
// early data (they fall back to waiting for the server's answer), never
// their connections.
//
// A TTL change (a reload with a new max_clock_skew) never shortens the life
// of entries already stored: a longer TTL applies to them at once (they
// must outlive the wider clock window), a shorter one only once every entry
// stored under the old TTL has expired.
type ReplayCache struct {
	PerID int       // set before use, or with SetPerID
	Start time.Time // nothing before this was seen

	mu         sync.Mutex
	ttl        time.Duration
	pendingTTL time.Duration // a shorter TTL waiting for pendingAt
	pendingAt  time.Time
	ids        map[string]*idNonces
	entries    int
	forgotten  int64
}

// idNonces is one client id's share; order is insertion order, which is
// expiry order because every entry expires TTL after it was added.
type idNonces struct {
	seen  map[[PublicLen]byte]struct{}
	order []replayEntry
	head  int
}

// dropOldest forgets the id's oldest nonce.
func (n *idNonces) dropOldest() {
	delete(n.seen, n.order[n.head].nonce)
	n.head++
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

// ReplayResult is what Add made of a nonce.
type ReplayResult int

// Add's results.
const (
	ReplayFresh ReplayResult = iota // new, recorded
	ReplaySeen                      // recorded before: a replay
	ReplayFull                      // new, but id's share is full and the hello has early data
)

// Add records id's nonce and reports whether it was new. early says the
// hello carries early data (see ReplayCache for what a full share does).
func (c *ReplayCache) Add(id string, nonce [PublicLen]byte, now time.Time, early bool) ReplayResult {
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
		n.dropOldest()
		c.entries--
	}
	if n.head > 1024 && n.head*2 > len(n.order) {
		n.order = append(n.order[:0:0], n.order[n.head:]...)
		n.head = 0
	}
	if _, dup := n.seen[nonce]; dup {
		return ReplaySeen
	}
	if c.PerID > 0 && len(n.seen) >= c.PerID {
		if early {
			return ReplayFull
		}
		n.dropOldest()
		c.entries--
		c.forgotten++
	}
	n.seen[nonce] = struct{}{}
	n.order = append(n.order, replayEntry{nonce, now})
	c.entries++
	return ReplayFresh
}

// Forgotten returns how many nonces were forgotten before their time to
// make room for a hello without early data.
func (c *ReplayCache) Forgotten() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forgotten
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

// SetPerID changes each id's share (0: unbounded); shares already larger
// shrink as their entries expire or are forgotten.
func (c *ReplayCache) SetPerID(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.PerID = n
}

// Len returns the number of remembered nonces.
func (c *ReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries
}

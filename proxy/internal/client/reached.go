package client

import (
	"sync"
	"time"
)

// An early SOCKS reply tells the application it is connected before the
// server has reached the destination; a destination the server then
// refuses (its policy, or nothing listening) can only show as a reset
// connection. Under socks_reply "auto" the early reply goes only to
// destinations this client reached within reachedTTL: the first connection
// to a destination, and any after a refusal, wait for the server's answer
// and get the real SOCKS reply code (0x02 "not allowed by ruleset", 0x05
// "connection refused", ...), one round trip later. Pages reuse few
// destinations, so most connections still answer at once.
const (
	reachedTTL = 10 * time.Minute
	reachedMax = 4096 // destinations remembered; a full set forgets the stalest
)

// reachedSet remembers when each destination ("host:port") was last
// reached through the server.
type reachedSet struct {
	mu sync.Mutex
	at map[string]time.Time
}

// recent reports whether dest was reached within reachedTTL of now.
func (r *reachedSet) recent(dest string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[dest]
	return ok && now.Sub(t) < reachedTTL
}

// add records that dest was reached at now.
func (r *reachedSet) add(dest string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = make(map[string]time.Time)
	}
	if _, ok := r.at[dest]; !ok && len(r.at) >= reachedMax {
		r.evict(now)
	}
	r.at[dest] = now
}

// forget drops dest: the server refused it or failed to reach it.
func (r *reachedSet) forget(dest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.at, dest)
}

// evict makes room: every expired entry, or else the stalest one. r.mu is
// held.
func (r *reachedSet) evict(now time.Time) {
	var stalest string
	for d, t := range r.at {
		if now.Sub(t) >= reachedTTL {
			delete(r.at, d)
		} else if stalest == "" || t.Before(r.at[stalest]) {
			stalest = d
		}
	}
	if len(r.at) >= reachedMax {
		delete(r.at, stalest)
	}
}

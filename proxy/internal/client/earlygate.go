package client

import (
	"sync"
	"time"
)

// Early data is refused by a server whose replay cache is full for this
// client's id (someone holding the key sends hellos faster than the
// server can remember them; see auth.ReplayCache). The connection that
// met the refusal fails; the following ones wait for the server's answer
// before sending data (one round trip more, the server accepts those
// hellos whatever its cache holds) for earlyBackoffMin, doubling while
// refusals go on, up to earlyBackoffMax.
const (
	earlyBackoffMin = time.Minute
	earlyBackoffMax = 16 * time.Minute
)

// earlyGate decides whether a connection may send early data.
type earlyGate struct {
	mu      sync.Mutex
	until   time.Time
	backoff time.Duration
}

// allowed reports whether early data may be sent at now.
func (g *earlyGate) allowed(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !now.Before(g.until)
}

// refused records a refusal at now and returns how long early data is
// now off.
func (g *earlyGate) refused(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Before(g.until) {
		return g.until.Sub(now) // a connection opened before the last refusal
	}
	switch {
	case g.backoff == 0:
		g.backoff = earlyBackoffMin
	case g.backoff < earlyBackoffMax:
		g.backoff *= 2
	}
	g.until = now.Add(g.backoff)
	return g.backoff
}

// accepted records early data the server took: the next refusal starts
// from the shortest back-off again.
func (g *earlyGate) accepted() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.until.IsZero() && time.Now().After(g.until) {
		g.backoff, g.until = 0, time.Time{}
	}
}

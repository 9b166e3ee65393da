// Package preauth bounds the connections a server holds before they have
// authenticated. Such a connection costs the sender nothing but a TCP
// handshake, so without a bound one host opening connections faster than
// the handshake timeout closes them would take every slot and lock out
// every client. The limits are:
//
//   - Max for all unauthenticated connections together, kept below the
//     server's max_conns so that the rest stays reserved for connections
//     that have authenticated;
//   - PerSource for one source: an IPv4 address, or an IPv6 /64 (a single
//     host usually owns a whole /64, so counting addresses would not bind
//     it).
//
// A connection takes a slot at accept (Admit) and gives it back once it has
// authenticated or closed (the returned release function, idempotent).
package preauth

import (
	"net"
	"net/netip"
	"sync"
)

// Limiter counts unauthenticated connections in total and per source.
type Limiter struct {
	mu       sync.Mutex
	total    int
	perSrc   map[netip.Prefix]int
	rejected func(reason string) // optional: counts refusals
}

// New returns an empty limiter; rejected (may be nil) is called with
// "total" or "source" for each refused connection.
func New(rejected func(reason string)) *Limiter {
	return &Limiter{perSrc: map[netip.Prefix]int{}, rejected: rejected}
}

// SourceKey is the unit PerSource counts: the IPv4 address, or the IPv6 /64.
func SourceKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// AddrOf returns the IP of a net.Addr from an accepted TCP connection.
func AddrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// Admit takes a slot for a connection from src, or returns nil when the
// total (max) or the source's share (perSource) is used up. The function
// it returns gives the slot back; calling it again does nothing.
func (l *Limiter) Admit(src netip.Addr, max, perSource int) func() {
	key := SourceKey(src)
	l.mu.Lock()
	reason := ""
	switch {
	case l.total >= max:
		reason = "total"
	case l.perSrc[key] >= perSource:
		reason = "source"
	default:
		l.total++
		l.perSrc[key]++
	}
	l.mu.Unlock()
	if reason != "" {
		if l.rejected != nil {
			l.rejected(reason)
		}
		return nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.perSrc[key]--; l.perSrc[key] <= 0 {
				delete(l.perSrc, key)
			}
		})
	}
}

// Active returns the number of unauthenticated connections held.
func (l *Limiter) Active() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.total)
}

// Sources returns how many sources hold slots (the map's size: it must
// shrink back, or a scan from many addresses would grow it for good).
func (l *Limiter) Sources() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.perSrc)
}

// Package preauth bounds the connections a server holds before they have
// authenticated. Such a connection costs the sender nothing but a TCP
// handshake, so without a bound one host opening connections faster than
// the handshake timeout closes them would take every slot. The limits are:
//
//   - a total for all unauthenticated connections together, kept below the
//     server's max_conns so that the rest stays reserved for connections
//     that have authenticated;
//   - a share per source: an IPv4 address, or an IPv6 /64 (a single
//     host usually owns a whole /64, so counting addresses would not bind
//     it).
//
// A full limit does not refuse the new connection: it takes the slot of
// the oldest one held, that of its own source when the source's share is
// used up, else the oldest of all, and that one is closed. A connection
// whose first bytes have already arrived is passed over while an older
// silent one can go instead: its hello waits only for its goroutine to be
// scheduled, and a flood of silent connections must not close it in that
// moment (a client's own refill dial did, right after it sent its hello on
// a spare). Refusing would let a flood keep every slot with one connection
// per timeout and lock out every client, users behind the flooding address
// (one carrier-grade NAT) included. Evicting the oldest costs an honest
// client nothing unless the flood opens a full share of connections within
// the round trip or two its hello takes to arrive.
//
// A connection takes a slot at accept (Admit) and gives it back once it has
// authenticated or closed (the returned release function, idempotent).
package preauth

import (
	"container/list"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limiter counts unauthenticated connections in total and per source.
type Limiter struct {
	mu      sync.Mutex
	held    *list.List // of *slot, oldest first
	perSrc  map[netip.Prefix]*list.List
	evicted func(reason string) // optional: counts evictions
}

// slot is one held connection, in the list of all and in its source's.
type slot struct {
	key       netip.Prefix
	close     func()
	speaking  func() bool // may be nil: never spoken
	all, mine *list.Element
	freed     bool
}

// evictScan bounds how many of the oldest connections an eviction looks at
// for a silent one (each look is a system call under the limiter's lock).
const evictScan = 8

// New returns an empty limiter; evicted (may be nil) is called with
// "total" or "source" for each connection closed to make room.
func New(evicted func(reason string)) *Limiter {
	return &Limiter{held: list.New(), perSrc: map[netip.Prefix]*list.List{}, evicted: evicted}
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

// Admit takes a slot for a connection from src, closed with closeConn if
// it is evicted later; speaking (may be nil) reports whether the
// connection's first bytes have arrived. When the total or the source's
// share (perSource) is used up, the oldest silent connection of the
// source, or else of all, is evicted first (the oldest if the first
// evictScan have all spoken). The function it returns gives the slot
// back; calling it again, or after an eviction, does nothing.
func (l *Limiter) Admit(src netip.Addr, total, perSource int, closeConn func(), speaking func() bool) func() {
	key := SourceKey(src)
	s := &slot{key: key, close: closeConn, speaking: speaking}
	var victim *slot
	reason := ""
	l.mu.Lock()
	if mine := l.perSrc[key]; mine != nil && mine.Len() >= max(perSource, 1) {
		victim, reason = oldestSilent(mine), "source"
	} else if l.held.Len() >= max(total, 1) {
		victim, reason = oldestSilent(l.held), "total"
	}
	if victim != nil {
		l.free(victim)
	}
	mine := l.perSrc[key]
	if mine == nil {
		mine = list.New()
		l.perSrc[key] = mine
	}
	s.mine = mine.PushBack(s)
	s.all = l.held.PushBack(s)
	l.mu.Unlock()
	if victim != nil {
		if l.evicted != nil {
			l.evicted(reason)
		}
		victim.close()
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !s.freed {
			l.free(s)
		}
	}
}

// oldestSilent returns the oldest slot in held (non-empty) whose
// connection has not spoken, among the first evictScan, else the oldest.
func oldestSilent(held *list.List) *slot {
	e := held.Front()
	for n := 0; e != nil && n < evictScan; e, n = e.Next(), n+1 {
		if s := e.Value.(*slot); s.speaking == nil || !s.speaking() {
			return s
		}
	}
	return held.Front().Value.(*slot)
}

// HasInput reports whether bytes from the peer wait in c's receive queue
// (a peek that neither blocks nor takes Go's read lock, which the
// connection's own goroutine may hold while it waits).
func HasInput(c syscall.Conn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, _ = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	return n > 0
}

// free removes s from both lists; the caller holds l.mu.
func (l *Limiter) free(s *slot) {
	s.freed = true
	l.held.Remove(s.all)
	mine := l.perSrc[s.key]
	mine.Remove(s.mine)
	if mine.Len() == 0 {
		delete(l.perSrc, s.key)
	}
}

// Active returns the number of unauthenticated connections held.
func (l *Limiter) Active() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.held.Len())
}

// Sources returns how many sources hold slots (the map's size: it must
// shrink back, or a scan from many addresses would grow it for good).
func (l *Limiter) Sources() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.perSrc)
}

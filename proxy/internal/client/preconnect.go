package client

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"

	"golang.org/x/sys/unix"
)

// preconnect keeps a few MPTCP connections to the server open and idle,
// their handshakes done, so that a new client connection sends its hello at
// once instead of waiting a round trip for a handshake of its own (browsers
// preconnect for the same reason). With early data this makes the
// application's first bytes leave the client box as soon as its SOCKS
// request is read.
//
// An idle connection is used only within preconnect_max_age, which must stay
// below the server's handshake timeout (the server closes connections that
// send nothing for that long); the pool replaces it earlier, at refreshAt of
// that age. The pool is kept filled only while the client is in use: the
// pool is refilled for activeWindow after the last client connection, so an
// idle client box does not keep re-dialing. A pooled connection is used only
// if its first subflow's gateway is still one the dial would choose and the
// server has not closed it. A spare is probed until its other subflows have
// joined (joinprobe.go), and take prefers spares that are joined.
type preconnect struct {
	c    *Client
	wake chan struct{}

	mu   sync.Mutex
	idle []idleConn // newest last

	lastUse atomic.Int64 // unix nanoseconds of the last take
}

type idleConn struct {
	conn   *net.TCPConn
	gwID   string
	server string
	born   time.Time

	probing bool // the join probe is on (startJoinProbe)
	joined  bool // more than the first subflow
}

// activeWindow is how long after the last client connection the pool is
// kept filled.
const activeWindow = time.Minute

// refreshAt is the fraction of preconnect_max_age at which an idle
// connection is replaced, so that one is always young enough to take.
const refreshAt = 0.75

// Dial failures back off between these bounds.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

func newPreconnect(c *Client) *preconnect {
	p := &preconnect{c: c, wake: make(chan struct{}, 1)}
	c.metrics.Gauge("preconnect_idle", func() int64 {
		p.mu.Lock()
		defer p.mu.Unlock()
		return int64(len(p.idle))
	})
	c.metrics.Gauge("preconnect_idle_joined", func() int64 {
		p.mu.Lock()
		defer p.mu.Unlock()
		n := 0
		for _, ic := range p.idle {
			if ic.joined {
				n++
			}
		}
		return int64(n)
	})
	return p
}

// size is how many idle connections rt wants (0: pool off). Fast Open
// already sends the hello in the SYN, and its connect returns before the
// handshake, so it has nothing to pool.
func size(rt *runtimeState) int {
	if rt.cfg.FastOpen && !rt.cfg.Race {
		return 0
	}
	return rt.cfg.Preconnect
}

// take returns a pooled connection to r that is still usable, or nil, and
// has the pool refilled at once: over real round trips the replacement
// then is ready when a sequence of short connections asks for the next
// one. (Kicked only once the taking connection's first byte was back, the
// replacement missed every next connection of a sequential series at
// 41 ms RTT, and on the host testbed it saved nothing measurable.)
func (p *preconnect) take(rt *runtimeState, r *relayHost) (*net.TCPConn, string) {
	now := time.Now().UnixNano()
	p.lastUse.Store(now)
	r.h.lastUse.Store(now)
	defer p.kick()
	if size(rt) == 0 {
		return nil, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		i := p.pick(r.addr)
		if i < 0 {
			break
		}
		ic := p.idle[i]
		p.idle = slices.Delete(p.idle, i, i+1)
		if p.usable(rt, ic) && alive(ic.conn) {
			p.c.metrics.Counter("preconnect_hits").Add(1)
			if !ic.joined {
				p.c.metrics.Counter("preconnect_hits_unjoined").Add(1)
			}
			if ic.probing {
				p.settle(rt, &ic)
			}
			return ic.conn, ic.gwID
		}
		ic.conn.Close()
		p.c.metrics.Counter("preconnect_discarded").Add(1)
	}
	p.c.metrics.Counter("preconnect_misses").Add(1)
	return nil, ""
}

// pick returns the index of the spare to server to try next: the newest
// joined one, else the newest; -1 if there is none.
func (p *preconnect) pick(server string) int {
	newest := -1
	for i := len(p.idle) - 1; i >= 0; i-- {
		if p.idle[i].server != server {
			continue
		}
		if p.idle[i].joined {
			return i
		}
		if newest < 0 {
			newest = i
		}
	}
	return newest
}

// watchJoin ends ic's join probe once its subflows have joined or the probe
// has had its time, and reports whether it is still probing.
func (p *preconnect) watchJoin(rt *runtimeState, ic *idleConn) bool {
	if !ic.probing {
		return false
	}
	if joined(ic.conn) {
		ic.joined = true
		p.settle(rt, ic)
	} else if time.Since(ic.born) >= joinProbeFor {
		p.c.metrics.Counter("preconnect_join_timeouts").Add(1)
		p.settle(rt, ic)
	}
	return ic.probing
}

// settle switches ic's join probe off.
func (p *preconnect) settle(rt *runtimeState, ic *idleConn) {
	ic.probing = false
	if err := stopJoinProbe(ic.conn, rt); err != nil {
		p.c.log.Debug("restoring keepalive on a spare", "err", err)
	}
}

// usable reports whether ic is young enough, to a configured relay that
// is up, and through a gateway the dial would still choose.
func (p *preconnect) usable(rt *runtimeState, ic idleConn) bool {
	if time.Since(ic.born) >= time.Duration(rt.cfg.PreconnectMaxAge) {
		return false
	}
	if r := rt.relays.byAddr(ic.server); r == nil || !r.h.up.Load() {
		return false
	}
	n := 1
	if rt.cfg.Race {
		n = 2
	}
	best := rt.gateways.Best(n)
	if len(best) == 0 {
		return ic.gwID == "default"
	}
	for _, g := range best {
		if g.ID == ic.gwID {
			return true
		}
	}
	return false
}

// alive reports whether the server has not closed conn: before the hello
// the server sends nothing, so any readable event means it is gone.
func alive(conn *net.TCPConn) bool {
	rc, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		n, err := unix.Ppoll(fds, &unix.Timespec{}, nil)
		ok = err == nil && n == 0
	})
	return ok
}

// kick asks the filler to look at the pool now.
func (p *preconnect) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run keeps the pool filled until ctx ends, then closes what it holds.
func (p *preconnect) run(ctx context.Context) {
	defer p.closeAll()
	backoff := time.Duration(0)
	for {
		rt := p.c.rt.Load()
		next := p.fill(ctx, rt, &backoff)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-time.After(next):
		}
	}
}

// fill drops stale connections and dials until the pool holds what rt
// wants; it returns how long to wait before looking again.
func (p *preconnect) fill(ctx context.Context, rt *runtimeState, backoff *time.Duration) time.Duration {
	refresh := time.Duration(float64(rt.cfg.PreconnectMaxAge) * refreshAt)
	want := p.wanted(rt)
	next := activeWindow
	have := map[string]int{}
	p.mu.Lock()
	kept := p.idle[:0]
	for _, ic := range p.idle {
		age := time.Since(ic.born)
		if have[ic.server] < want[ic.server] && age < refresh && p.usable(rt, ic) {
			next = min(next, refresh-age)
			if p.watchJoin(rt, &ic) {
				next = min(next, joinPoll)
			}
			kept = append(kept, ic)
			have[ic.server]++
		} else {
			ic.conn.Close()
		}
	}
	p.idle = kept
	p.mu.Unlock()

	failed := false
	for _, r := range rt.relays.list {
		for ; have[r.addr] < want[r.addr] && ctx.Err() == nil; have[r.addr]++ {
			dctx, cancel := context.WithTimeout(ctx, time.Duration(rt.cfg.DialTimeout))
			conn, gwID, err := p.c.dial(dctx, rt, r)
			cancel()
			if err != nil {
				p.c.metrics.Counter("preconnect_dial_failures").Add(1)
				if ctx.Err() == nil {
					p.c.relayFailed(r, err)
				}
				failed = true
				p.c.log.Debug("preconnect dial failed", "relay", r.addr, "err", err)
				break
			}
			ic := idleConn{conn: conn, gwID: gwID, server: r.addr, born: time.Now()}
			if err := startJoinProbe(conn); err != nil {
				p.c.log.Debug("no join probe on a spare", "err", err)
			} else {
				ic.probing = true
				next = min(next, joinPoll)
			}
			p.mu.Lock()
			p.idle = append(p.idle, ic)
			p.mu.Unlock()
			next = min(next, refresh)
		}
	}
	if failed {
		*backoff = min(max(2**backoff, minBackoff), maxBackoff)
		return *backoff
	}
	*backoff = 0
	// Look again when the oldest connection is due for replacement.
	return max(next, 10*time.Millisecond)
}

// wanted is how many spares rt wants per relay address: none while the
// client is idle; else, under failover, for the relay a connection would
// take now, and under the other policies for each healthy relay that a
// connection chose within activeWindow. Dead relays get none.
func (p *preconnect) wanted(rt *runtimeState) map[string]int {
	want := map[string]int{}
	n := size(rt)
	if n == 0 || time.Since(time.Unix(0, p.lastUse.Load())) > activeWindow {
		return want
	}
	if rt.relays.policy == config.PolicyFailover {
		if r := rt.relays.pick(dest.Addr{}, nil); r != nil && r.h.up.Load() {
			want[r.addr] = n
		}
		return want
	}
	for _, r := range rt.relays.list {
		if r.h.up.Load() && time.Since(time.Unix(0, r.h.lastUse.Load())) <= activeWindow {
			want[r.addr] = n
		}
	}
	return want
}

func (p *preconnect) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ic := range p.idle {
		ic.conn.Close()
	}
	p.idle = nil
}

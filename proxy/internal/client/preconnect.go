package client

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

// take returns a pooled connection that is still usable, or nil, and has
// the pool refilled at once: over real round trips the replacement then is
// ready when a sequence of short connections asks for the next one. (Kicked
// only once the taking connection's first byte was back, the replacement
// missed every next connection of a sequential series at 41 ms RTT, and on
// the host testbed it saved nothing measurable.)
func (p *preconnect) take(rt *runtimeState) (*net.TCPConn, string) {
	p.lastUse.Store(time.Now().UnixNano())
	defer p.kick()
	if size(rt) == 0 {
		return nil, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		i := p.pick()
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

// pick returns the index of the spare to try next: the newest joined one,
// else the newest.
func (p *preconnect) pick() int {
	for i := len(p.idle) - 1; i >= 0; i-- {
		if p.idle[i].joined {
			return i
		}
	}
	return len(p.idle) - 1
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

// usable reports whether ic is young enough, to the configured server, and
// through a gateway the dial would still choose.
func (p *preconnect) usable(rt *runtimeState, ic idleConn) bool {
	if time.Since(ic.born) >= time.Duration(rt.cfg.PreconnectMaxAge) || ic.server != rt.cfg.Server {
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
	want := size(rt)
	if time.Since(time.Unix(0, p.lastUse.Load())) > activeWindow {
		want = 0
	}
	next := activeWindow
	p.mu.Lock()
	kept := p.idle[:0]
	for _, ic := range p.idle {
		age := time.Since(ic.born)
		if len(kept) < want && age < refresh && p.usable(rt, ic) {
			next = min(next, refresh-age)
			if p.watchJoin(rt, &ic) {
				next = min(next, joinPoll)
			}
			kept = append(kept, ic)
		} else {
			ic.conn.Close()
		}
	}
	p.idle = kept
	have := len(kept)
	p.mu.Unlock()

	for ; have < want && ctx.Err() == nil; have++ {
		dctx, cancel := context.WithTimeout(ctx, time.Duration(rt.cfg.DialTimeout))
		conn, gwID, err := p.c.dial(dctx, rt)
		cancel()
		if err != nil {
			p.c.metrics.Counter("preconnect_dial_failures").Add(1)
			*backoff = min(max(2**backoff, minBackoff), maxBackoff)
			p.c.log.Debug("preconnect dial failed", "err", err, "retry_in", *backoff)
			return *backoff
		}
		*backoff = 0
		ic := idleConn{conn: conn, gwID: gwID, server: rt.cfg.Server, born: time.Now()}
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
	// Look again when the oldest connection is due for replacement.
	return max(next, 10*time.Millisecond)
}

func (p *preconnect) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ic := range p.idle {
		ic.conn.Close()
	}
	p.idle = nil
}

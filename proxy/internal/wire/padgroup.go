package wire

import (
	"sync"
	"time"
)

// A PadGroup pads several connections of one client as one stream, the
// way an observer sees them: a page loaded over many short connections
// (HTTP/1.1: one per object) has its gaps between connections, not inside
// them, and a per-connection padder (StartPadding) never fires on a
// connection that carries one response and closes. The group runs one
// WTF-PAD state machine over all its members' real frames: a real frame
// sent on any member re-arms H_B, and a padding frame goes out on the
// member that carried real traffic last and is still open. Budget and idle
// bound the group: padding wire bytes ≤ Budget × the members' real wire
// bytes, and no padding more than Idle after the last real frame on any
// member, in either direction.
//
// Lock order: a member's wmu, then the group's mu. A padding frame is
// written with the group's mu released, and skipped if the member's wmu is
// taken (the real write under way re-arms the timer).
type PadGroup struct {
	cfg     PadConfig
	onEmpty func()

	mu       sync.Mutex
	clock    padClock
	members  map[*Conn]struct{}
	last     *Conn // the member that carried real traffic last
	lastSize int   // payload bytes of the last real frame sent by a member
	lastReal time.Time
	dataSent int64 // members' real wire bytes sent while members
	padSent  int64
	busyWait time.Duration // wait before the last try of a frame that found its member's write lock held
}

// NewPadGroup returns an empty group padding with cfg. onEmpty, if not
// nil, runs (without the group's lock) when the last member leaves, so an
// owner can forget the group; a group may be joined again afterwards.
func NewPadGroup(cfg PadConfig, onEmpty func()) (*PadGroup, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	g := &PadGroup{cfg: cfg, onEmpty: onEmpty, members: make(map[*Conn]struct{})}
	var err error
	if g.clock, err = newPadClock(cfg.Hist, g.fire); err != nil {
		return nil, err
	}
	return g, nil
}

// JoinPadGroup makes c's sending direction part of g's padding from now
// on. Real frames c sent before count towards the budget. It is a no-op
// after CloseWrite or if c already pads.
func (c *Conn) JoinPadGroup(g *PadGroup) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed || c.pad != nil || c.group.Load() != nil {
		return
	}
	c.group.Store(g)
	c.padOn.Store(true)
	sent := c.stats.dataSent.Load()
	if pc := c.padCtrs.Data; pc != nil {
		pc.Add(sent)
	}
	g.mu.Lock()
	g.members[c] = struct{}{}
	g.dataSent += sent
	if sent > 0 {
		g.last = c
		g.lastSize = c.lastSize
		g.armBurst(time.Unix(0, c.lastSent))
	}
	g.mu.Unlock()
	// Close sets shut before it looks for a group: either it saw this one
	// or this sees shut.
	if c.shut.Load() {
		g.leave(c)
	}
}

// Members returns how many connections pad in g.
func (g *PadGroup) Members() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.members)
}

// Totals returns the group's real and padding wire bytes sent.
func (g *PadGroup) Totals() (data, pad int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dataSent, g.padSent
}

// sent records member c's real frame of n payload bytes (caller holds c's
// wmu) and re-arms the BURST timer.
func (g *PadGroup) sent(c *Conn, n int, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dataSent += int64(n + FrameOverhead)
	g.last, g.lastSize = c, n
	g.armBurst(now)
}

// received records a real frame member c received.
func (g *PadGroup) received(c *Conn, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.After(g.lastReal) {
		g.lastReal = now
	}
	if _, ok := g.members[c]; ok {
		g.last = c
	}
}

// leave removes c (it closed). Padding goes on another member next.
func (g *PadGroup) leave(c *Conn) {
	g.mu.Lock()
	if _, ok := g.members[c]; !ok {
		g.mu.Unlock()
		return
	}
	delete(g.members, c)
	g.retarget(c)
	empty := len(g.members) == 0
	if empty {
		g.clock.stop()
	}
	g.mu.Unlock()
	if empty && g.onEmpty != nil {
		g.onEmpty()
	}
}

// armBurst draws a delay from H_B after t (caller holds mu).
func (g *PadGroup) armBurst(t time.Time) {
	if t.After(g.lastReal) {
		g.lastReal = t
	}
	g.busyWait = 0
	g.clock.afterReal(t)
}

// fire sends a padding frame on the member that carried real traffic
// last, unless the group is idle or out of budget, then draws the next
// delay from H_G.
func (g *PadGroup) fire(gen uint64) {
	g.mu.Lock()
	if !g.clock.current(gen) || g.last == nil {
		g.mu.Unlock()
		return
	}
	if time.Since(g.lastReal) > g.cfg.Idle {
		g.mu.Unlock()
		return // idle: wait for the next real frame
	}
	size := padSize(g.lastSize)
	cost := int64(size + FrameOverhead)
	if float64(g.padSent+cost) > g.cfg.Budget*float64(g.dataSent) {
		g.mu.Unlock()
		return // out of budget until more real bytes are sent
	}
	target := g.last
	g.padSent += cost // reserved: a concurrent fire must see it
	g.mu.Unlock()

	result := target.sendPadding(size)

	g.mu.Lock()
	defer g.mu.Unlock()
	if result != padSent {
		g.padSent -= cost
	}
	if !g.clock.current(gen) {
		return // a real frame re-armed the timer
	}
	if result == padBusy {
		// Tried again, waiting longer each time as Conn.retryWhileBusy
		// does, unless a real frame re-arms the timer first.
		if time.Since(g.lastReal) <= g.cfg.Idle {
			g.busyWait = nextBusyRetry(g.busyWait)
			g.clock.at(time.Now().Add(g.busyWait))
		}
		return
	}
	g.busyWait = 0
	if result == padClosed {
		// The member finished its answer: the fake burst goes on on
		// another, if one is open, at once.
		g.retarget(target)
		if g.last != nil {
			g.clock.at(time.Now())
		}
		return
	}
	g.clock.afterPadding()
}

// retarget moves padding off c, which can send no more, to another member
// whose sending side is still open, or else to one that sent its FIN but
// may pad after it (linger.go), or to none (caller holds mu). Members that
// can no longer carry padding are passed over, so that padding never
// bounces between them.
func (g *PadGroup) retarget(c *Conn) {
	if g.last != c {
		return
	}
	g.last = nil
	for m := range g.members {
		if m == c || m.shut.Load() {
			continue
		}
		if !m.finSent.Load() {
			g.last = m
			return
		}
		if m.linger.Load() {
			g.last = m // unless an open one is found
		}
	}
}

// idleAt is when the group goes idle: Idle after the last real frame on
// any member, in either direction.
func (g *PadGroup) idleAt() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastReal.Add(g.cfg.Idle)
}

// PadGroups keeps one PadGroup per key: per client id on a server, one key
// for a whole client box. A group is forgotten once its last member
// leaves; a connection that joins a group in that instant pads in it
// alone, within the same budget.
type PadGroups struct {
	cfg PadConfig

	mu sync.Mutex
	m  map[string]*PadGroup
}

// Join makes c pad in key's group.
func (gs *PadGroups) Join(c *Conn, key string) error {
	gs.mu.Lock()
	g := gs.m[key]
	if g == nil {
		var err error
		if g, err = NewPadGroup(gs.cfg, nil); err != nil {
			gs.mu.Unlock()
			return err
		}
		g.onEmpty = func() { gs.forget(key, g) }
		gs.m[key] = g
	}
	gs.mu.Unlock()
	c.JoinPadGroup(g)
	return nil
}

// Len returns how many groups are kept.
func (gs *PadGroups) Len() int {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return len(gs.m)
}

func (gs *PadGroups) forget(key string, g *PadGroup) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.m[key] == g && g.Members() == 0 {
		delete(gs.m, key)
	}
}

// Padder pads connections the way one end's settings say: each on its own
// (StartPadding), or in groups by key (PadGroups).
type Padder struct {
	Config PadConfig
	groups *PadGroups // nil: each connection on its own
}

// NewPadder returns a padder; grouped puts connections of one key in one
// group.
func NewPadder(cfg PadConfig, grouped bool) (*Padder, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	p := &Padder{Config: cfg}
	if grouped {
		p.groups = &PadGroups{cfg: cfg, m: make(map[string]*PadGroup)}
	}
	return p, nil
}

// Start makes c pad, in key's group if the padder groups.
func (p *Padder) Start(c *Conn, key string) error {
	if p.groups != nil {
		return p.groups.Join(c, key)
	}
	return c.StartPadding(p.Config)
}

// Groups returns how many groups are kept (0 when not grouping).
func (p *Padder) Groups() int {
	if p.groups == nil {
		return 0
	}
	return p.groups.Len()
}

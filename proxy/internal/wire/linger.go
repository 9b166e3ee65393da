package wire

import (
	"io"
	"time"
)

// Padding after the end of a stream. A page's last connection ends with
// its FIN frame, yet an observer of the page sees adaptive padding go on
// until the padder's idle bound: WTF-PAD pads the silence after a page's
// last packet too, and the trace simulator
// (defenses/braid_wf/defences/adaptive_padding.py) puts most of its dummies
// there. A sender that stopped at its FIN frame left that silence bare.
//
// So a connection may linger: once both directions have ended cleanly,
// Close keeps the socket open while the connection's padder (its own, or
// its group's) is still active, padding frames may follow the FIN frame,
// and the socket is half-closed (TCP FIN) when the padder goes idle, or
// after MaxLinger at most. A sender lingers only towards a peer that
// drains: one that, once both directions have ended, half-closes its
// socket and reads, authenticates and drops padding frames until the
// sender's TCP FIN, or for MaxDrain at most. Closing without draining
// would reset the lingering sender at its first padding frame, and a
// reset is what an observer notices. Peers say both in the handshake
// (auth.FlagDrain and auth.FlagLinger, ReplyFlagLinger and
// ReplyFlagDrain), and each only to a peer that asked.

const (
	// MaxLinger bounds how long a lingering connection pads after Close.
	MaxLinger = 3 * time.Second
	// MaxDrain bounds how long a draining connection reads after Close;
	// longer than MaxLinger, so that a peer closing at the same moment
	// is never reset while it lingers.
	MaxDrain = 5 * time.Second
	// closeLockWait bounds how long Close waits for the write lock before
	// it decides whether to linger: a padding frame being written holds
	// it for a moment, a writer blocked on a full send buffer for good.
	closeLockWait = 50 * time.Millisecond
)

// LingerForPadding lets this end pad after its FIN frame: the peer said it
// drains.
func (c *Conn) LingerForPadding() { c.linger.Store(true) }

// DrainOnClose makes Close read the peer's padding frames after its FIN
// frame until the peer's TCP FIN: the peer said it may linger. Call it
// before the peer's FIN frame can have been read.
func (c *Conn) DrainOnClose() { c.drain.Store(true) }

// closeGracefully is Close once both directions ended cleanly on a Conn
// that lingers or drains. It reports false, having done nothing, when
// neither applies or the end was not clean (Close then closes at once).
// It never waits for a reader, and for a writer only closeLockWait: the
// padder writing a frame at that moment must not make a clean end close
// at once, without the padding the peer is ready to drain.
func (c *Conn) closeGracefully() bool {
	if c.background.Load() {
		return true
	}
	if !c.linger.Load() && !c.drain.Load() || !c.rmu.TryLock() {
		return false
	}
	readEnded := c.rerr == io.EOF
	c.rmu.Unlock()
	if !readEnded || !c.lockWriteBriefly() {
		return false
	}
	clean := c.closed && c.werr == nil && c.held == nil
	c.wmu.Unlock()
	if !clean {
		return false
	}
	if !c.background.CompareAndSwap(false, true) {
		return true // a Close before this one closes in the background
	}
	if t := c.flush.Load(); t != nil {
		t.Stop()
	}
	start := time.Now()
	lingering := c.linger.Load() && c.padOn.Load() && start.Before(c.padIdleAt())
	if lingering {
		// A padding write the peer does not take fails after this.
		c.raw.SetWriteDeadline(start.Add(MaxLinger + time.Second))
		if c.padCtrs.Lingered != nil {
			c.padCtrs.Lingered.Add(1)
		}
	} else {
		c.stopPadding()
	}
	go func() {
		if lingering {
			c.lingerUntilIdle(start.Add(MaxLinger))
			c.stopPadding()
		}
		c.wmu.Lock() // never cut a padding frame in two
		c.raw.CloseWrite()
		c.wmu.Unlock()
		if c.drain.Load() {
			c.drainPadding(start.Add(MaxDrain))
		}
		c.raw.Close()
	}()
	return true
}

// lockWriteBriefly takes the write lock unless it stays held for
// closeLockWait.
func (c *Conn) lockWriteBriefly() bool {
	give := time.Now().Add(closeLockWait)
	for !c.wmu.TryLock() {
		if time.Now().After(give) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// ClosesInBackground reports whether Close left the socket open to linger
// or drain: it closes itself within MaxDrain, and its owner must not close
// it before.
func (c *Conn) ClosesInBackground() bool { return c.background.Load() }

// lingerUntilIdle waits until the padder goes idle, or until end.
func (c *Conn) lingerUntilIdle(end time.Time) {
	for {
		now := time.Now()
		at := c.padIdleAt()
		if !now.Before(at) || !now.Before(end) {
			return
		}
		if end.Before(at) {
			at = end
		}
		time.Sleep(at.Sub(now))
	}
}

// padIdleAt is when the padder that pads c goes idle: its idle bound after
// the last real frame in either direction on any connection it pads. Call
// it once padOn is set: StartPadding sets pad before padOn, and pad does
// not change after.
func (c *Conn) padIdleAt() time.Time {
	if g := c.group.Load(); g != nil {
		return g.idleAt()
	}
	return time.Unix(0, c.lastReal.Load()).Add(c.pad.cfg.Idle)
}

// stopPadding ends padding on c: no padding frame after this (a timer
// already armed finds shut set), and its group pads on other members.
func (c *Conn) stopPadding() {
	c.shut.Store(true)
	if g := c.group.Load(); g != nil {
		g.leave(c)
	}
}

// drainPadding reads the frames that follow the peer's FIN frame until the
// peer's TCP FIN or deadline. Each must be an authentic padding frame; it
// is counted as padding received and dropped. Anything else ends the
// drain, and the Close that follows resets the connection.
func (c *Conn) drainPadding(deadline time.Time) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.raw.SetReadDeadline(deadline)
	if c.br == nil {
		c.br = NewReader(c.raw)
	}
	if c.rbuf == nil {
		c.rbuf = frameBufs.Get().(*[]byte)
	}
	for {
		n, flags, err := c.opener.readHeader(c.br)
		if err != nil || flags != FlagPadding {
			break
		}
		payload, err := c.opener.readBody(c.br, flags, (*c.rbuf)[:n])
		if err != nil {
			break
		}
		c.countPadReceived(len(payload))
	}
	c.releaseRead()
}

package wire

import (
	crand "crypto/rand"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"braid/proxy/internal/padding"
)

// Adaptive padding: a sender that pads sends FlagPadding frames
// during the silences of its own direction, WTF-PAD-style, with the
// semantics of defenses/braid_wf/defences/adaptive_padding.py:
//
//   - BURST: every real frame sent (re)arms a timer with a delay from H_B;
//   - GAP: when it fires, a padding frame goes out and the timer is
//     re-armed with a delay from H_G, until H_G's infinity bin ends the
//     fake burst or a real frame starts BURST again; the padding frame has
//     the last real frame's size, at most one packet (padSize);
//   - budget: a padding frame is sent only while the padding's wire bytes
//     stay ≤ Budget × the wire bytes of the real frames sent so far on the
//     connection (causal, so a connection's overhead never exceeds it);
//   - idle: no padding frame more than Idle after the last real frame in
//     either direction; the next real frame sent re-arms.
//
// Real frames are never delayed: a padding frame is skipped when a real
// write holds the connection, whose frame re-arms the timer anyway.
//
// A padding frame is an ordinary sealed frame whose sealed header carries
// FlagPadding, so on the wire it has exactly the size of a data frame with
// as many payload bytes. Receivers that know the flag drop it before the
// application; peers say that they know it in the handshake (auth's hello
// flag, the reply's flag) and a sender pads only towards such a peer, since
// receivers before this flag passed unknown flags' payloads through.

// FrameOverhead is a frame's wire bytes beyond its payload.
const FrameOverhead = HeaderLen + TagLen

// PadMaxWire is the most wire bytes one padding frame takes: one packet
// on a 1500-byte-MTU path with MPTCP's options (IPv4 and TCP headers,
// timestamps and a DSS mapping leave about 1420 bytes). WTF-PAD's unit of
// padding is one packet, and so is the simulator's
// (defenses/braid_wf/defences/adaptive_padding.py): a padding frame the
// size of a whole 16 KB real frame would be a burst of a dozen packets
// at every timer, a different defence from the one its histograms were
// fitted for.
const PadMaxWire = 1400

// padSize is the payload of a padding frame that follows a real frame of
// last payload bytes.
func padSize(last int) int {
	return min(last, PadMaxWire-FrameOverhead)
}

// ErrFrameFlags means an authenticated frame had flags the receiver does
// not know, or a combination it refuses.
var ErrFrameFlags = errors.New("wire: frame with unknown or invalid flags")

// PadConfig is one end's padding of the direction it sends.
type PadConfig struct {
	Budget float64       // padding wire bytes ≤ Budget × real wire bytes; > 0
	Idle   time.Duration // no padding this long after the last real frame; > 0
	Hist   *padding.Direction
}

// check refuses a configuration no padder can run with.
func (cfg PadConfig) check() error {
	if !(cfg.Budget > 0) || cfg.Idle <= 0 || cfg.Hist == nil {
		return errors.New("wire: padding needs a positive budget and idle time and histograms")
	}
	return nil
}

// NewPadCounters returns counters named in a registry-like lookup
// (metrics.Registry.Counter): padding_bytes_sent, padding_frames_sent,
// padding_bytes_received, padding_data_bytes_sent, padding_linger_conns.
func NewPadCounters(counter func(string) *atomic.Int64) PadCounters {
	return PadCounters{
		Sent:     counter("padding_bytes_sent"),
		Frames:   counter("padding_frames_sent"),
		Received: counter("padding_bytes_received"),
		Data:     counter("padding_data_bytes_sent"),
		Lingered: counter("padding_linger_conns"),
	}
}

// PadCounters are shared counters (metrics); nil fields are skipped.
type PadCounters struct {
	Sent     *atomic.Int64 // padding frames' wire bytes sent
	Frames   *atomic.Int64 // padding frames sent
	Received *atomic.Int64 // padding frames' wire bytes received (and dropped)
	Data     *atomic.Int64 // real frames' wire bytes sent on connections that pad
	Lingered *atomic.Int64 // connections that stayed open to pad after their FIN frame
}

// PadTotals are one connection's figures.
type PadTotals struct {
	DataSent     int64 // real frames' wire bytes sent (all frames but padding)
	PadSent      int64 // padding frames' wire bytes sent
	PadFrames    int64
	PadReceived  int64 // padding frames' wire bytes received and dropped
	DataReceived int64 // wire bytes of the other frames received
}

type padState struct {
	cfg   PadConfig
	clock padClock
}

// padClock is the WTF-PAD timer of a padder (one Conn's, or a PadGroup's):
// the first padding frame H_B after a real frame, the next ones H_G after
// the previous one was due, and a generation that makes a superseded
// timer's firing a no-op. Its owner serialises calls.
type padClock struct {
	hist  *padding.Direction
	rng   *rand.Rand
	fire  func(gen uint64)
	gen   uint64
	timer *time.Timer
	due   time.Time
}

func newPadClock(hist *padding.Direction, fire func(gen uint64)) (padClock, error) {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return padClock{}, err
	}
	return padClock{hist: hist, rng: rand.New(rand.NewChaCha8(seed)), fire: fire}, nil
}

// afterReal arms the first padding frame a delay from H_B after t (none if
// H_B draws its infinity bin).
func (k *padClock) afterReal(t time.Time) {
	d, ok := k.hist.Burst.Sample(k.rng)
	if !ok {
		k.stop()
		return
	}
	k.at(t.Add(d))
}

// afterPadding arms the next padding frame a delay from H_G after the last
// one was due; H_G's infinity bin ends the fake burst.
func (k *padClock) afterPadding() {
	if d, ok := k.hist.Gap.Sample(k.rng); ok {
		k.at(k.due.Add(d))
	}
}

func (k *padClock) stop() {
	k.gen++
	if k.timer != nil {
		k.timer.Stop()
	}
}

func (k *padClock) at(due time.Time) {
	k.stop()
	gen := k.gen
	k.due = due
	k.timer = time.AfterFunc(time.Until(due), func() { k.fire(gen) })
}

// current reports whether gen is the armed timer's generation.
func (k *padClock) current(gen uint64) bool { return k.gen == gen }

var zeros [MaxPayload]byte

// SetPadCounters sets where padding sent and received is counted. Call it
// before the Conn is used.
func (c *Conn) SetPadCounters(pc PadCounters) { c.padCtrs = pc }

// StartPadding makes this end pad the direction it sends, from now on.
// Real frames sent before count towards the budget. It is a no-op after
// CloseWrite.
func (c *Conn) StartPadding(cfg PadConfig) error {
	if err := cfg.check(); err != nil {
		return err
	}
	clock, err := newPadClock(cfg.Hist, c.padFire)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed || c.pad != nil || c.group.Load() != nil {
		return nil
	}
	c.pad = &padState{cfg: cfg, clock: clock}
	c.padOn.Store(true)
	if pc := c.padCtrs.Data; pc != nil {
		pc.Add(c.stats.dataSent.Load())
	}
	if c.stats.dataSent.Load() > 0 {
		c.armBurst(time.Unix(0, c.lastSent))
	}
	return nil
}

// PadTotals returns this connection's figures so far.
func (c *Conn) PadTotals() PadTotals {
	return PadTotals{
		DataSent:     c.stats.dataSent.Load(),
		PadSent:      c.stats.padSent.Load(),
		PadFrames:    c.stats.padFrames.Load(),
		PadReceived:  c.stats.padRecv.Load(),
		DataReceived: c.stats.dataRecv.Load(),
	}
}

type connStats struct {
	dataSent, padSent, padFrames, padRecv, dataRecv atomic.Int64
}

// sentReal records a real frame of n payload bytes just written (caller
// holds wmu) and re-arms the BURST timer.
func (c *Conn) sentReal(n int) {
	w := int64(n + FrameOverhead)
	c.stats.dataSent.Add(w)
	c.lastSize = n
	now := time.Now()
	c.lastSent = now.UnixNano()
	if g := c.group.Load(); g != nil {
		if pc := c.padCtrs.Data; pc != nil {
			pc.Add(w)
		}
		g.sent(c, n, now)
		return
	}
	if c.pad == nil {
		return
	}
	c.lastReal.Store(c.lastSent)
	if pc := c.padCtrs.Data; pc != nil {
		pc.Add(w)
	}
	c.armBurst(now)
}

// recvReal records a real frame received.
func (c *Conn) recvReal(n int) {
	c.stats.dataRecv.Add(int64(n + FrameOverhead))
	if c.padOn.Load() {
		now := time.Now()
		c.lastReal.Store(now.UnixNano())
		if g := c.group.Load(); g != nil {
			g.received(c, now)
		}
	}
}

// armBurst draws a delay from H_B after t (caller holds wmu).
func (c *Conn) armBurst(t time.Time) {
	if c.lastReal.Load() < t.UnixNano() {
		c.lastReal.Store(t.UnixNano())
	}
	c.pad.clock.afterReal(t)
}

// padFire sends a padding frame if the connection is neither idle nor out
// of budget, then draws the next from H_G.
func (c *Conn) padFire(gen uint64) { c.padTry(gen, 0) }

// padTry is padFire after waiting waited for the write lock (0: on time).
func (c *Conn) padTry(gen uint64, waited time.Duration) {
	if c.shut.Load() {
		return
	}
	if !c.wmu.TryLock() {
		c.retryWhileBusy(gen, waited)
		return
	}
	defer c.wmu.Unlock()
	p := c.pad
	if p == nil || !p.clock.current(gen) || c.closed && !c.linger.Load() || c.werr != nil {
		return
	}
	now := time.Now()
	if now.Sub(time.Unix(0, c.lastReal.Load())) > p.cfg.Idle {
		return // idle: wait for the next real frame
	}
	size := padSize(c.lastSize)
	cost := int64(size + FrameOverhead)
	if float64(c.stats.padSent.Load()+cost) > p.cfg.Budget*float64(c.stats.dataSent.Load()) {
		return // out of budget until more real bytes are sent
	}
	if c.writePadding(size) {
		if waited > 0 {
			// Sent late: the next gap counts from now, or the frames
			// due during the wait would follow back to back.
			p.clock.due = now
		}
		p.clock.afterPadding()
	}
}

// Padding frames that fall due while the write lock is held are tried
// again after busyRetry, then after twice as long each time the lock is
// still held, up to maxBusyRetry.
const (
	busyRetry    = time.Millisecond
	maxBusyRetry = 32 * time.Millisecond
)

// nextBusyRetry is the wait before the next try of a padding frame that
// found the write lock held after waiting waited (0: on its first try).
func nextBusyRetry(waited time.Duration) time.Duration {
	return min(max(2*waited, busyRetry), maxBusyRetry)
}

// retryWhileBusy tries the padding frame of generation gen again: it fell
// due while the write lock was held, after waiting waited. A real write
// re-arms the timer when it ends, which makes the retry a no-op; the FIN
// frame's write and Close's look at a connection that may linger do not,
// and a frame due then must not end the padding for good (the silence
// after a page's last connection is what lingering pads). The wait grows
// while the lock stays held (a write blocked on a full window), and the
// retries end once the padder is idle.
func (c *Conn) retryWhileBusy(gen uint64, waited time.Duration) {
	if time.Now().Before(c.padIdleAt()) {
		wait := nextBusyRetry(waited)
		time.AfterFunc(wait, func() { c.padTry(gen, wait) })
	}
}

// What became of a padding frame a PadGroup asked a member to send.
type padResult int

const (
	padSent   padResult = iota
	padBusy             // another writer holds the write lock
	padClosed           // the member's sending side is done: try another
)

// sendPadding writes one padding frame of size payload bytes for a
// PadGroup, unless c's sending side is done or a real write is under way.
func (c *Conn) sendPadding(size int) padResult {
	if c.shut.Load() {
		return padClosed
	}
	if !c.wmu.TryLock() {
		return padBusy
	}
	defer c.wmu.Unlock()
	if c.closed && !c.linger.Load() || c.werr != nil || !c.writePadding(size) {
		return padClosed
	}
	return padSent
}

// writePadding seals and writes a padding frame and counts it (caller
// holds wmu).
func (c *Conn) writePadding(size int) bool {
	if c.padBuf == nil {
		c.padBuf = make([]byte, 0, PadMaxWire)
	}
	c.padBuf = c.sealer.Append(c.padBuf[:0], FlagPadding, zeros[:size])
	if err := c.writeFrames(c.padBuf); err != nil {
		c.werr = err // a frame may be cut: nothing may follow it
		return false
	}
	cost := int64(size + FrameOverhead)
	c.stats.padSent.Add(cost)
	c.stats.padFrames.Add(1)
	if pc := c.padCtrs.Sent; pc != nil {
		pc.Add(cost)
	}
	if pc := c.padCtrs.Frames; pc != nil {
		pc.Add(1)
	}
	return true
}

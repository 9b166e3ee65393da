// Package wire defines what travels between the braid client and server
// after the hellos: AEAD-sealed frames, the request that names a
// destination and the server's reply.
//
// A frame (protocol v2 and v3) is two AES-256-GCM ciphertexts under the
// direction's key:
//
//	seal(length (uint16, big endian) | flags (1))  19 bytes
//	seal(payload)                                  length + 16 bytes
//
// so nothing about it is in clear, lengths and flags included (v1 sent a
// clear 3-byte header). Nonces are a per-direction counter (each direction
// has its own key, each seal takes the next nonce), so frames cannot be
// reordered, dropped or replayed without the next Open failing. FlagFIN
// marks the sender's end of stream: a connection that ends without it is
// reported as truncated, never as a clean EOF, so an attacker cannot cut a
// transfer short undetected.
//
// FlagKeyUpdate (an empty frame) says that the sender's following frames
// use a new key, their nonces starting again from zero: either the key
// given to the receiver beforehand (the client's switch from its early
// key to the forward-secret one once the server has answered, as TLS 1.3
// does at EndOfEarlyData), or Noise's REKEY of the current key, which the
// sender does every RekeyFrames frames so that no key seals more than the
// AES-GCM limits allow.
//
// FlagPadding (pad.go) marks a padding frame, which the receiver drops.
// Any other flag, and padding combined with FIN or a key update, is
// refused (ErrFrameFlags): receivers before FlagPadding passed unknown
// flags' payloads to the application, so a sender pads only towards a
// peer that announced it in the handshake.
package wire

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// TagLen is the GCM tag size.
	TagLen = 16
	// hdrPlainLen is the header before sealing: length and flags.
	hdrPlainLen = 3
	// HeaderLen is the size of the sealed frame header.
	HeaderLen = hdrPlainLen + TagLen
	// MaxPayload is the largest plaintext per frame.
	MaxPayload = 32 * 1024
	// FlagFIN marks the last frame of a direction.
	FlagFIN = 0x01
	// FlagKeyUpdate says the sender's next frames use its next key.
	FlagKeyUpdate = 0x02
	// FlagPadding marks a padding frame (adaptive padding, pad.go): the
	// receiver drops it. Sent only to peers that said they know it.
	FlagPadding = 0x04
	knownFlags  = FlagFIN | FlagKeyUpdate | FlagPadding
)

// RekeyFrames is how many frames a sender seals under one key before it
// moves to the next (two seals each: 2^23 AES-GCM encryptions, well inside
// the 2^24.5 full-size records TLS 1.3 allows per AES-GCM key).
var RekeyFrames uint64 = 1 << 22

var (
	// ErrTruncated means the peer's stream ended without a FIN frame.
	ErrTruncated = errors.New("wire: stream ended without FIN (truncated)")
	// ErrAuth means a frame failed authentication.
	ErrAuth = errors.New("wire: frame authentication failed")
	// ErrAfterFIN means data arrived after the peer's FIN.
	ErrAfterFIN = errors.New("wire: frame after FIN")
)

// NewAEAD returns AES-256-GCM for key.
func NewAEAD(key [32]byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, fmt.Errorf("creating cipher: %w", err)
	}
	return cipher.NewGCM(block)
}

// rekey is Noise's REKEY(k): the first 32 bytes of ENCRYPT(k, 2^64-1, "",
// 32 zero bytes), as a new AES-256-GCM.
func rekey(a cipher.AEAD) cipher.AEAD {
	var nonce [12]byte
	binary.BigEndian.PutUint64(nonce[4:], math.MaxUint64)
	var zeros [32]byte
	k := a.Seal(nil, nonce[:], zeros[:], nil)
	next, err := NewAEAD([32]byte(k[:32]))
	if err != nil {
		panic("wire: AES-256 rejected a 32-byte key: " + err.Error())
	}
	return next
}

// nonceCounter is a direction's seal counter and the GCM nonce built from
// it. The nonce lives in the struct so that sealing or opening a frame
// allocates nothing.
type nonceCounter struct {
	n   uint64
	buf [12]byte
}

func (c *nonceCounter) next() []byte {
	binary.BigEndian.PutUint64(c.buf[4:], c.n)
	c.n++
	return c.buf[:]
}

// Sealer writes frames in one direction.
type Sealer struct {
	aead   cipher.AEAD
	nonce  nonceCounter
	hdr    [hdrPlainLen]byte
	frames uint64
}

// NewSealer returns a sealer using aead with a fresh nonce counter.
func NewSealer(aead cipher.AEAD) *Sealer { return &Sealer{aead: aead} }

// Append seals payload (at most MaxPayload bytes) as one frame appended to
// dst. When the key has sealed RekeyFrames frames, a key-update frame
// follows and the next frames use REKEY(key).
func (s *Sealer) Append(dst []byte, flags byte, payload []byte) []byte {
	dst = s.appendFrame(dst, flags, payload)
	if s.frames >= RekeyFrames && flags&FlagKeyUpdate == 0 {
		dst = s.Update(dst, rekey(s.aead))
	}
	return dst
}

func (s *Sealer) appendFrame(dst []byte, flags byte, payload []byte) []byte {
	if len(payload) > MaxPayload {
		panic("wire: payload larger than MaxPayload")
	}
	binary.BigEndian.PutUint16(s.hdr[:], uint16(len(payload)))
	s.hdr[2] = flags
	dst = s.aead.Seal(dst, s.nonce.next(), s.hdr[:], nil)
	s.frames++
	return s.aead.Seal(dst, s.nonce.next(), payload, nil)
}

// Update appends a key-update frame under the current key and seals what
// follows with next, nonces from zero.
func (s *Sealer) Update(dst []byte, next cipher.AEAD) []byte {
	dst = s.appendFrame(dst, FlagKeyUpdate, nil)
	s.aead, s.nonce, s.frames = next, nonceCounter{}, 0
	return dst
}

// Opener reads frames in one direction.
type Opener struct {
	aead  cipher.AEAD
	next  cipher.AEAD // the key after the peer's next key update, if known
	nonce nonceCounter
	hdr   [HeaderLen]byte
}

// NewOpener returns an opener using aead with a fresh nonce counter.
func NewOpener(aead cipher.AEAD) *Opener { return &Opener{aead: aead} }

// SetNext gives the key the peer moves to at its next key update (instead
// of REKEY of the current one).
func (o *Opener) SetNext(next cipher.AEAD) { o.next = next }

// ReadFrame reads exactly one frame from r into buf (grown as needed) and
// returns its flags and plaintext (aliasing buf). It reads nothing beyond the
// frame, so it is safe on a raw socket during the handshake. A key-update
// frame is returned (empty, FlagKeyUpdate set) after the opener has moved
// to the next key.
func (o *Opener) ReadFrame(r io.Reader, buf []byte) (flags byte, payload []byte, err error) {
	n, flags, err := o.readHeader(r)
	if err != nil {
		return 0, nil, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	payload, err = o.readBody(r, flags, buf[:n])
	return flags, payload, err
}

// readHeader reads and opens a frame's header: the length of the body that
// follows (payload and tag) and the frame's flags.
func (o *Opener) readHeader(r io.Reader) (n int, flags byte, err error) {
	hdr := o.hdr[:]
	if _, err = io.ReadFull(r, hdr); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return 0, 0, ErrTruncated
		}
		return 0, 0, fmt.Errorf("wire: reading frame header: %w", err)
	}
	plain, err := o.aead.Open(hdr[:0], o.nonce.next(), hdr, nil)
	if err != nil {
		return 0, 0, ErrAuth
	}
	n = int(binary.BigEndian.Uint16(plain)) + TagLen
	flags = plain[2]
	if flags&^knownFlags != 0 || (flags&FlagPadding != 0 && flags != FlagPadding) {
		return 0, 0, fmt.Errorf("%w: 0x%02x", ErrFrameFlags, flags)
	}
	if n > MaxPayload+TagLen {
		return 0, 0, fmt.Errorf("wire: frame length %d out of range", n)
	}
	return n, flags, nil
}

// readBody reads the body readHeader announced into buf (exactly its
// length) and returns its plaintext (aliasing buf).
func (o *Opener) readBody(r io.Reader, flags byte, buf []byte) (payload []byte, err error) {
	if _, err = io.ReadFull(r, buf); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, ErrTruncated
		}
		return nil, fmt.Errorf("wire: reading frame: %w", err)
	}
	payload, err = o.aead.Open(buf[:0], o.nonce.next(), buf, nil)
	if err != nil {
		return nil, ErrAuth
	}
	if flags&FlagKeyUpdate != 0 {
		if len(payload) != 0 || flags&FlagFIN != 0 {
			return nil, fmt.Errorf("%w: key update frame with data", ErrAuth)
		}
		if o.next != nil {
			o.aead, o.next = o.next, nil
		} else {
			o.aead = rekey(o.aead)
		}
		o.nonce = nonceCounter{}
	}
	return payload, nil
}

// frameBufLen holds one whole frame: header, largest payload, tag.
const frameBufLen = HeaderLen + MaxPayload + TagLen

// frameBufs and readers recycle the per-direction buffers of Conn. Every
// relayed connection needs a frame buffer per direction and a read buffer;
// allocating them anew made a short connection's garbage (and the GC work
// that follows) about four times what the rest of its set-up allocates.
var (
	frameBufs = sync.Pool{New: func() any { b := make([]byte, frameBufLen); return &b }}
	readers   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
)

// HalfCloser is a connection whose write side can be shut separately.
type HalfCloser interface {
	net.Conn
	CloseWrite() error
}

// Conn is an encrypted stream over a raw connection. Read and Write may be
// used from two goroutines (one each); CloseWrite sends the FIN frame.
type Conn struct {
	raw HalfCloser

	rmu     sync.Mutex
	br      *bufio.Reader // from readers, until the read side ends
	opener  *Opener
	rbuf    *[]byte // from frameBufs while frames arrive (idle.go)
	rfull   bool    // the last frame read was whole: more is likely queued
	pending []byte
	rerr    error

	wmu    sync.Mutex
	sealer *Sealer
	wbuf   []byte
	closed bool
	held   []byte                     // see Hold
	flush  atomic.Pointer[time.Timer] // sends held on its own
	werr   error                      // the timer's failed write, for the next one

	// Adaptive padding (pad.go). pad, lastSize and lastSent are under wmu.
	pad        *padState
	group      atomic.Pointer[PadGroup] // padding shared with other connections (padgroup.go)
	padBuf     []byte                   // a padding frame being written
	lastSize   int                      // payload bytes of the last real frame sent
	lastSent   int64                    // its time, Unix ns
	lastReal   atomic.Int64             // last real frame sent or received, Unix ns
	padOn      atomic.Bool
	shut       atomic.Bool // Close was called: no padding frame follows
	finSent    atomic.Bool // CloseWrite was called: no real frame follows
	linger     atomic.Bool // padding may follow the FIN frame (linger.go)
	drain      atomic.Bool // Close drains the peer's padding after its FIN
	background atomic.Bool // Close left the socket to close itself
	padCtrs    PadCounters
	stats      connStats
}

// NewConn wraps raw with the given directions.
func NewConn(raw HalfCloser, opener *Opener, sealer *Sealer) *Conn {
	return &Conn{
		raw:    raw,
		opener: opener,
		sealer: sealer,
	}
}

// NewReader returns a pooled read buffer over r, for a handshake whose
// remainder a Conn then reads (NewConnReader): one read system call can
// bring the hello, the request and the first data frame at once.
// PutReader returns a buffer that was not handed on.
func NewReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

// PutReader returns a buffer from NewReader to the pool.
func PutReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

// NewConnReader is NewConn for a raw connection read through br (from
// NewReader), which may already hold its first bytes; the Conn owns br.
func NewConnReader(raw HalfCloser, br *bufio.Reader, opener *Opener, sealer *Sealer) *Conn {
	c := NewConn(raw, opener, sealer)
	c.br = br
	return c
}

// SetOpener gives a Conn made without an opener its read direction, once
// the key is known (a client sending early data learns the server's key
// from its answer). Call it before the first Read.
func (c *Conn) SetOpener(o *Opener) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.opener = o
}

// UpdateKey sends a key-update frame and seals everything written after it
// with next (the client's move from its early key to the session key once
// the server has answered). It is safe while another goroutine writes.
func (c *Conn) UpdateKey(next cipher.AEAD) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		// The FIN went out under the old key: nothing follows it.
		return nil
	}
	return c.writeFrames(c.sealer.Update(nil, next))
}

// Read returns decrypted data; io.EOF only after the peer's FIN frame.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.pending) == 0 {
		if err := c.nextFrame(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// nextFrame reads one frame into pending (caller holds rmu; pending is
// empty). Once the read side has ended, its buffers go back to the pools.
func (c *Conn) nextFrame() error {
	if c.rerr != nil {
		c.endRead()
		return c.rerr
	}
	if c.rbuf != nil && !c.rfull {
		// A short frame: the peer may go quiet now. The next header is
		// waited for without the frame buffer (idle.go).
		frameBufs.Put(c.rbuf)
		c.rbuf = nil
	}
	if c.br == nil {
		c.br = NewReader(c.raw)
	}
	n, flags, err := c.opener.readHeader(c.br)
	var payload []byte
	if err == nil {
		if c.rbuf == nil {
			c.rbuf = frameBufs.Get().(*[]byte)
		}
		// Bodies larger than br's buffer are read straight into rbuf.
		payload, err = c.opener.readBody(c.br, flags, (*c.rbuf)[:n])
	}
	c.rfull = len(payload) == MaxPayload
	if err != nil {
		c.rerr = err
		c.releaseRead()
		return err
	}
	if flags&FlagPadding != 0 {
		c.countPadReceived(len(payload))
		c.pending = nil // dropped: never reaches the application
		return nil
	}
	c.recvReal(len(payload))
	c.pending = payload
	if flags&FlagFIN != 0 {
		c.rerr = io.EOF
		if len(payload) == 0 {
			c.endRead()
		}
	}
	return nil
}

// countPadReceived counts a padding frame of n payload bytes dropped.
func (c *Conn) countPadReceived(n int) {
	w := int64(n + FrameOverhead)
	c.stats.padRecv.Add(w)
	if pc := c.padCtrs.Received; pc != nil {
		pc.Add(w)
	}
}

// endRead returns the read buffers once the read side has ended (caller
// holds rmu; nothing pending), but a draining Close reads on after a clean
// end (linger.go): the read buffer may already hold the frames that follow
// the FIN frame, so it stays.
func (c *Conn) endRead() {
	if c.rerr != io.EOF || !c.drain.Load() {
		c.releaseRead()
		return
	}
	if c.rbuf != nil {
		frameBufs.Put(c.rbuf)
	}
	c.rbuf, c.pending = nil, nil
}

// releaseRead returns the read buffers (caller holds rmu; nothing pending).
func (c *Conn) releaseRead() {
	if c.br != nil {
		PutReader(c.br)
	}
	if c.rbuf != nil {
		frameBufs.Put(c.rbuf)
	}
	c.br, c.rbuf, c.pending = nil, nil, nil
}

// WriteTo writes decrypted frames straight to w (no intermediate buffer)
// until the peer's FIN; it returns nil at FIN, like io.Copy at EOF.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	var total int64
	for {
		if len(c.pending) > 0 {
			n, err := w.Write(c.pending)
			total += int64(n)
			c.pending = c.pending[n:]
			if err != nil {
				return total, err
			}
		}
		if err := c.nextFrame(); err != nil {
			if err == io.EOF {
				return total, nil
			}
			return total, err
		}
	}
}

// Hold keeps b, bytes due to the peer before any frame (the server's
// answer), to go out in the same write as the next frame, or on their own
// once wait has passed without one.
func (c *Conn) Hold(b []byte, wait time.Duration) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.held = b
	c.flush.Store(time.AfterFunc(wait, func() {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if c.held != nil && c.werr == nil {
			_, c.werr = c.raw.Write(c.held)
			c.held = nil
		}
	}))
}

// writeFrames writes sealed frames after anything held (caller holds wmu).
func (c *Conn) writeFrames(frames []byte) error {
	if c.werr != nil {
		return c.werr
	}
	if c.held == nil {
		_, err := c.raw.Write(frames)
		return err
	}
	c.flush.Load().Stop()
	bufs := net.Buffers{c.held, frames} // one writev
	c.held = nil
	_, err := bufs.WriteTo(c.raw)
	return err
}

// Write seals p into as many frames as needed and writes them.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if c.wbuf == nil {
		c.wbuf = make([]byte, 0, HeaderLen+MaxPayload+TagLen)
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), MaxPayload)
		c.wbuf = c.sealer.Append(c.wbuf[:0], 0, p[:n])
		if err := c.writeFrames(c.wbuf); err != nil {
			return written, err
		}
		c.sentReal(n)
		written += n
		p = p[n:]
	}
	return written, nil
}

// ReadFrom copies src into frames, one read per frame, so each frame is as
// large as the data available (up to MaxPayload) without extra copies.
//
// While src is quiet no buffer is held (idle.go): after a short read the
// buffer goes back to the pool, and the next is taken once src is readable.
func (c *Conn) ReadFrom(src io.Reader) (int64, error) {
	var bp *[]byte
	defer func() {
		if bp != nil {
			frameBufs.Put(bp)
		}
	}()
	awaitReadable := readableWaiter(src)
	var total int64
	for {
		if bp == nil {
			awaitReadable()
			bp = frameBufs.Get().(*[]byte)
		}
		buf := *bp
		n, rerr := src.Read(buf[HeaderLen : HeaderLen+MaxPayload])
		if n > 0 {
			c.wmu.Lock()
			out := c.sealer.Append(buf[:0], 0, buf[HeaderLen:HeaderLen+n])
			werr := c.writeFrames(out)
			if werr == nil {
				c.sentReal(n)
			}
			c.wmu.Unlock()
			if werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
		if n < MaxPayload {
			frameBufs.Put(bp)
			bp = nil
		}
	}
}

// CloseWrite sends the FIN frame. The raw connection's own FIN is left to
// Close: the peer learns that this direction ended from the authenticated
// FIN frame and never waits for the TCP one, so shutting the raw write side
// here would only cost a system call and a packet per direction.
func (c *Conn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.finSent.Store(true)
	return c.writeFrames(c.sealer.Append(nil, FlagFIN, nil))
}

// Close closes the raw connection. After a clean end of both directions a
// Conn that lingers or drains closes it in the background instead
// (linger.go). Otherwise bytes still held go out first if no writer holds
// the write lock (the peer tells a refusal from a relay that failed later
// by the server's answer they carry); Close never waits for a writer,
// since closing is what unblocks one.
func (c *Conn) Close() error {
	if c.closeGracefully() {
		return nil
	}
	c.stopPadding()
	if t := c.flush.Load(); t != nil {
		t.Stop()
		if c.wmu.TryLock() {
			if c.held != nil && c.werr == nil {
				c.raw.Write(c.held) // nothing was written before: the send buffer has room
				c.held = nil
			}
			c.wmu.Unlock()
		}
	}
	return c.raw.Close()
}

// Raw returns the underlying connection.
func (c *Conn) Raw() HalfCloser { return c.raw }

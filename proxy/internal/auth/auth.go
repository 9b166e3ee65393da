// Package auth implements braid's handshake (protocol v3) between the client
// box and the relay server: mutual authentication with the client's
// pre-shared key, forward-secret session keys, and the first request
// carried in the first flight (0-RTT), on the Noise protocol framework
// (github.com/flynn/noise):
//
//	Noise_NNpsk0_25519_AESGCM_SHA256, prologue "braid-proxy v3"
//	  -> psk, e     payload: time (ms, 8) | flags (1) | len (2) | pad (2) | request | zero padding
//	  <- e, ee      payload: the reply (2) [| pad (2), with FlagPadReply]
//
// Each message is followed by pad random bytes (0..MaxHelloPad,
// 0..MaxReplyPad), their count sealed in the message.
//
// or, where the server has a static key whose public half its clients
// hold (a Tor bridge line's pub=), Noise_NKpsk0 (<- s ... -> psk, e, es):
// then only the holder of the private key can read a hello or answer it,
// whoever else knows the PSK.
//
// Every message has a fixed size (ClientHelloLen, ServerHelloLen or
// ServerHelloPadLen) before its random tail, so the first flight's and the
// answer's sizes vary, and nothing is in clear but the ephemeral public keys, which travel as
// Elligator2 representatives (elligator.go) and so look like random
// bytes: no magic, no client id, no lengths. The server finds the client
// by trying every configured key on the first message (only the right one
// opens its AEAD tag; all are tried so that the time taken does not tell
// which), so the cost of a hello grows with the number of client ids (see
// the README).
//
// Security properties:
//   - The first message is authenticated by the PSK (psk0); a recorded one
//     is refused when its time is outside ±MaxSkew or its ephemeral key is
//     already in the replay cache (entries live 2·MaxSkew). A client id
//     flooding its share of the cache loses early data, not connections
//     (ReplayCache, ErrEarlyDataRefused).
//   - The server proves the PSK by the second message, which also carries
//     its ephemeral key: the session keys (Noise Split after ee) are
//     forward secret. A stolen PSK decrypts neither past sessions' relayed
//     data nor their replies.
//   - Data the client sends before the server's answer (FlagEarlyData) is
//     sealed with an early key, HKDF-SHA256(PSK || es, salt = the handshake
//     hash after the first message, "braid-v3 early c2s"; es, the DH with
//     the server's static key, only under NKpsk0) — as TLS 1.3 derives
//     its client_early_traffic_secret from the PSK and the ClientHello. It
//     is as replayable and as exposed to a PSK theft as TLS 0-RTT data, so
//     the client switches to the forward-secret key as soon as the answer
//     arrives (a key-update frame, see package wire), and early-data
//     hellos stamped before the replay cache started are refused (a
//     restarted server cannot vouch for them).
package auth

import (
	"bytes"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"sync/atomic"
	"time"

	"github.com/flynn/noise"
)

// Wire constants.
const (
	KeyLen        = 32 // AES-256 and the Noise PSK
	PublicLen     = 32 // X25519 public key
	TagLen        = 16 // AES-GCM tag
	MaxRequestLen = 260
	ReplyLen      = 2

	helloPayloadLen = 8 + 1 + 2 + 2 + MaxRequestLen
	replyPayloadLen = ReplyLen + 2 // with FlagPadReply: the reply and its pad length

	// ClientHelloLen is the fixed size of the client's first message.
	ClientHelloLen = PublicLen + helloPayloadLen + TagLen
	// ServerHelloLen is the fixed size of the server's answer, and
	// ServerHelloPadLen its fixed part when the client set FlagPadReply.
	ServerHelloLen    = PublicLen + ReplyLen + TagLen
	ServerHelloPadLen = PublicLen + replyPayloadLen + TagLen

	// MaxHelloPad and MaxReplyPad bound the random bytes after each
	// message: the first flight's and the answer's sizes vary, uniformly
	// over that range, instead of being always 321 and 50 bytes.
	MaxHelloPad = 1000
	MaxReplyPad = 500

	// FlagPlaintext asks the server to relay data without encryption after
	// the authenticated exchange (only honoured if the server allows it).
	FlagPlaintext = 0x01
	// FlagEarlyData says the client's data follows the hello at once,
	// before the server's answer, sealed with the early key.
	FlagEarlyData = 0x02
	// FlagPadding says the client drops padding frames (wire.FlagPadding):
	// the server may pad towards it, and answers with
	// wire.ReplyFlagPadding when the client may pad towards the server.
	// Servers that predate it ignore the flag and answer without.
	FlagPadding = 0x04
	// FlagPadReply asks the server to follow its answer with random bytes
	// (their count in the answer). Every braid client sets it; the flag
	// only keeps the answer's size known to a peer that did not.
	FlagPadReply = 0x08
	// FlagDrain says the client, once both directions have ended, reads
	// and drops the server's padding frames after its FIN frame
	// (wire.DrainOnClose): the server may pad after it, and says so with
	// wire.ReplyFlagLinger.
	FlagDrain = 0x10
	// FlagLinger says the client may pad after its own FIN frame
	// (wire.LingerForPadding) if the server drains it, which the server
	// says with wire.ReplyFlagDrain.
	FlagLinger = 0x20

	prologue = "braid-proxy v3"
	labelPSK = "braid-v2 noise psk"
	labelEar = "braid-v3 early c2s"
)

// Errors returned by the handshake; all mean "not authenticated".
var (
	ErrBadHello   = errors.New("no configured key opens the hello (wrong key, unknown client or not a braid v2 client)")
	ErrClockSkew  = errors.New("hello time outside allowed clock skew")
	ErrReplay     = errors.New("replayed hello")
	ErrMalformed  = errors.New("malformed hello")
	ErrServerAuth = errors.New("server failed to authenticate (wrong key or not a braid v2 server)")
)

// ErrEarlyDataRefused is returned for an authentic, fresh hello whose early
// data the server cannot vouch for (its client id's replay share is full,
// see ReplayCache); the client may connect again without early data.
var ErrEarlyDataRefused = errors.New("early data refused: this client id's replay share is full")

var suite = noise.NewCipherSuite(pooledDH{}, noise.CipherAESGCM, noise.HashSHA256)

// PSK is a client's Noise pre-shared key, derived from its key file entry.
type PSK struct {
	ID  string
	Key [KeyLen]byte
}

// NoisePSK derives the 32-byte Noise PSK from a key file key (which may be
// longer than 32 bytes): HKDF-SHA256(key, "braid-v2 noise psk").
func NoisePSK(key []byte) [KeyLen]byte {
	b, err := hkdf.Key(sha256.New, key, nil, labelPSK, KeyLen)
	if err != nil {
		panic("auth: HKDF of 32 bytes failed: " + err.Error())
	}
	return [KeyLen]byte(b)
}

// PSKs derives every client's PSK, in id order.
func PSKs(keys Keys) []PSK {
	out := make([]PSK, 0, len(keys))
	for id, k := range keys {
		out = append(out, PSK{ID: id, Key: NoisePSK(k)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// handshakeConfig is the Noise configuration of one end of a handshake:
// NKpsk0 when the server has a static key (static on the server, peer on
// the client), NNpsk0 otherwise.
func handshakeConfig(dh handshakeDH, psk *[KeyLen]byte, initiator bool, static *DHKey, peer []byte) noise.Config {
	cfg := noise.Config{
		CipherSuite:           noise.NewCipherSuite(dh, noise.CipherAESGCM, noise.HashSHA256),
		Pattern:               noise.HandshakeNN,
		Initiator:             initiator,
		Prologue:              []byte(prologue),
		PresharedKey:          psk[:],
		PresharedKeyPlacement: 0,
	}
	if static != nil || peer != nil {
		cfg.Pattern = noise.HandshakeNK
		cfg.PeerStatic = peer
		if static != nil {
			cfg.StaticKeypair = *static
		}
	}
	return cfg
}

func newHandshake(dh handshakeDH, psk *[KeyLen]byte, initiator bool, static *DHKey, peer []byte) (*noise.HandshakeState, error) {
	hs, err := noise.NewHandshakeState(handshakeConfig(dh, psk, initiator, static, peer))
	if err != nil {
		return nil, fmt.Errorf("noise handshake: %w", err)
	}
	return hs, nil
}

// earlyKey is HKDF-SHA256(psk || es, salt = h1, "braid-v3 early c2s"); es
// (the first message's DH with the server's static key) is empty without
// one.
func earlyKey(psk *[KeyLen]byte, es, h1 []byte) [KeyLen]byte {
	ikm := append(append(make([]byte, 0, KeyLen+len(es)), psk[:]...), es...)
	b, err := hkdf.Key(sha256.New, ikm, h1, labelEar, KeyLen)
	if err != nil {
		panic("auth: HKDF of 32 bytes failed: " + err.Error())
	}
	return [KeyLen]byte(b)
}

// toWire replaces the ephemeral public key Noise wrote at the start of msg
// with the representative it travels as; fromWire turns a received one
// back into the key, in place, before Noise reads it.
func toWire(msg []byte, e *ephemeral) { copy(msg[:PublicLen], e.wire[:]) }

func fromWire(msg []byte) {
	u := publicFromWire(msg[:PublicLen])
	copy(msg[:PublicLen], u[:])
}

// SessionKeys are a connection's forward-secret relay keys, one per
// direction.
type SessionKeys struct {
	C2S, S2C [KeyLen]byte
}

// ClientHandshake is the client's side of one handshake.
type ClientHandshake struct {
	hs    *noise.HandshakeState
	psk   [KeyLen]byte
	flags byte
	es    []byte
	h1    [sha256.Size]byte
}

// helloPayload is the first message's payload: time, flags, request
// length, the count of random bytes after the message, the request (at
// most MaxRequestLen bytes) and zero padding.
func helloPayload(flags byte, now time.Time, pad int, request []byte) [helloPayloadLen]byte {
	var payload [helloPayloadLen]byte
	binary.BigEndian.PutUint64(payload[0:], uint64(now.UnixMilli()))
	payload[8] = flags
	binary.BigEndian.PutUint16(payload[9:], uint16(len(request)))
	binary.BigEndian.PutUint16(payload[11:], uint16(pad))
	copy(payload[13:], request)
	return payload
}

// appendPad appends n random bytes to msg.
func appendPad(msg []byte, n int) ([]byte, error) {
	msg = append(msg, make([]byte, n)...)
	if _, err := rand.Read(msg[len(msg)-n:]); err != nil {
		return nil, fmt.Errorf("random: %w", err)
	}
	return msg, nil
}

// NewClientHello builds the client's first flight carrying request (at
// most MaxRequestLen bytes): the message and 0..MaxHelloPad random bytes.
// serverPublic is the server's static public key, or nil for a server
// without one.
func NewClientHello(psk [KeyLen]byte, serverPublic []byte, flags byte, now time.Time, request []byte) (*ClientHandshake, []byte, error) {
	if len(request) > MaxRequestLen {
		return nil, nil, fmt.Errorf("request of %d bytes exceeds %d", len(request), MaxRequestLen)
	}
	if serverPublic != nil && len(serverPublic) != PublicLen {
		return nil, nil, fmt.Errorf("server public key of %d bytes, want %d", len(serverPublic), PublicLen)
	}
	pad := mrand.IntN(MaxHelloPad + 1)
	payload := helloPayload(flags, now, pad, request)
	c := &ClientHandshake{psk: psk, flags: flags}
	dh := newHandshakeDH()
	hs, err := newHandshake(dh, &c.psk, true, nil, serverPublic)
	if err != nil {
		return nil, nil, err
	}
	msg, _, _, err := hs.WriteMessage(make([]byte, 0, ClientHelloLen+pad), payload[:])
	if err != nil {
		return nil, nil, fmt.Errorf("writing hello: %w", err)
	}
	if serverPublic != nil {
		if c.es, err = dh.DH(dh.e.key.Private, serverPublic); err != nil {
			return nil, nil, err
		}
	}
	toWire(msg, dh.e)
	c.hs = hs
	copy(c.h1[:], hs.ChannelBinding()) // Noise updates h in place later
	if msg, err = appendPad(msg, pad); err != nil {
		return nil, nil, err
	}
	return c, msg, nil
}

// EarlyKey is the key for data sent before the server's answer.
func (c *ClientHandshake) EarlyKey() [KeyLen]byte { return earlyKey(&c.psk, c.es, c.h1[:]) }

// ServerHelloLen is the size of the server's answer before its random
// bytes: ServerHelloPadLen when this hello asked for them.
func (c *ClientHandshake) ServerHelloLen() int {
	if c.flags&FlagPadReply != 0 {
		return ServerHelloPadLen
	}
	return ServerHelloLen
}

// ReadServerHello checks the server's answer (exactly c.ServerHelloLen()
// bytes) and returns its reply, the session keys and the count of random
// bytes that follow it, for the caller to skip.
func (c *ClientHandshake) ReadServerHello(msg []byte) ([]byte, SessionKeys, int, error) {
	if len(msg) != c.ServerHelloLen() {
		return nil, SessionKeys{}, 0, ErrServerAuth
	}
	m := bytes.Clone(msg)
	fromWire(m)
	payload, cs1, cs2, err := c.hs.ReadMessage(nil, m)
	if err != nil || cs1 == nil || len(payload) != len(msg)-PublicLen-TagLen {
		return nil, SessionKeys{}, 0, ErrServerAuth
	}
	pad := 0
	if c.flags&FlagPadReply != 0 {
		if pad = int(binary.BigEndian.Uint16(payload[ReplyLen:])); pad > MaxReplyPad {
			return nil, SessionKeys{}, 0, ErrServerAuth
		}
	}
	return payload[:ReplyLen], SessionKeys{C2S: cs1.UnsafeKey(), S2C: cs2.UnsafeKey()}, pad, nil
}

// Verifier checks client hellos on the server.
type Verifier struct {
	PSKs    []PSK
	Static  *DHKey // the server's static key pair: NKpsk0; nil: NNpsk0
	MaxSkew time.Duration
	Replay  *ReplayCache
	Now     func() time.Time // for tests; nil means time.Now

	trials atomic.Int64 // keys tried, for tests
}

// Accepted is a verified client hello.
type Accepted struct {
	ID      string
	Flags   byte
	Time    time.Time
	Request []byte
	Pad     int // random bytes after the hello, for the caller to skip

	hs  *noise.HandshakeState
	dh  handshakeDH
	psk [KeyLen]byte
	es  []byte
	h1  [sha256.Size]byte
}

// Verify authenticates the first message at the start of msg (its first
// ClientHelloLen bytes; what follows is the caller's: Accepted.Pad says
// how much of it is padding), checks its time and records its ephemeral
// key in the replay cache.
func (v *Verifier) Verify(msg []byte) (*Accepted, error) {
	if len(msg) < ClientHelloLen {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(msg))
	}
	var m [ClientHelloLen]byte
	copy(m[:], msg)
	fromWire(m[:])
	// Every key is tried, whichever opens the hello: the time a hello
	// takes says nothing about which client sent it, or where in the key
	// file a replayed one's id is. The trials share one DH function, so
	// es is computed once.
	dh := newHandshakeDH()
	var (
		found   *Accepted
		payload []byte
	)
	for i := range v.PSKs {
		a := &Accepted{ID: v.PSKs[i].ID, psk: v.PSKs[i].Key, dh: dh}
		hs, err := newHandshake(dh, &a.psk, false, v.Static, nil)
		if err != nil {
			return nil, err
		}
		v.trials.Add(1)
		p, _, _, err := hs.ReadMessage(make([]byte, 0, helloPayloadLen), m[:])
		if err != nil || found != nil {
			continue
		}
		a.hs = hs
		copy(a.h1[:], hs.ChannelBinding())
		found, payload = a, p
	}
	if found == nil {
		return nil, ErrBadHello
	}
	if v.Static != nil {
		es, err := dh.DH(v.Static.Private, m[:PublicLen])
		if err != nil {
			return nil, ErrBadHello
		}
		found.es = es
	}
	return found, v.check(found, payload, [PublicLen]byte(m[:PublicLen]))
}

// check decodes an authenticated payload and applies the clock window and
// the replay cache.
func (v *Verifier) check(a *Accepted, payload []byte, eph [PublicLen]byte) error {
	if len(payload) != helloPayloadLen {
		return ErrMalformed
	}
	a.Time = time.UnixMilli(int64(binary.BigEndian.Uint64(payload)))
	a.Flags = payload[8]
	n := int(binary.BigEndian.Uint16(payload[9:]))
	if n > MaxRequestLen {
		return fmt.Errorf("%w: request length %d", ErrMalformed, n)
	}
	if a.Pad = int(binary.BigEndian.Uint16(payload[11:])); a.Pad > MaxHelloPad {
		return fmt.Errorf("%w: %d bytes of padding", ErrMalformed, a.Pad)
	}
	a.Request = payload[13 : 13+n]
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	if d := now.Sub(a.Time); d > v.MaxSkew || d < -v.MaxSkew {
		return fmt.Errorf("%w: %v", ErrClockSkew, d.Round(time.Millisecond))
	}
	if a.Flags&FlagEarlyData != 0 && a.Time.Before(v.Replay.Start) {
		return fmt.Errorf("%w: early data stamped before the replay cache started (%v earlier)",
			ErrReplay, v.Replay.Start.Sub(a.Time).Round(time.Millisecond))
	}
	switch v.Replay.Add(a.ID, eph, now, a.Flags&FlagEarlyData != 0) {
	case ReplaySeen:
		return ErrReplay
	case ReplayFull:
		return ErrEarlyDataRefused
	}
	return nil
}

// EarlyKey is the key of the client's data sent before the answer.
func (a *Accepted) EarlyKey() [KeyLen]byte { return earlyKey(&a.psk, a.es, a.h1[:]) }

// AnswerLen is the size of the server's answer before its random bytes:
// ServerHelloPadLen if the client asked for them, else ServerHelloLen.
func (a *Accepted) AnswerLen() int {
	if a.Flags&FlagPadReply != 0 {
		return ServerHelloPadLen
	}
	return ServerHelloLen
}

// ServerHello builds the answer carrying reply (ReplyLen bytes), followed
// by 0..MaxReplyPad random bytes if the client asked (FlagPadReply), and
// returns it with the session keys.
func (a *Accepted) ServerHello(reply []byte) ([]byte, SessionKeys, error) {
	if len(reply) != ReplyLen {
		return nil, SessionKeys{}, fmt.Errorf("reply of %d bytes, want %d", len(reply), ReplyLen)
	}
	pad := 0
	if a.Flags&FlagPadReply != 0 {
		pad = mrand.IntN(MaxReplyPad + 1)
		reply = binary.BigEndian.AppendUint16(bytes.Clone(reply), uint16(pad))
	}
	msg, cs1, cs2, err := a.hs.WriteMessage(make([]byte, 0, ServerHelloPadLen+pad), reply)
	if err != nil {
		return nil, SessionKeys{}, fmt.Errorf("writing server hello: %w", err)
	}
	toWire(msg, a.dh.e)
	if msg, err = appendPad(msg, pad); err != nil {
		return nil, SessionKeys{}, err
	}
	return msg, SessionKeys{C2S: cs1.UnsafeKey(), S2C: cs2.UnsafeKey()}, nil
}

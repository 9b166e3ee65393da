// Package auth implements braid's pre-shared-key mutual authentication
// between the client box and the relay server, and derives the session keys
// that encrypt the relay.
//
// The exchange costs no round trip beyond the one the first request needs:
//
//	client -> server  ClientHello = magic "BRD\x01" | flags | len(id) | id |
//	                                time (unix ms, 8) | Nc (32) | Mc (32)
//	                  Mc = HMAC-SHA256(K, "braid-v1 client hello" | all bytes before Mc)
//	                  then the request, sealed with the early key
//	server -> client  ServerHello = Ns (32) | Ms (32)
//	                  Ms = HMAC-SHA256(K, "braid-v1 server hello" | ClientHello | Ns)
//	                  then the reply, sealed with the server-to-client key
//
// The server proves knowledge of K by Ms, which covers the client's fresh
// nonce; the client proves it by Mc. A recorded ClientHello is refused when
// its time is outside ±MaxSkew or its nonce is already in the replay cache
// (entries live 2·MaxSkew, so every hello the clock window accepts is
// remembered). Keys come from HKDF-SHA256 over K:
//
//	early c2s = HKDF(K, salt = Nc,      info = "braid-v1 early c2s" | H(ClientHello))
//	c2s       = HKDF(K, salt = Nc | Ns, info = "braid-v1 c2s" | H(ClientHello))
//	s2c       = HKDF(K, salt = Nc | Ns, info = "braid-v1 s2c" | H(ClientHello))
//
// The early key protects the request frame (like TLS 0-RTT, with the replay
// cache as its guard). By default relay data in both directions uses keys
// that include the server's nonce. A hello with FlagEarlyData announces that
// the client's data follows the request at once, before the server's answer,
// still under the early key (its frame counter continuing); that saves the
// round trip an application would otherwise wait for. Such data is only as
// fresh as the replay cache can prove: a cache cannot vouch for hellos
// stamped before it existed (they may have been recorded before a server
// restart), so early-data hellos older than the cache are refused.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Wire constants.
const (
	NonceLen = 32
	MACLen   = 32
	KeyLen   = 32 // AES-256

	// ServerHelloLen is the fixed size of the server hello.
	ServerHelloLen = NonceLen + MACLen

	// FlagPlaintext asks the server to relay data without encryption after
	// the authenticated exchange (only honoured if the server allows it).
	FlagPlaintext = 0x01
	// FlagEarlyData says the client's data follows the request without
	// waiting for the server's answer, sealed with the early key.
	FlagEarlyData = 0x02

	labelClient = "braid-v1 client hello"
	labelServer = "braid-v1 server hello"
)

// Magic opens every client hello: "BRD" and protocol version 1.
var Magic = [4]byte{'B', 'R', 'D', 0x01}

// Errors returned by verification; all mean "not authenticated".
var (
	ErrBadMagic   = errors.New("not a braid hello")
	ErrUnknownID  = errors.New("unknown client id")
	ErrBadMAC     = errors.New("hello MAC mismatch (wrong key?)")
	ErrClockSkew  = errors.New("hello time outside allowed clock skew")
	ErrReplay     = errors.New("replayed hello")
	ErrMalformed  = errors.New("malformed hello")
	ErrServerAuth = errors.New("server failed to authenticate (wrong key or not a braid server)")
)

// ClientHello is the parsed first message of a connection.
type ClientHello struct {
	Flags byte
	ID    string
	Time  time.Time
	Nonce [NonceLen]byte
	MAC   [MACLen]byte
	Raw   []byte // the encoded message, MAC included

	transcript [sha256.Size]byte // SHA-256 of Raw, once computed
	hashed     bool
}

// transcriptHash is SHA-256 of the hello; both key derivations of a
// connection use it, so it is computed once.
func (h *ClientHello) transcriptHash() []byte {
	if !h.hashed {
		h.transcript = sha256.Sum256(h.Raw)
		h.hashed = true
	}
	return h.transcript[:]
}

// NewClientHello builds and MACs a hello for id with key.
func NewClientHello(id string, key []byte, flags byte, now time.Time) (*ClientHello, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	h := &ClientHello{Flags: flags, ID: id, Time: time.UnixMilli(now.UnixMilli())}
	if _, err := rand.Read(h.Nonce[:]); err != nil {
		return nil, fmt.Errorf("generating nonce: %w", err)
	}
	b := make([]byte, 0, 6+len(id)+8+NonceLen+MACLen)
	b = append(b, Magic[:]...)
	b = append(b, flags, byte(len(id)))
	b = append(b, id...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.Time.UnixMilli()))
	b = append(b, h.Nonce[:]...)
	h.MAC = macOf(key, labelClient, b, nil)
	h.Raw = append(b, h.MAC[:]...)
	return h, nil
}

// macOf is HMAC-SHA256(key, label | a | b); b may be nil.
func macOf(key []byte, label string, a, b []byte) [MACLen]byte {
	return hmacSHA256(key, []byte(label), a, b)
}

// ReadClientHello reads exactly one hello from r (nothing past it).
func ReadClientHello(r io.Reader) (*ClientHello, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("reading hello: %w", err)
	}
	if [4]byte(hdr[:4]) != Magic {
		return nil, ErrBadMagic
	}
	idLen := int(hdr[5])
	if idLen == 0 || idLen > MaxIDLen {
		return nil, fmt.Errorf("%w: id length %d", ErrMalformed, idLen)
	}
	raw := make([]byte, 6+idLen+8+NonceLen+MACLen)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(r, raw[6:]); err != nil {
		return nil, fmt.Errorf("reading hello: %w", err)
	}
	return ParseClientHello(raw)
}

// ParseClientHello decodes a complete hello (exact length).
func ParseClientHello(raw []byte) (*ClientHello, error) {
	if len(raw) < 6 || [4]byte(raw[:4]) != Magic {
		return nil, ErrBadMagic
	}
	idLen := int(raw[5])
	if idLen == 0 || idLen > MaxIDLen || len(raw) != 6+idLen+8+NonceLen+MACLen {
		return nil, fmt.Errorf("%w: length %d", ErrMalformed, len(raw))
	}
	h := &ClientHello{Flags: raw[4], ID: string(raw[6 : 6+idLen]), Raw: raw}
	if err := CheckID(h.ID); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	p := 6 + idLen
	h.Time = time.UnixMilli(int64(binary.BigEndian.Uint64(raw[p:])))
	p += 8
	copy(h.Nonce[:], raw[p:])
	p += NonceLen
	copy(h.MAC[:], raw[p:])
	return h, nil
}

// Verifier checks client hellos on the server.
type Verifier struct {
	Keys    Keys
	MaxSkew time.Duration
	Replay  *ReplayCache
	Now     func() time.Time // for tests; nil means time.Now
}

// Verify authenticates h and records its nonce. It returns the client's key.
func (v *Verifier) Verify(h *ClientHello) ([]byte, error) {
	key, ok := v.Keys[h.ID]
	if !ok {
		// Spend the same time as a MAC check so ids cannot be probed by timing.
		macOf(make([]byte, KeyLen), labelClient, h.Raw[:len(h.Raw)-MACLen], nil)
		return nil, ErrUnknownID
	}
	want := macOf(key, labelClient, h.Raw[:len(h.Raw)-MACLen], nil)
	if !hmac.Equal(want[:], h.MAC[:]) {
		return nil, ErrBadMAC
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	if d := now.Sub(h.Time); d > v.MaxSkew || d < -v.MaxSkew {
		return nil, fmt.Errorf("%w: %v", ErrClockSkew, d.Round(time.Millisecond))
	}
	if h.Flags&FlagEarlyData != 0 && h.Time.Before(v.Replay.Start) {
		return nil, fmt.Errorf("%w: early data stamped before the replay cache started (%v earlier)",
			ErrReplay, v.Replay.Start.Sub(h.Time).Round(time.Millisecond))
	}
	if !v.Replay.Add(h.ID, h.Nonce, now) {
		return nil, ErrReplay
	}
	return key, nil
}

// Session holds the derived keys of one connection.
type Session struct {
	EarlyC2S, C2S, S2C [KeyLen]byte
}

// NewServerHello picks the server nonce and MACs it over the client hello.
func NewServerHello(key []byte, ch *ClientHello) ([]byte, [NonceLen]byte, error) {
	var ns [NonceLen]byte
	if _, err := rand.Read(ns[:]); err != nil {
		return nil, ns, fmt.Errorf("generating nonce: %w", err)
	}
	out := make([]byte, 0, ServerHelloLen)
	out = append(out, ns[:]...)
	mac := macOf(key, labelServer, ch.Raw, ns[:])
	out = append(out, mac[:]...)
	return out, ns, nil
}

// CheckServerHello verifies the server's proof and returns its nonce.
func CheckServerHello(key []byte, ch *ClientHello, sh []byte) ([NonceLen]byte, error) {
	var ns [NonceLen]byte
	if len(sh) != ServerHelloLen {
		return ns, ErrServerAuth
	}
	copy(ns[:], sh)
	if mac := macOf(key, labelServer, ch.Raw, ns[:]); !hmac.Equal(mac[:], sh[NonceLen:]) {
		return ns, ErrServerAuth
	}
	return ns, nil
}

// EarlyKey derives the key for the request sealed into the first flight.
func EarlyKey(key []byte, ch *ClientHello) [KeyLen]byte {
	prk := hkdfExtract(key, ch.Nonce[:])
	return hkdfExpand32(prk[:], "braid-v1 early c2s", ch.transcriptHash())
}

// SessionSecret is the HKDF pseudorandom key both relay keys of a
// connection expand from (salt: both nonces).
type SessionSecret struct {
	prk [sha256.Size]byte
	th  []byte
}

// NewSessionSecret extracts the session secret once both nonces are known.
func NewSessionSecret(key []byte, ch *ClientHello, ns [NonceLen]byte) SessionSecret {
	var salt [2 * NonceLen]byte
	copy(salt[:], ch.Nonce[:])
	copy(salt[NonceLen:], ns[:])
	return SessionSecret{prk: hkdfExtract(key, salt[:]), th: ch.transcriptHash()}
}

// C2S is the client-to-server key (not needed when the client's data
// continues under the early key).
func (s SessionSecret) C2S() [KeyLen]byte { return hkdfExpand32(s.prk[:], "braid-v1 c2s", s.th) }

// S2C is the server-to-client key.
func (s SessionSecret) S2C() [KeyLen]byte { return hkdfExpand32(s.prk[:], "braid-v1 s2c", s.th) }

package auth

import (
	"crypto/sha256"
	"sync"
)

// This file computes HMAC-SHA256 (RFC 2104) and the one-block HKDF-SHA256
// (RFC 5869) of braid's key schedule without allocating. crypto/hmac and
// crypto/hkdf allocate about fifteen objects per MAC (hash states, pads,
// results), and each end of a connection computes half a dozen MACs:
// measured, that was a quarter of braid-proxy's allocations per connection.
// The tests check both functions against the standard library.

// macScratch holds one message with its 64-byte pad in front.
type macScratch struct{ buf []byte }

var macScratches = sync.Pool{New: func() any { return &macScratch{buf: make([]byte, 0, 512)} }}

// hmacSHA256 returns HMAC-SHA256(key, the concatenation of parts).
func hmacSHA256(key []byte, parts ...[]byte) [sha256.Size]byte {
	var k [sha256.BlockSize]byte
	if len(key) > sha256.BlockSize {
		h := sha256.Sum256(key)
		copy(k[:], h[:])
	} else {
		copy(k[:], key)
	}
	s := macScratches.Get().(*macScratch)
	defer macScratches.Put(s)
	b := s.buf[:0]
	for _, c := range k {
		b = append(b, c^0x36)
	}
	for _, p := range parts {
		b = append(b, p...)
	}
	inner := sha256.Sum256(b)
	b = b[:0]
	for _, c := range k {
		b = append(b, c^0x5c)
	}
	b = append(b, inner[:]...)
	s.buf = b // keep a buffer grown by a long message
	return sha256.Sum256(b)
}

// hkdfExtract is HKDF-Extract(salt, ikm) with SHA-256.
func hkdfExtract(ikm, salt []byte) [sha256.Size]byte { return hmacSHA256(salt, ikm) }

// hkdfExpand32 is HKDF-Expand(prk, label | th, 32) with SHA-256: one
// block, T(1) = HMAC(prk, label | th | 0x01).
func hkdfExpand32(prk []byte, label string, th []byte) [sha256.Size]byte {
	return hmacSHA256(prk, []byte(label), th, []byte{1})
}

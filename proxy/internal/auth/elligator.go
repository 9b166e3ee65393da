package auth

// Ephemeral public keys that look like random bytes on the wire.
//
// An X25519 public key is the u-coordinate of a curve point, and only
// about half of all field elements are one: an observer who computes the
// Legendre symbol of u³ + Au² + u for the first 32 bytes of ~20 of a
// server's connections tells a braid handshake from random data. So each
// ephemeral key travels as its Elligator2 representative (Bernstein,
// Hamburg, Krasnova, Lange, "Elligator: elliptic-curve points
// indistinguishable from uniform random strings", CCS 2013): a field
// element r in [0, (p-1)/2] that the public map turns back into u. Only
// keys whose point has a representative (about half) are used.
//
// Representatives of ordinary X25519 keys are still distinguishable: the
// keys are multiples of the base point, all in the prime-order subgroup,
// and an observer who maps r back to the point and multiplies by the
// group order sees the identity every time, where a uniform r gives a
// point of the full group (order 8L) seven times in eight. That flaw in
// the first obfs4 implementation was fixed in Tor's lyrebird by adding a
// random point of small order to every public key; this file does the
// same. The peer's X25519 clamps its scalar to a multiple of 8, which
// removes that component, so the shared secrets are unchanged.
//
// The representative is below 2^254: its two top bits are random on the
// wire and cleared before decoding. Which of a point's two
// representatives (for v and -v; X25519 keeps only u) is sent is chosen
// at random too.
//
// Decoding uses the Elligator2 map of gitlab.com/yawning/edwards25519-extra
// (the library lyrebird's own map builds on); encoding, its inverse, is
// here and tested against it.

import (
	"errors"
	"fmt"
	"io"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
	"gitlab.com/yawning/edwards25519-extra/elligator2"
)

// montgomeryA is Curve25519's A = 486662.
var montgomeryA = new(field.Element).Mult32(new(field.Element).One(), 486662)

// lowOrder holds the eight points of order dividing 8, [i]T for a
// generator T of the torsion subgroup.
var lowOrder = torsionPoints()

// torsionPoints derives the small-order subgroup rather than listing its
// encodings: the point of representative 1, less its prime-order part
// ([1/8 mod L]·[8]P), is its torsion component; representatives are
// tried until that component has order 8.
func torsionPoints() [8]*edwards25519.Point {
	var eightLE [32]byte
	eightLE[0] = 8
	eight, err := new(edwards25519.Scalar).SetCanonicalBytes(eightLE[:])
	if err != nil {
		panic("auth: scalar 8: " + err.Error())
	}
	invEight := new(edwards25519.Scalar).Invert(eight)
	identity := edwards25519.NewIdentityPoint()
	for n := uint32(1); n < 64; n++ {
		r := new(field.Element).Mult32(new(field.Element).One(), n)
		p := elligator2.EdwardsFlavor(r)
		prime := new(edwards25519.Point).ScalarMult(invEight, new(edwards25519.Point).MultByCofactor(p))
		t := new(edwards25519.Point).Subtract(p, prime)
		four := new(edwards25519.Point).Add(t, t)
		four.Add(four, four)
		if four.Equal(identity) == 1 {
			continue // order 1, 2 or 4
		}
		var pts [8]*edwards25519.Point
		pts[0] = edwards25519.NewIdentityPoint()
		for i := 1; i < 8; i++ {
			pts[i] = new(edwards25519.Point).Add(pts[i-1], t)
		}
		return pts
	}
	panic("auth: no point of order 8 among the first representatives")
}

// representative returns a representative of the Montgomery u-coordinate
// u, the one for v's sign given by tweak's low bit, and whether u has
// one: u ≠ 0, u ≠ -A and -2u(u + A) a square. It is
//
//	r = sqrt(-u / (2(u + A)))   or   r = sqrt(-(u + A) / (2u)),
//
// whichever of its two roots is below 2^254 (p = 2^255 - 19: exactly one
// is), both mapped back to u by Elligator2.
func representative(u *field.Element, tweak byte) (*field.Element, bool) {
	uPlusA := new(field.Element).Add(u, montgomeryA)
	num := new(field.Element).Negate(u)
	den := new(field.Element).Add(uPlusA, uPlusA)
	if tweak&1 == 1 {
		num.Negate(uPlusA)
		den.Add(u, u)
	}
	zero := new(field.Element)
	if den.Equal(zero) == 1 || num.Equal(zero) == 1 {
		return nil, false
	}
	r, square := new(field.Element).SqrtRatio(num, den)
	neg := new(field.Element).Negate(r)
	r.Select(neg, r, int(r.Bytes()[PublicLen-1]>>6&1))
	return r, square == 1
}

// representableKeypair draws X25519 key pairs until one's public key,
// with a random small-order point added, has a representative; it
// returns the pair (Public is that key's u, which Noise hashes) and the
// 32 bytes to send. About two draws are needed on average.
func representableKeypair(rng io.Reader) (DHKey, [PublicLen]byte, error) {
	var buf [KeyLen + 1]byte
	for range 128 {
		if _, err := io.ReadFull(rng, buf[:]); err != nil {
			return DHKey{}, [PublicLen]byte{}, fmt.Errorf("generating X25519 key: %w", err)
		}
		priv, tweak := buf[:KeyLen], buf[KeyLen]
		s, err := new(edwards25519.Scalar).SetBytesWithClamping(priv)
		if err != nil {
			return DHKey{}, [PublicLen]byte{}, err
		}
		p := new(edwards25519.Point).ScalarBaseMult(s)
		p.Add(p, lowOrder[tweak>>5]) // top three bits: which small-order point
		pub := p.BytesMontgomery()
		u, err := new(field.Element).SetBytes(pub)
		if err != nil {
			return DHKey{}, [PublicLen]byte{}, err
		}
		r, ok := representative(u, tweak)
		if !ok {
			continue
		}
		var wire [PublicLen]byte
		copy(wire[:], r.Bytes())
		wire[PublicLen-1] |= tweak & 0x06 << 5 // bits 1-2 of tweak: the two unused top bits
		return DHKey{Private: append([]byte(nil), priv...), Public: pub}, wire, nil
	}
	return DHKey{}, [PublicLen]byte{}, errors.New("generating X25519 key: no representable key in 128 draws (broken random source?)")
}

// publicFromWire decodes the 32 bytes of a representative into the X25519
// public key (u-coordinate) it stands for. Every 32-byte string decodes to
// some key.
func publicFromWire(wire []byte) [PublicLen]byte {
	var b [PublicLen]byte
	copy(b[:], wire[:PublicLen])
	b[PublicLen-1] &= 0x3f
	r, err := new(field.Element).SetBytes(b[:])
	if err != nil {
		panic("auth: 32-byte field element refused: " + err.Error())
	}
	u, _ := elligator2.MontgomeryFlavor(r)
	return [PublicLen]byte(u.Bytes())
}

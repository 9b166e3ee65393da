package auth

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"math"
	"testing"
	"time"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
	"gitlab.com/yawning/edwards25519-extra/elligator2"
)

// Every generated key's wire form decodes to its public key, and the
// small-order part added to it changes no shared secret: crypto/ecdh,
// with the peer's standard public key, computes the same one.
func TestRepresentativeKeys(t *testing.T) {
	for i := range 1000 {
		e, err := newEphemeral(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if u := publicFromWire(e.wire[:]); !bytes.Equal(u[:], e.key.Public) {
			t.Fatalf("key %d: wire %x decodes to %x, want %x", i, e.wire, u, e.key.Public)
		}
		peer, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := pooledDH{}.DH(e.key.Private, peer.PublicKey().Bytes())
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := pooledDH{}.DH(peer.Bytes(), e.key.Public)
		if err != nil || !bytes.Equal(ours, theirs) {
			t.Fatalf("key %d: shared secrets %x and %x (%v)", i, ours, theirs, err)
		}
		std, err := ecdh.X25519().NewPrivateKey(e.key.Private)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := peer.ECDH(std.PublicKey())
		if err != nil || !bytes.Equal(ref, ours) {
			t.Fatalf("key %d: crypto/ecdh with the standard public key gives %x, want %x", i, ref, ours)
		}
	}
}

// firstFlightStats are what an observer can compute from the first 32
// bytes of many first flights (Legendre symbol, prime-order subgroup,
// the top bits) and from all their bytes (frequencies).
type firstFlightStats struct {
	n                     int
	curvePoint, primeOnly int // u³+Au²+u a square; decoded point in the prime-order subgroup
	bit254, bit255        int
	chi2                  float64 // byte frequencies against uniform, 255 degrees of freedom
}

var invEight = func() *edwards25519.Scalar {
	var b [32]byte
	b[0] = 8
	s, _ := new(edwards25519.Scalar).SetCanonicalBytes(b[:])
	return new(edwards25519.Scalar).Invert(s)
}()

func observe(flights [][]byte) firstFlightStats {
	st := firstFlightStats{n: len(flights)}
	var freq [256]float64
	total := 0.0
	for _, f := range flights {
		for _, b := range f {
			freq[b]++
		}
		total += float64(len(f))
		key := [32]byte(f[:32])
		st.bit254 += int(key[31] >> 6 & 1)
		st.bit255 += int(key[31] >> 7)
		// Read as an X25519 public key: is it a curve point's u?
		u, _ := new(field.Element).SetBytes(key[:])
		rhs := new(field.Element).Square(u)
		rhs.Add(rhs, new(field.Element).Multiply(montgomeryA, u))
		rhs.Add(rhs, new(field.Element).One())
		rhs.Multiply(rhs, u)
		if _, sq := new(field.Element).SqrtRatio(rhs, new(field.Element).One()); sq == 1 {
			st.curvePoint++
		}
		// Read as a representative: is its point of prime order, as
		// every plain X25519 key's is?
		key[31] &= 0x3f
		r, _ := new(field.Element).SetBytes(key[:])
		p := elligator2.EdwardsFlavor(r)
		q := new(edwards25519.Point).ScalarMult(invEight, new(edwards25519.Point).MultByCofactor(p))
		st.primeOnly += q.Equal(p)
	}
	for _, c := range freq {
		d := c - total/256
		st.chi2 += d * d / (total / 256)
	}
	return st
}

// within says whether k successes of n trials of probability p are within
// 4.5 standard deviations (two-sided tail 6.8e-6).
func within(k, n int, p float64) bool {
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(k)-float64(n)*p) <= 4.5*sd
}

// uniform says whether the statistics are those of uniform random bytes.
// False-failure probability for random input: four binomial tests at
// 6.8e-6 each and the chi-square (255 degrees of freedom) above 380, a
// tail below 1e-6: under 3e-5 a run.
func (st firstFlightStats) uniform() bool {
	return within(st.curvePoint, st.n, 0.5) && within(st.primeOnly, st.n, 1.0/8) &&
		within(st.bit254, st.n, 0.5) && within(st.bit255, st.n, 0.5) && st.chi2 < 380
}

// 2,000 first flights, each an independent handshake, cannot be told from
// random by the tests an observer has for X25519 keys on the wire (the
// Legendre symbol, the subgroup of the decoded point, the top bits) or by
// byte frequencies. The same observer tells plain X25519 keys at once:
// the test can fail.
func TestFirstFlightsLookRandom(t *testing.T) {
	const n = 2000
	flights := make([][]byte, n)
	plain := make([][]byte, n)
	server, err := newKeypair(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i := range flights {
		var pub []byte
		if i%2 == 1 {
			pub = server.Public // both patterns
		}
		_, msg, err := NewClientHello(testPSK, pub, FlagEarlyData, time.Now(), req)
		if err != nil {
			t.Fatal(err)
		}
		flights[i] = msg
		k, err := newKeypair(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		plain[i] = append(k.Public, msg[PublicLen:]...)
	}
	if st := observe(flights); !st.uniform() {
		t.Errorf("first flights are not like random bytes: %+v", st)
	} else {
		t.Logf("first flights: %+v", st)
	}
	if st := observe(plain); st.uniform() || st.curvePoint != n || st.primeOnly == n {
		t.Errorf("the observer does not tell plain X25519 keys: %+v", st)
	}
	// Their sizes: uniform over the MaxHelloPad+1 possible, so no size
	// repeats often. A size drawn 20 times of 2,000 (expected about 2) has
	// probability below 1e-12 for each of the 1,001 sizes.
	sizes := map[int]int{}
	for _, f := range flights {
		sizes[len(f)]++
	}
	most := 0
	for _, c := range sizes {
		most = max(most, c)
	}
	if most >= 20 || len(sizes) < 700 {
		t.Errorf("first flight sizes: %d distinct, the most common %d times of %d", len(sizes), most, n)
	}
}

// The answer to a client that asks for it (every braid client does) has a
// random tail too, whose length the client learns under the handshake.
func TestServerAnswerIsPadded(t *testing.T) {
	now := time.Now().Add(10 * time.Millisecond)
	sizes := map[int]bool{}
	for range 200 {
		ch, hello, err := NewClientHello(testPSK, nil, FlagPadReply, now, req)
		if err != nil {
			t.Fatal(err)
		}
		a, err := newVerifier(now).Verify(hello)
		if err != nil {
			t.Fatal(err)
		}
		answer, sk, err := a.ServerHello([]byte{0, 0})
		if err != nil {
			t.Fatal(err)
		}
		sizes[len(answer)] = true
		reply, ck, pad, err := ch.ReadServerHello(answer[:ch.ServerHelloLen()])
		if err != nil || ck != sk || !bytes.Equal(reply, []byte{0, 0}) || ch.ServerHelloLen()+pad != len(answer) {
			t.Fatalf("answer of %d bytes: reply %v, pad %d, %v", len(answer), reply, pad, err)
		}
	}
	if len(sizes) < 100 { // 200 draws from 501 sizes: about 165 distinct
		t.Fatalf("answers took only %d sizes", len(sizes))
	}
}

// A client holding the server's public key accepts only the server that
// holds the private key, though anyone may know the pre-shared key (a
// bridge line's): a forged server, with the right PSK but another static
// key, cannot read the hello, and its answer is refused; the early key
// is one a PSK holder without the static key cannot derive.
func TestStaticKeyStopsAForgedServer(t *testing.T) {
	real, err := newKeypair(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := newKeypair(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// Stamped after the verifiers' replay caches start (early data older
	// than a cache is refused), however slowly a race-built test runs.
	now := time.Now().Add(time.Second)
	ch, hello, err := NewClientHello(testPSK, real.Public, FlagEarlyData, now, req)
	if err != nil {
		t.Fatal(err)
	}

	imposter := newVerifier(now)
	imposter.Static = &forged
	if _, err := imposter.Verify(hello); err != ErrBadHello {
		t.Fatalf("forged server read the hello: %v", err)
	}
	noStatic := newVerifier(now)
	if _, err := noStatic.Verify(hello); err != ErrBadHello {
		t.Fatalf("server without the static key read the hello: %v", err)
	}

	// The forged server answers as a server without a static key would,
	// from its own NNpsk0 handshake with the same PSK.
	_, nn, _ := NewClientHello(testPSK, nil, 0, now, req)
	a, err := newVerifier(now).Verify(nn)
	if err != nil {
		t.Fatal(err)
	}
	answer, _, err := a.ServerHello([]byte{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ch.ReadServerHello(answer); err != ErrServerAuth {
		t.Fatalf("client accepted a forged answer: %v", err)
	}

	genuine := newVerifier(now)
	genuine.Static = &real
	acc, err := genuine.Verify(hello)
	if err != nil {
		t.Fatal(err)
	}
	if acc.EarlyKey() != ch.EarlyKey() {
		t.Fatal("early keys differ between the ends")
	}
	if k := earlyKey(&acc.psk, nil, acc.h1[:]); k == ch.EarlyKey() {
		t.Fatal("the early key is derivable from the PSK and the transcript alone")
	}
	answer, sk, err := acc.ServerHello([]byte{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, ck, _, err := ch.ReadServerHello(answer); err != nil || ck != sk {
		t.Fatalf("genuine server's answer: %v", err)
	}
}

package auth

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"io"
	"testing"
	"time"

	"github.com/flynn/noise"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 7748, section 6.1.
func TestDHRFC7748Vector(t *testing.T) {
	alicePriv := unhex(t, "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
	bobPub := unhex(t, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
	want := unhex(t, "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
	got, err := pooledDH{}.DH(alicePriv, bobPub)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("X25519 = %x, %v; want %x", got, err, want)
	}
	k, err := newKeypair(bytes.NewReader(alicePriv))
	if err != nil || !bytes.Equal(k.Public, unhex(t, "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")) {
		t.Fatalf("public key %x, %v", k.Public, err)
	}
}

// Key pairs and DH agree with crypto/ecdh on random keys, pooled or not.
func TestDHMatchesCryptoECDH(t *testing.T) {
	for i := range 200 {
		var k DHKey
		var err error
		if i%2 == 0 {
			k, err = pooledDH{}.GenerateKeypair(nil)
		} else {
			k, err = newKeypair(rand.Reader)
		}
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ecdh.X25519().NewPrivateKey(k.Private)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(k.Public, ref.PublicKey().Bytes()) {
			t.Fatalf("public key %x, crypto/ecdh %x", k.Public, ref.PublicKey().Bytes())
		}
		peer, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pooledDH{}.DH(k.Private, peer.PublicKey().Bytes())
		want, _ := ref.ECDH(peer.PublicKey())
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("DH %x, %v; crypto/ecdh %x", got, err, want)
		}
	}
}

func TestDHRefusesLowOrderKeys(t *testing.T) {
	k, err := newKeypair(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, pub := range [][]byte{make([]byte, 32), append([]byte{1}, make([]byte, 31)...)} {
		if out, err := (pooledDH{}).DH(k.Private, pub); err == nil {
			t.Fatalf("low-order key %x accepted, secret %x", pub, out)
		}
	}
	if _, err := (pooledDH{}).DH(k.Private, make([]byte, 31)); err == nil {
		t.Fatal("31-byte public key accepted")
	}
}

// refDH is flynn/noise's own 25519 (crypto/ecdh) for every DH, with an
// ephemeral key chosen by the test (Noise draws its own otherwise).
type refDH struct {
	noise.DHFunc
	e DHKey
}

func (r refDH) GenerateKeypair(io.Reader) (DHKey, error) { return r.e, nil }

// A client on flynn/noise's own 25519 (crypto/ecdh) completes a handshake
// with braid's server, with and without the server's static key: the wire
// protocol is the Noise pattern named in the package comment with the
// ephemeral keys sent as their representatives, whatever X25519 code
// either end runs.
func TestHandshakeWithReferenceNoiseDH(t *testing.T) {
	static, err := newKeypair(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, withStatic := range []bool{false, true} {
		now := time.Now().Add(10 * time.Millisecond)
		psk := testPSK
		e, err := newEphemeral(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		var peer []byte
		v := newVerifier(now)
		if withStatic {
			peer, v.Static = static.Public, &static
		}
		cfg := handshakeConfig(newHandshakeDH(), &psk, true, nil, peer)
		cfg.CipherSuite = noise.NewCipherSuite(refDH{noise.DH25519, e.key}, noise.CipherAESGCM, noise.HashSHA256)
		ref, err := noise.NewHandshakeState(cfg)
		if err != nil {
			t.Fatal(err)
		}
		payload := helloPayload(0, now, 0, req)
		msg1, _, _, err := ref.WriteMessage(nil, payload[:])
		if err != nil {
			t.Fatal(err)
		}
		copy(msg1, e.wire[:])
		a, err := v.Verify(msg1)
		if err != nil || a.ID != "box1" || !bytes.Equal(a.Request, req) {
			t.Fatalf("static %v: reference hello: %+v, %v", withStatic, a, err)
		}
		msg2, sk, err := a.ServerHello([]byte{5, 0})
		if err != nil {
			t.Fatal(err)
		}
		fromWire(msg2)
		reply, cs1, cs2, err := ref.ReadMessage(nil, msg2)
		if err != nil || !bytes.Equal(reply, []byte{5, 0}) || cs1 == nil {
			t.Fatalf("static %v: reference client read the answer: %v, %v", withStatic, reply, err)
		}
		if cs1.UnsafeKey() != sk.C2S || cs2.UnsafeKey() != sk.S2C {
			t.Fatalf("static %v: session keys differ from the reference client's", withStatic)
		}
	}
}

package auth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cloudflare/circl/dh/x25519"
	"github.com/flynn/noise"
)

// pooledDH is Noise's 25519 DH function (RFC 7748 X25519) on Cloudflare's
// CIRCL, with ephemeral key pairs generated ahead of need.
//
// X25519 is the whole of the forward-secret handshake's extra CPU over
// protocol v1 (perf on the benchmark: the rest of braid-proxy's user time
// per connection is v1's), and each connection costs four of them: a key
// pair and the ee DH at each end. Against crypto/ecdh, through which
// flynn/noise's own DH25519 goes (x/crypto/curve25519), CIRCL
//
//   - takes the secret as bytes: crypto/ecdh computes a private key's
//     public key whenever one is built from bytes, so flynn/noise's DH
//     costs two scalar multiplications, CIRCL's one;
//   - uses the CPU's MULX/ADX instructions where it has them, and a
//     fixed-base table for key generation: on the test machine a key pair
//     takes 17 us instead of 31 and a DH 26 us instead of 31 (measured).
//
// The key pairs come from a background goroutine, while the process waits
// for the network, rather than on a connection's critical path; the ee DH
// stays on it, one multiplication at each end.
type pooledDH struct{}

// DHKey is a Noise key pair.
type DHKey = noise.DHKey

const ephemeralPoolSize = 8

var (
	ephemerals     = make(chan DHKey, ephemeralPoolSize)
	ephemeralsOnce sync.Once

	errLowOrder = errors.New("X25519: low-order public key")
)

func newKeypair(rng io.Reader) (DHKey, error) {
	var priv, pub x25519.Key
	if _, err := io.ReadFull(rng, priv[:]); err != nil {
		return DHKey{}, fmt.Errorf("generating X25519 key: %w", err)
	}
	x25519.KeyGen(&pub, &priv)
	return DHKey{Private: priv[:], Public: pub[:]}, nil
}

func fillEphemerals() {
	for {
		k, err := newKeypair(rand.Reader)
		if err != nil {
			time.Sleep(time.Second) // the system's random source failed; GenerateKeypair reports it
			continue
		}
		ephemerals <- k
	}
}

func (pooledDH) GenerateKeypair(rng io.Reader) (DHKey, error) {
	ephemeralsOnce.Do(func() { go fillEphemerals() })
	select {
	case k := <-ephemerals:
		return k, nil
	default:
		if rng == nil {
			rng = rand.Reader
		}
		return newKeypair(rng)
	}
}

// DH is X25519(priv, pub). A public key of low order, which would make
// the shared secret predictable, is an error (as in flynn/noise's DH25519,
// which refuses the all-zero result those keys give).
func (pooledDH) DH(priv, pub []byte) ([]byte, error) {
	if len(priv) != x25519.Size || len(pub) != x25519.Size {
		return nil, fmt.Errorf("X25519: keys of %d and %d bytes", len(priv), len(pub))
	}
	var out x25519.Key
	if !x25519.Shared(&out, (*x25519.Key)(priv), (*x25519.Key)(pub)) {
		return nil, errLowOrder
	}
	return out[:], nil
}

func (pooledDH) DHLen() int     { return x25519.Size }
func (pooledDH) DHName() string { return "25519" }

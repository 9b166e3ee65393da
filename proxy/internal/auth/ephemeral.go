package auth

import (
	"bytes"
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
// The ephemeral key pairs (representable ones, see elligator.go) come from
// a background goroutine, while the process waits for the network, rather
// than on a connection's critical path; the DHs stay on it.
type pooledDH struct{}

// DHKey is a Noise key pair.
type DHKey = noise.DHKey

const ephemeralPoolSize = 8

// ephemeral is a key pair with the representative its public key travels
// as.
type ephemeral struct {
	key  DHKey
	wire [PublicLen]byte
}

var (
	ephemerals     = make(chan ephemeral, ephemeralPoolSize)
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

func newEphemeral(rng io.Reader) (ephemeral, error) {
	k, w, err := representableKeypair(rng)
	return ephemeral{key: k, wire: w}, err
}

func fillEphemerals() {
	for {
		e, err := newEphemeral(rand.Reader)
		if err != nil {
			time.Sleep(time.Second) // the system's random source failed; nextEphemeral reports it
			continue
		}
		ephemerals <- e
	}
}

// nextEphemeral returns a pooled ephemeral key pair, or a new one when
// the pool is empty.
func nextEphemeral() (ephemeral, error) {
	ephemeralsOnce.Do(func() { go fillEphemerals() })
	select {
	case e := <-ephemerals:
		return e, nil
	default:
		return newEphemeral(rand.Reader)
	}
}

// GenerateKeypair makes a plain X25519 key pair (static keys); handshakes
// take their ephemeral keys from handshakeDH.
func (pooledDH) GenerateKeypair(rng io.Reader) (DHKey, error) {
	if rng == nil {
		rng = rand.Reader
	}
	return newKeypair(rng)
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

// handshakeDH is one handshake's DH function: its ephemeral key pair is a
// representable one, drawn when Noise asks for it (a server drawing one
// for every garbage hello would drain the pool), and the result of the
// last DH is kept, so that a server trying each client's key on a hello
// computes the hello's es only once.
type handshakeDH struct {
	pooledDH
	e    *ephemeral // set by GenerateKeypair
	last *dhMemo
}

type dhMemo struct {
	priv, pub, out []byte
}

func newHandshakeDH() handshakeDH {
	return handshakeDH{e: new(ephemeral), last: new(dhMemo)}
}

func (d handshakeDH) GenerateKeypair(io.Reader) (DHKey, error) {
	e, err := nextEphemeral()
	if err != nil {
		return DHKey{}, err
	}
	*d.e = e
	return e.key, nil
}

func (d handshakeDH) DH(priv, pub []byte) ([]byte, error) {
	if m := d.last; m.out != nil && bytes.Equal(m.priv, priv) && bytes.Equal(m.pub, pub) {
		return bytes.Clone(m.out), nil
	}
	out, err := d.pooledDH.DH(priv, pub)
	if err == nil {
		*d.last = dhMemo{priv: bytes.Clone(priv), pub: bytes.Clone(pub), out: bytes.Clone(out)}
	}
	return out, err
}

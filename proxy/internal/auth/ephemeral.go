package auth

import (
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/flynn/noise"
)

// pooledDH is Noise's 25519 DH function on crypto/ecdh, with two savings
// over flynn/noise's own (which goes through x/crypto/curve25519 and
// computes a throw-away public key for every DH, a second scalar
// multiplication):
//
//   - ephemeral key pairs are generated ahead of need by a background
//     goroutine, while the process waits for the network, instead of on a
//     connection's critical path (each pair is used once);
//   - the crypto/ecdh key of each pair handed out is kept until its one DH
//     (ee), so DH costs one scalar multiplication.
//
// A key pair costs about 50 us on the test machine; the ee DH that remains
// on the critical path is one multiplication at each end.
type pooledDH struct{}

// DHKey is a Noise key pair.
type DHKey = noise.DHKey

const (
	ephemeralPoolSize = 8
	// pendingMax bounds the keys kept for their DH: a handshake that is
	// abandoned before its DH leaves its key here until pushed out (its
	// DH would then take the slow path, which is still correct).
	pendingMax = 4096
)

var (
	ephemerals     = make(chan *ecdh.PrivateKey, ephemeralPoolSize)
	ephemeralsOnce sync.Once

	pendingMu    sync.Mutex
	pending      = map[string]*ecdh.PrivateKey{}
	pendingOrder []string
)

func fillEphemerals() {
	for {
		k, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			time.Sleep(time.Second) // the system's random source failed; GenerateKeypair reports it
			continue
		}
		ephemerals <- k
	}
}

func (pooledDH) GenerateKeypair(rng io.Reader) (DHKey, error) {
	ephemeralsOnce.Do(func() { go fillEphemerals() })
	var k *ecdh.PrivateKey
	select {
	case k = <-ephemerals:
	default:
		if rng == nil {
			rng = rand.Reader
		}
		var err error
		if k, err = ecdh.X25519().GenerateKey(rng); err != nil {
			return DHKey{}, fmt.Errorf("generating X25519 key: %w", err)
		}
	}
	priv := k.Bytes()
	pendingMu.Lock()
	if len(pendingOrder) >= pendingMax {
		delete(pending, pendingOrder[0])
		pendingOrder = pendingOrder[1:]
	}
	pending[string(priv)] = k
	pendingOrder = append(pendingOrder, string(priv))
	pendingMu.Unlock()
	return DHKey{Private: priv, Public: k.PublicKey().Bytes()}, nil
}

func (pooledDH) DH(priv, pub []byte) ([]byte, error) {
	pendingMu.Lock()
	k := pending[string(priv)]
	delete(pending, string(priv)) // its order entry goes when pushed out
	pendingMu.Unlock()
	if k == nil {
		var err error
		if k, err = ecdh.X25519().NewPrivateKey(priv); err != nil {
			return nil, fmt.Errorf("X25519 private key: %w", err)
		}
	}
	p, err := ecdh.X25519().NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("X25519 public key: %w", err)
	}
	out, err := k.ECDH(p)
	if err != nil {
		return nil, fmt.Errorf("X25519: %w", err) // a low-order peer key
	}
	return out, nil
}

func (pooledDH) DHLen() int     { return 32 }
func (pooledDH) DHName() string { return "25519" }

package auth

// The server's static key (NKpsk0): the private key in a secret file, the
// public key handed to clients (client.server_public_key, a bridge line's
// pub=). A client that holds the public key accepts only the server that
// holds the private one, whoever else knows its pre-shared key.

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cloudflare/circl/dh/x25519"
)

// staticKeyHeader starts a static key file, so that a key file of client
// PSKs given in its place is refused by name rather than misread.
const staticKeyHeader = "braid-static-x25519"

// LoadStaticKey reads a server's static key file ("braid-static-x25519
// <private key, hex>", mode 0600 or stricter) and returns the key pair.
func LoadStaticKey(path string) (DHKey, error) {
	if err := CheckSecretFileMode(path); err != nil {
		return DHKey{}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return DHKey{}, fmt.Errorf("reading static key file: %w", err)
	}
	f := strings.Fields(string(data))
	if len(f) != 2 || f[0] != staticKeyHeader {
		return DHKey{}, fmt.Errorf("static key file %s: want one line %q followed by the private key in hex (braid-proxy genkey -static makes one)", path, staticKeyHeader)
	}
	priv, err := hex.DecodeString(f[1])
	if err != nil || len(priv) != KeyLen {
		return DHKey{}, fmt.Errorf("static key file %s: the private key is not %d bytes of hex", path, KeyLen)
	}
	if !slices.ContainsFunc(priv, func(b byte) bool { return b != 0 }) {
		return DHKey{}, fmt.Errorf("static key file %s: the private key is all zero bytes", path)
	}
	var pub x25519.Key
	x25519.KeyGen(&pub, (*x25519.Key)(priv))
	return DHKey{Private: priv, Public: pub[:]}, nil
}

// NewStaticKeyFile writes a fresh static key to path (created mode 0600;
// an existing file is refused) and returns the key pair.
func NewStaticKeyFile(path string) (DHKey, error) {
	k, err := newKeypair(rand.Reader)
	if err != nil {
		return DHKey{}, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return DHKey{}, err
	}
	_, err = fmt.Fprintf(f, "%s %s\n", staticKeyHeader, hex.EncodeToString(k.Private))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return DHKey{}, err
	}
	return k, nil
}

// BridgePSK is the pre-shared key of a public bridge line: derived from
// the bridge's public key, so anyone with the line has it. It keeps
// braid's handshake (NKpsk0) whole for such users; what authenticates
// the bridge to them is its static key.
func BridgePSK(pub []byte) []byte {
	b, err := hkdf.Key(sha256.New, pub, nil, "braid-pt public bridge credential", KeyLen)
	if err != nil {
		panic("auth: HKDF of 32 bytes failed: " + err.Error())
	}
	return b
}

// EncodePublicKey is the text form of a static public key: unpadded
// base64, 43 characters.
func EncodePublicKey(pub []byte) string { return base64.RawStdEncoding.EncodeToString(pub) }

// ParsePublicKey reads a static public key in unpadded or padded base64
// or in hex, and refuses keys that make every shared secret the same (all
// zero, small order).
func ParsePublicKey(s string) ([]byte, error) {
	var pub []byte
	switch {
	case len(s) == 2*KeyLen:
		pub, _ = hex.DecodeString(s)
	default:
		pub, _ = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	if len(pub) != PublicLen {
		return nil, errors.New("not a 32-byte X25519 public key in base64 (43 characters) or hex")
	}
	var probe, out x25519.Key
	probe[0] = 9 // any scalar: a small-order key gives the all-zero secret for all of them
	if !x25519.Shared(&out, &probe, (*x25519.Key)(pub)) {
		return nil, errors.New("a small-order X25519 point, not a server's public key")
	}
	return pub, nil
}

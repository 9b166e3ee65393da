// Package tlsauth is braid-proxy's alternative to the pre-shared key:
// mutual TLS 1.3 where each side pins the other's certificate by the SHA-256
// of its DER encoding. No certificate authority is involved; certificates
// are self-signed (see Generate, "braid-proxy gencert").
//
// The server's peers file maps client ids to pins ("client-id pin" lines),
// so per-client limits and logs work as with pre-shared keys. Compared to
// the PSK exchange, TLS costs one extra round trip per connection (the
// request follows the TLS handshake instead of riding in the first flight).
package tlsauth

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"braid/proxy/internal/auth"
)

// PinLen is the length of a pin in hex.
const PinLen = 64

// ErrPin means the peer's certificate matched no pin.
var ErrPin = errors.New("peer certificate does not match the pinned SHA-256")

// Pin returns the hex SHA-256 of a DER certificate.
func Pin(der []byte) string {
	h := sha256.Sum256(der)
	return hex.EncodeToString(h[:])
}

// CheckPin validates the text form of a pin.
func CheckPin(p string) error {
	if len(p) != PinLen {
		return fmt.Errorf("pin must be %d hex characters (SHA-256 of the certificate)", PinLen)
	}
	if _, err := hex.DecodeString(p); err != nil {
		return fmt.Errorf("pin is not hex")
	}
	return nil
}

// LoadCert loads a certificate and its private key; the key file must not
// be group/world accessible.
func LoadCert(certFile, keyFile string) (tls.Certificate, error) {
	if err := auth.CheckSecretFileMode(keyFile); err != nil {
		return tls.Certificate{}, err
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return c, fmt.Errorf("loading TLS certificate: %w", err)
	}
	return c, nil
}

// LoadPeers reads a peers file (see ParsePeers). It decides who may use
// the relay, so like the secret files it must not be group/world
// accessible (a writable one would let another user add a peer).
func LoadPeers(path string) (map[string]string, error) {
	if err := auth.CheckSecretFileMode(path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading peers file: %w", err)
	}
	peers, err := ParsePeers(data)
	if err != nil {
		return nil, fmt.Errorf("peers file %s: %w", path, err)
	}
	return peers, nil
}

// ParsePeers parses "client-id pin" lines.
func ParsePeers(data []byte) (map[string]string, error) {
	byPin := map[string]string{}
	ids := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want \"client-id pin\"", line)
		}
		if err := auth.CheckID(f[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		pin := strings.ToLower(f[1])
		if err := CheckPin(pin); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if ids[f[0]] || byPin[pin] != "" {
			return nil, fmt.Errorf("line %d: duplicate id or pin", line)
		}
		ids[f[0]] = true
		byPin[pin] = f[0]
	}
	if len(byPin) == 0 {
		return nil, errors.New("no peers")
	}
	return byPin, sc.Err()
}

// ServerConfig requires a client certificate whose pin is in peers
// (pin -> client id).
func ServerConfig(cert tls.Certificate, peers map[string]string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAnyClientCert,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || peers[Pin(raw[0])] == "" {
				return ErrPin
			}
			return nil
		},
	}
}

// PeerID returns the client id of a verified connection state.
func PeerID(st tls.ConnectionState, peers map[string]string) string {
	if len(st.PeerCertificates) == 0 {
		return ""
	}
	return peers[Pin(st.PeerCertificates[0].Raw)]
}

// ClientConfig presents cert and accepts only a server certificate with
// serverPin. Chain and name checks are replaced by the pin on purpose.
func ClientConfig(cert tls.Certificate, serverPin string) *tls.Config {
	serverPin = strings.ToLower(serverPin)
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true, // replaced by the pin check below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || Pin(raw[0]) != serverPin {
				return ErrPin
			}
			return nil
		},
	}
}

// Generate creates a self-signed ECDSA P-256 certificate for name, valid
// for ten years, and returns PEM cert, PEM key and the pin.
func Generate(name string) (certPEM, keyPEM []byte, pin string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, "", err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), Pin(der), nil
}

// WriteFiles writes a generated certificate (0644) and key (0600).
func WriteFiles(certFile, keyFile string, certPEM, keyPEM []byte) error {
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(certFile, certPEM, 0o644)
}

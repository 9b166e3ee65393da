package auth

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var testKey = bytes.Repeat([]byte{7}, 32)

func newVerifier(now time.Time) *Verifier {
	return &Verifier{
		Keys:    Keys{"box1": testKey},
		MaxSkew: 30 * time.Second,
		Replay:  NewReplayCache(time.Minute, 1000),
		Now:     func() time.Time { return now },
	}
}

func TestHandshakeRoundTrip(t *testing.T) {
	now := time.Now()
	ch, err := NewClientHello("box1", testKey, FlagPlaintext, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadClientHello(bytes.NewReader(ch.Raw))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "box1" || got.Flags != FlagPlaintext || got.Nonce != ch.Nonce {
		t.Fatalf("parsed %+v", got)
	}
	v := newVerifier(now)
	key, err := v.Verify(got)
	if err != nil {
		t.Fatal(err)
	}
	sh, ns, err := NewServerHello(key, got)
	if err != nil {
		t.Fatal(err)
	}
	ns2, err := CheckServerHello(testKey, ch, sh)
	if err != nil || ns2 != ns {
		t.Fatalf("server hello: %v", err)
	}
	sec1, sec2 := NewSessionSecret(key, got, ns), NewSessionSecret(testKey, ch, ns2)
	c1, s1, c2, s2 := sec1.C2S(), sec1.S2C(), sec2.C2S(), sec2.S2C()
	e1, e2 := EarlyKey(key, got), EarlyKey(testKey, ch)
	if c1 != c2 || s1 != s2 || e1 != e2 || c1 == s1 || e1 == c1 {
		t.Fatal("key derivation mismatch")
	}
}

func TestVerifyFailures(t *testing.T) {
	now := time.Now()
	good, _ := NewClientHello("box1", testKey, 0, now)
	wrongKey, _ := NewClientHello("box1", bytes.Repeat([]byte{8}, 32), 0, now)
	unknown, _ := NewClientHello("box2", testKey, 0, now)
	old, _ := NewClientHello("box1", testKey, 0, now.Add(-time.Minute))
	future, _ := NewClientHello("box1", testKey, 0, now.Add(time.Minute))
	tampered, _ := NewClientHello("box1", testKey, 0, now)
	tampered.Raw[4] ^= FlagPlaintext
	tampered, _ = ParseClientHello(tampered.Raw)

	v := newVerifier(now)
	if _, err := v.Verify(good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		h    *ClientHello
		want error
	}{
		{"replay", good, ErrReplay},
		{"wrong key", wrongKey, ErrBadMAC},
		{"unknown id", unknown, ErrUnknownID},
		{"old", old, ErrClockSkew},
		{"future", future, ErrClockSkew},
		{"tampered flags", tampered, ErrBadMAC},
	} {
		if _, err := v.Verify(tc.h); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestServerHelloWrongKey(t *testing.T) {
	ch, _ := NewClientHello("box1", testKey, 0, time.Now())
	sh, _, _ := NewServerHello(bytes.Repeat([]byte{9}, 32), ch)
	if _, err := CheckServerHello(testKey, ch, sh); !errors.Is(err, ErrServerAuth) {
		t.Fatalf("got %v", err)
	}
}

func TestReplayCacheExpiryAndBound(t *testing.T) {
	c := NewReplayCache(time.Second, 2)
	t0 := time.Unix(1000, 0)
	n := func(b byte) (x [NonceLen]byte) { x[0] = b; return }
	if !c.Add("a", n(1), t0) || !c.Add("a", n(2), t0) {
		t.Fatal("fresh nonces refused")
	}
	if c.Add("a", n(3), t0) {
		t.Fatal("cache over its bound accepted a nonce")
	}
	if c.Add("a", n(1), t0.Add(500*time.Millisecond)) {
		t.Fatal("replay accepted")
	}
	if !c.Add("a", n(3), t0.Add(2*time.Second)) || c.Len() != 1 {
		t.Fatalf("expiry did not free entries: len %d", c.Len())
	}
}

// One key holder filling its share does not lock out another client id.
func TestReplayCacheBudgetPerID(t *testing.T) {
	c := NewReplayCache(time.Minute, 100)
	t0 := time.Unix(1000, 0)
	var x [NonceLen]byte
	for i := 0; i < 1000; i++ {
		x[0], x[1] = byte(i), byte(i>>8)
		c.Add("greedy", x, t0)
	}
	if c.Len() != 100 {
		t.Fatalf("greedy id holds %d entries, want its budget 100", c.Len())
	}
	x[0], x[1] = 0xff, 0xff
	if !c.Add("other", x, t0) {
		t.Fatal("another client id locked out by one that filled its budget")
	}
	x[0] = 0xfe
	if c.Add("greedy", x, t0) {
		t.Fatal("greedy id accepted over its budget")
	}
}

// A reload's TTL change never shortens the life of stored nonces: a longer
// TTL (wider clock window) covers them at once, a shorter one only applies
// once they have expired under the old one.
func TestReplayCacheTTLChangeKeepsEntries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	n := func(b byte) (x [NonceLen]byte) { x[0] = b; return }

	c := NewReplayCache(time.Minute, 100)
	c.Add("a", n(1), t0)
	c.setTTL(2*time.Minute, t0.Add(time.Second))
	if c.Add("a", n(1), t0.Add(90*time.Second)) {
		t.Fatal("TTL raised 1 -> 2 min: a nonce stored before was forgotten after 90 s")
	}

	c = NewReplayCache(time.Minute, 100)
	c.Add("a", n(1), t0)
	c.setTTL(10*time.Second, t0.Add(time.Second))
	c.Add("a", n(2), t0.Add(2*time.Second))
	if c.Add("a", n(1), t0.Add(30*time.Second)) {
		t.Fatal("TTL lowered 1 min -> 10 s: a nonce stored before was forgotten after 30 s")
	}
	if !c.Add("a", n(1), t0.Add(62*time.Second)) {
		t.Fatal("nonce still kept after the old TTL")
	}
	// From then on the shorter TTL applies.
	if !c.Add("a", n(3), t0.Add(62*time.Second)) || !c.Add("a", n(3), t0.Add(73*time.Second)) {
		t.Fatal("the shorter TTL never took effect")
	}
}

func TestParseKeys(t *testing.T) {
	hexKey := strings.Repeat("ab", 32)
	keys, err := ParseKeys([]byte("# comment\nbox1 " + hexKey + "\n\nbox2 " + "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=" + "\n"))
	if err != nil || len(keys) != 2 || len(keys["box2"]) != 32 {
		t.Fatalf("keys %v err %v", len(keys), err)
	}
	for _, bad := range []string{"", "box1", "box1 abcd", "bad/id " + hexKey, "a " + hexKey + "\na " + hexKey, "x " + hexKey + " extra"} {
		if _, err := ParseKeys([]byte(bad)); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		} else if strings.Contains(err.Error(), hexKey) {
			t.Errorf("error leaks key material: %v", err)
		}
	}
}

func TestLoadKeysModeCheck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte("box1 "+strings.Repeat("ab", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key file accepted: %v", err)
	}
	os.Chmod(p, 0o600)
	if _, err := LoadKeys(p); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseClientHello(f *testing.F) {
	ch, _ := NewClientHello("box1", testKey, 0, time.Now())
	f.Add(ch.Raw)
	f.Add([]byte("BRD\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := ReadClientHello(bytes.NewReader(in))
		if err != nil {
			return
		}
		if !bytes.Equal(h.Raw, in[:len(h.Raw)]) {
			t.Fatal("raw does not match input")
		}
		v := newVerifier(time.Now())
		v.Verify(h) // must not panic
	})
}

func FuzzParseKeys(f *testing.F) {
	f.Add([]byte("box1 " + strings.Repeat("ab", 32)))
	f.Fuzz(func(t *testing.T, in []byte) {
		keys, err := ParseKeys(in)
		if err != nil {
			return
		}
		for id, k := range keys {
			if CheckID(id) != nil || len(k) < MinKeyLen {
				t.Fatalf("bad entry accepted: %q", id)
			}
		}
	})
}

// The derivations are the protocol: HKDF-SHA256(K, salt, label | SHA-256(hello)).
// braid's allocation-free HMAC and HKDF (mac.go) must not change a single
// key bit.
func TestKeyDerivationMatchesSpec(t *testing.T) {
	key := bytes.Repeat([]byte{0x3c}, 32)
	ch, err := NewClientHello("box1", key, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ns [NonceLen]byte
	ns[0], ns[31] = 7, 9
	th := sha256.Sum256(ch.Raw)
	spec := func(salt []byte, label string) [KeyLen]byte {
		b, err := hkdf.Key(sha256.New, key, salt, label+string(th[:]), KeyLen)
		if err != nil {
			t.Fatal(err)
		}
		return [KeyLen]byte(b)
	}
	if EarlyKey(key, ch) != spec(ch.Nonce[:], "braid-v1 early c2s") {
		t.Fatal("early key differs from the spec")
	}
	secret := NewSessionSecret(key, ch, ns)
	c2s, s2c := secret.C2S(), secret.S2C()
	salt := append(append([]byte{}, ch.Nonce[:]...), ns[:]...)
	if c2s != spec(salt, "braid-v1 c2s") || s2c != spec(salt, "braid-v1 s2c") || c2s == s2c {
		t.Fatal("session keys differ from the spec")
	}
}

// hmacSHA256 is checked against crypto/hmac for keys shorter than, equal
// to and longer than the hash block, and messages in several parts,
// including ones longer than its scratch buffer.
func TestHMACMatchesStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, keyLen := range []int{0, 1, 32, 63, 64, 65, 200} {
		for _, msgLens := range [][]int{{}, {0}, {21, 90}, {21, 90, 32}, {1000}, {55, 9}} {
			key := bytesOf(keyLen)
			var parts [][]byte
			std := hmac.New(sha256.New, key)
			for _, n := range msgLens {
				p := bytesOf(n)
				parts = append(parts, p)
				std.Write(p)
			}
			if got := hmacSHA256(key, parts...); !bytes.Equal(got[:], std.Sum(nil)) {
				t.Fatalf("key %d bytes, parts %v: HMAC differs from crypto/hmac", keyLen, msgLens)
			}
		}
	}
	// RFC 4231 test case 2.
	want := "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got := hmacSHA256([]byte("Jefe"), []byte("what do ya want "), []byte("for nothing?")); hex.EncodeToString(got[:]) != want {
		t.Fatalf("RFC 4231 case 2: %x", got)
	}
}

// A replay cache cannot vouch for hellos stamped before it started (they may
// have been recorded before a server restart), so early data in such a hello
// is refused; the same hello without early data only names a destination and
// stays within the clock window's rules.
func TestEarlyDataOlderThanReplayCacheRefused(t *testing.T) {
	v := newVerifier(time.Now())
	before := v.Replay.Start.Add(-time.Second)
	for _, tc := range []struct {
		flags   byte
		stamp   time.Time
		refused bool
	}{
		{FlagEarlyData, before, true},
		{FlagEarlyData | FlagPlaintext, before, true},
		{0, before, false},
		{FlagEarlyData, v.Replay.Start.Add(time.Millisecond), false},
	} {
		ch, err := NewClientHello("box1", testKey, tc.flags, tc.stamp)
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(ch)
		if refused := errors.Is(err, ErrReplay); refused != tc.refused || (!tc.refused && err != nil) {
			t.Errorf("flags %#x stamped %v before start: err %v, want refused=%v",
				tc.flags, v.Replay.Start.Sub(tc.stamp), err, tc.refused)
		}
	}
}

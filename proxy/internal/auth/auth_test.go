package auth

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	testKey = bytes.Repeat([]byte{7}, 32)
	testPSK = NoisePSK(testKey)
	req     = []byte{1, 1, 127, 0, 0, 1, 0, 80}
)

func newVerifier(now time.Time) *Verifier {
	return &Verifier{
		PSKs:    PSKs(Keys{"box0": bytes.Repeat([]byte{5}, 40), "box1": testKey, "box2": bytes.Repeat([]byte{6}, 32)}),
		MaxSkew: 30 * time.Second,
		Replay:  NewReplayCache(time.Minute, 1000),
		Now:     func() time.Time { return now },
	}
}

func TestHandshakeRoundTrip(t *testing.T) {
	// Stamped once the replay cache has started, which refuses early data
	// stamped before it: a fixed margin ahead of the clock was overtaken
	// by the hello's own making under -race on a loaded machine.
	v := newVerifier(time.Time{})
	now := time.Now()
	v.Now = func() time.Time { return now }
	ch, msg1, err := NewClientHello(testPSK, nil, FlagPlaintext|FlagEarlyData, now, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg1) < ClientHelloLen || len(msg1) > ClientHelloLen+MaxHelloPad {
		t.Fatalf("hello is %d bytes, want %d plus up to %d", len(msg1), ClientHelloLen, MaxHelloPad)
	}
	a, err := v.Verify(msg1)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "box1" || a.Flags != FlagPlaintext|FlagEarlyData || !bytes.Equal(a.Request, req) ||
		a.Time.UnixMilli() != now.UnixMilli() || a.Pad != len(msg1)-ClientHelloLen {
		t.Fatalf("accepted %+v", a)
	}
	if ch.EarlyKey() != a.EarlyKey() {
		t.Fatal("early keys differ")
	}
	msg2, sk, err := a.ServerHello([]byte{5, 0})
	if err != nil || len(msg2) != ServerHelloLen {
		t.Fatalf("server hello %d bytes: %v", len(msg2), err)
	}
	reply, ck, _, err := ch.ReadServerHello(msg2)
	if err != nil || !bytes.Equal(reply, []byte{5, 0}) {
		t.Fatalf("reply %v: %v", reply, err)
	}
	if ck != sk || ck.C2S == ck.S2C || ck.C2S == ch.EarlyKey() {
		t.Fatal("session keys differ between the ends, or repeat")
	}
}

// Nothing in the hellos identifies the client or the protocol: no id, no
// magic, and two hellos of one client share no byte pattern.
func TestHellosCarryNothingInClear(t *testing.T) {
	now := time.Now()
	_, m1, _ := NewClientHello(testPSK, nil, 0, now, req)
	_, m2, _ := NewClientHello(testPSK, nil, 0, now, req)
	for _, m := range [][]byte{m1, m2} {
		if bytes.Contains(m, []byte("box1")) || bytes.Contains(m, []byte("BRD")) || bytes.Contains(m, req) {
			t.Fatal("hello carries the id, a magic or the request in clear")
		}
	}
	same := 0
	for i := range ClientHelloLen { // the messages; their random tails are another test's
		if m1[i] == m2[i] {
			same++
		}
	}
	if same > 12 { // about 1.25 expected by chance among 321 bytes
		t.Fatalf("two hellos agree on %d of %d bytes", same, len(m1))
	}
	// The top bit of the ephemeral key's representative varies (it would
	// always be 0).
	top := map[byte]bool{}
	for i := 0; i < 64; i++ {
		_, m, _ := NewClientHello(testPSK, nil, 0, now, req)
		top[m[PublicLen-1]>>7] = true
	}
	if len(top) != 2 {
		t.Fatal("ephemeral key's top bit never varies")
	}
}

// The session keys come from an ephemeral Diffie-Hellman: someone holding
// the PSK and the client's hello who answers it with a server hello of its
// own gets other keys than the real server's session.
func TestSessionKeysNeedEphemeralSecrets(t *testing.T) {
	now := time.Now()
	ch, msg1, _ := NewClientHello(testPSK, nil, 0, now, req)
	a, err := newVerifier(now).Verify(msg1)
	if err != nil {
		t.Fatal(err)
	}
	msg2, real, _ := a.ServerHello([]byte{5, 0})
	b, err := newVerifier(now).Verify(msg1) // the attacker's own verifier
	if err != nil {
		t.Fatal(err)
	}
	_, forged, _ := b.ServerHello([]byte{5, 0})
	if forged == real {
		t.Fatal("a second answer to the same hello derived the same session keys")
	}
	if _, ck, _, err := ch.ReadServerHello(msg2); err != nil || ck != real {
		t.Fatal("client disagrees with the real server")
	}
}

// Every configured key is tried for every hello, whichever opens it and
// whether any does: the work (and so the time) is the same for each client
// id's hellos and for garbage.
func TestVerifyTriesEveryKey(t *testing.T) {
	now := time.Now().Add(10 * time.Millisecond)
	v := newVerifier(now)
	_, hello, _ := NewClientHello(testPSK, nil, 0, now, req)
	if a, err := v.Verify(hello); err != nil || a.ID != "box1" {
		t.Fatalf("hello of box1: %v %v", a, err)
	}
	if v.trials.Load() != int64(len(v.PSKs)) {
		t.Fatalf("a valid hello tried %d of %d keys", v.trials.Load(), len(v.PSKs))
	}
	garbage := bytes.Repeat([]byte{0x42}, ClientHelloLen)
	if _, err := v.Verify(garbage); !errors.Is(err, ErrBadHello) {
		t.Fatalf("garbage: %v", err)
	}
	if v.trials.Load() != 2*int64(len(v.PSKs)) {
		t.Fatalf("garbage tried %d of %d keys", v.trials.Load()-int64(len(v.PSKs)), len(v.PSKs))
	}
}

func TestVerifyFailures(t *testing.T) {
	now := time.Now()
	_, good, _ := NewClientHello(testPSK, nil, 0, now, req)
	_, wrongKey, _ := NewClientHello(NoisePSK(bytes.Repeat([]byte{8}, 32)), nil, 0, now, req)
	_, old, _ := NewClientHello(testPSK, nil, 0, now.Add(-time.Minute), req)
	_, future, _ := NewClientHello(testPSK, nil, 0, now.Add(time.Minute), req)
	_, tampered, _ := NewClientHello(testPSK, nil, 0, now, req)
	tampered[PublicLen+3] ^= 1
	_, tamperedKey, _ := NewClientHello(testPSK, nil, 0, now, req)
	tamperedKey[0] ^= 1

	v := newVerifier(now)
	if _, err := v.Verify(good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		want error
	}{
		{"replay", good, ErrReplay},
		{"wrong key", wrongKey, ErrBadHello},
		{"old", old, ErrClockSkew},
		{"future", future, ErrClockSkew},
		{"tampered payload", tampered, ErrBadHello},
		{"tampered ephemeral key", tamperedKey, ErrBadHello},
		{"short", good[:100], ErrMalformed},
	} {
		if _, err := v.Verify(tc.msg); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestServerHelloWrongKey(t *testing.T) {
	now := time.Now()
	ch, msg1, _ := NewClientHello(testPSK, nil, 0, now, req)
	// A server with another key cannot even open the hello; one that
	// could would still have to answer under the client's PSK.
	v := newVerifier(now)
	v.PSKs = []PSK{{ID: "box1", Key: NoisePSK(bytes.Repeat([]byte{9}, 32))}}
	if _, err := v.Verify(msg1); !errors.Is(err, ErrBadHello) {
		t.Fatalf("hello opened with another key: %v", err)
	}
	other, m1, _ := NewClientHello(NoisePSK(bytes.Repeat([]byte{9}, 32)), nil, 0, now, req)
	_ = other
	a, err := v.Verify(m1)
	if err != nil {
		t.Fatal(err)
	}
	msg2, _, _ := a.ServerHello([]byte{5, 0})
	if _, _, _, err := ch.ReadServerHello(msg2); !errors.Is(err, ErrServerAuth) {
		t.Fatalf("answer under another key accepted: %v", err)
	}
	if _, _, _, err := ch.ReadServerHello(msg2[:10]); !errors.Is(err, ErrServerAuth) {
		t.Fatalf("short answer accepted: %v", err)
	}
}

// A replay cache cannot vouch for hellos stamped before it started (they may
// have been recorded before a server restart): early-data hellos from then
// are refused, others are not.
func TestEarlyDataOlderThanReplayCacheRefused(t *testing.T) {
	v := newVerifier(time.Now())
	before := v.Replay.Start.Add(-time.Second)
	for _, tc := range []struct {
		flags   byte
		stamp   time.Time
		refused bool
	}{
		{FlagEarlyData, before, true},
		{0, before, false},
		{FlagEarlyData, v.Replay.Start.Add(time.Millisecond), false},
	} {
		_, msg, _ := NewClientHello(testPSK, nil, tc.flags, tc.stamp, req)
		_, err := v.Verify(msg)
		if refused := errors.Is(err, ErrReplay); refused != tc.refused || (!tc.refused && err != nil) {
			t.Errorf("flags %#x stamped %v before start: %v, want refused=%v", tc.flags, v.Replay.Start.Sub(tc.stamp), err, tc.refused)
		}
	}
}

// No input makes Verify panic, and an accepted one is a genuine hello: it
// decodes to what the client sent, and any changed byte (but the
// ephemeral key's random top bit) is refused.
func FuzzVerify(f *testing.F) {
	_, msg, _ := NewClientHello(testPSK, nil, 0, time.Now(), req)
	f.Add(msg, uint16(40))
	f.Add(make([]byte, ClientHelloLen), uint16(0))
	f.Fuzz(func(t *testing.T, in []byte, pos uint16) {
		a, err := newVerifier(time.Now()).Verify(in)
		if err != nil {
			return
		}
		if a.ID != "box1" || !bytes.Equal(a.Request, req) {
			t.Fatalf("accepted hello decodes to %q %v", a.ID, a.Request)
		}
		i := int(pos) % len(in)
		if i == PublicLen-1 {
			i++
		}
		m := append([]byte(nil), in...)
		m[i] ^= 1
		if _, err := newVerifier(time.Now()).Verify(m); err == nil {
			t.Fatalf("hello with byte %d changed accepted", i)
		}
	})
}

func TestReplayCacheExpiryAndBound(t *testing.T) {
	c := NewReplayCache(time.Second, 2)
	t0 := time.Unix(1000, 0)
	n := func(b byte) (x [PublicLen]byte) { x[0] = b; return }
	if c.Add("a", n(1), t0, true) != ReplayFresh || c.Add("a", n(2), t0, true) != ReplayFresh {
		t.Fatal("fresh nonces refused")
	}
	if got := c.Add("a", n(3), t0, true); got != ReplayFull {
		t.Fatalf("early data over the share: %v, want ReplayFull", got)
	}
	if got := c.Add("a", n(1), t0.Add(500*time.Millisecond), false); got != ReplaySeen {
		t.Fatalf("replay: %v, want ReplaySeen", got)
	}
	if c.Add("a", n(3), t0.Add(2*time.Second), true) != ReplayFresh || c.Len() != 1 {
		t.Fatalf("expiry did not free entries: len %d", c.Len())
	}
}

// A key holder sending more hellos than its share: from then on its hellos
// with early data are refused, those without accepted by forgetting its
// oldest nonces (fail open), at the production share of 65,536. A nonce
// still remembered is still a replay, and another id is untouched.
func TestReplayCacheFullShareFailsOpenWithoutEarlyData(t *testing.T) {
	const share = 1 << 16
	c := NewReplayCache(time.Minute, share)
	t0 := time.Unix(1000, 0)
	nonce := func(i int) (x [PublicLen]byte) { x[0], x[1], x[2] = byte(i), byte(i>>8), byte(i>>16); return }
	for i := 0; i < share+1000; i++ {
		if got := c.Add("flooded", nonce(i), t0, false); got != ReplayFresh {
			t.Fatalf("hello %d without early data: %v, want accepted", i, got)
		}
	}
	if c.Len() != share || c.Forgotten() != 1000 {
		t.Fatalf("%d entries, %d forgotten; want %d and 1000", c.Len(), c.Forgotten(), share)
	}
	if got := c.Add("flooded", nonce(share+5000), t0, true); got != ReplayFull {
		t.Fatalf("early data with the share full: %v, want ReplayFull", got)
	}
	if got := c.Add("flooded", nonce(share+999), t0, false); got != ReplaySeen {
		t.Fatalf("a remembered nonce again: %v, want ReplaySeen", got)
	}
	if got := c.Add("other", nonce(0), t0, true); got != ReplayFresh {
		t.Fatalf("another id: %v, want accepted", got)
	}
}

// One key holder filling its share does not touch another client id's.
func TestReplayCacheBudgetPerID(t *testing.T) {
	c := NewReplayCache(time.Minute, 100)
	t0 := time.Unix(1000, 0)
	var x [PublicLen]byte
	for i := 0; i < 1000; i++ {
		x[0], x[1] = byte(i), byte(i>>8)
		c.Add("greedy", x, t0, false)
	}
	if c.Len() != 100 {
		t.Fatalf("greedy id holds %d entries, want its budget 100", c.Len())
	}
	x[0], x[1] = 0xff, 0xff
	if c.Add("other", x, t0, true) != ReplayFresh {
		t.Fatal("another client id locked out by one that filled its budget")
	}
	x[0] = 0xfe
	if c.Add("greedy", x, t0, true) != ReplayFull {
		t.Fatal("greedy id's early data accepted over its budget")
	}
}

// A reload's TTL change never shortens the life of stored nonces: a longer
// TTL (wider clock window) covers them at once, a shorter one only applies
// once they have expired under the old one.
func TestReplayCacheTTLChangeKeepsEntries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	n := func(b byte) (x [PublicLen]byte) { x[0] = b; return }

	c := NewReplayCache(time.Minute, 100)
	c.Add("a", n(1), t0, true)
	c.setTTL(2*time.Minute, t0.Add(time.Second))
	if c.Add("a", n(1), t0.Add(90*time.Second), true) == ReplayFresh {
		t.Fatal("TTL raised 1 -> 2 min: a nonce stored before was forgotten after 90 s")
	}

	c = NewReplayCache(time.Minute, 100)
	c.Add("a", n(1), t0, true)
	c.setTTL(10*time.Second, t0.Add(time.Second))
	c.Add("a", n(2), t0.Add(2*time.Second), true)
	if c.Add("a", n(1), t0.Add(30*time.Second), true) == ReplayFresh {
		t.Fatal("TTL lowered 1 min -> 10 s: a nonce stored before was forgotten after 30 s")
	}
	if c.Add("a", n(1), t0.Add(62*time.Second), true) != ReplayFresh {
		t.Fatal("nonce still kept after the old TTL")
	}
	// From then on the shorter TTL applies.
	if c.Add("a", n(3), t0.Add(62*time.Second), true) != ReplayFresh || c.Add("a", n(3), t0.Add(73*time.Second), true) != ReplayFresh {
		t.Fatal("the shorter TTL never took effect")
	}
}

func TestParseKeys(t *testing.T) {
	hexKey := strings.Repeat("ab", 32)
	keys, err := ParseKeys([]byte("# comment\nbox1 " + hexKey + "\n\nbox2 " + "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=" + "\n"))
	if err != nil || len(keys) != 2 || len(keys["box2"]) != 32 {
		t.Fatalf("keys %v err %v", len(keys), err)
	}
	for _, bad := range []string{"", "box1", "box1 abcd", "bad/id " + hexKey, "a " + hexKey + "\na " + hexKey, "x " + hexKey + " extra", "box1 " + strings.Repeat("00", 32)} {
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

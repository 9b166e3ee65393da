package main

import (
	"bytes"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/pt"
)

func TestParseBridgeArgs(t *testing.T) {
	key := strings.Repeat("ab", 32)
	pubKey, err := auth.NewStaticKeyFile(filepath.Join(t.TempDir(), "static"))
	if err != nil {
		t.Fatal(err)
	}
	pub := auth.EncodePublicKey(pubKey.Public)
	tests := []struct {
		name   string
		args   pt.Args
		id     string
		errHas string
	}{
		{"public line", pt.Args{{Key: "pub", Value: pub}}, publicID, ""},
		{"hex pub", pt.Args{{Key: "pub", Value: hex.EncodeToString(pubKey.Public)}}, publicID, ""},
		{"a user's own credential", pt.Args{{Key: "pub", Value: pub}, {Key: "id", Value: "box1"}, {Key: "key", Value: key}}, "box1", ""},
		{"base64 key", pt.Args{{Key: "pub", Value: pub}, {Key: "id", Value: "box1"}, {Key: "key", Value: "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="}}, "box1", ""},
		{"an older line", pt.Args{{Key: "key", Value: key}}, "", "older braid-pt"},
		{"no pub", pt.Args{{Key: "id", Value: "box1"}}, "", "no pub= argument"},
		{"no args", nil, "", "no pub= argument"},
		{"short pub", pt.Args{{Key: "pub", Value: "abcd"}}, "", "bridge argument pub: not a 32-byte"},
		{"small-order pub", pt.Args{{Key: "pub", Value: strings.Repeat("00", 32)}}, "", "small-order"},
		{"id without key", pt.Args{{Key: "pub", Value: pub}, {Key: "id", Value: "box1"}}, "", "go together"},
		{"key without id", pt.Args{{Key: "pub", Value: pub}, {Key: "key", Value: key}}, "", "go together"},
		{"short key", pt.Args{{Key: "pub", Value: pub}, {Key: "id", Value: "box1"}, {Key: "key", Value: "abcd"}}, "", "bridge argument key: key is 2 bytes"},
		{"not hex or base64", pt.Args{{Key: "pub", Value: pub}, {Key: "key", Value: "zz!"}}, "", "neither hex nor base64"},
		{"bad id", pt.Args{{Key: "pub", Value: pub}, {Key: "key", Value: key}, {Key: "id", Value: "a b"}}, "", "bridge argument id"},
		{"unknown argument", pt.Args{{Key: "pub", Value: pub}, {Key: "cert", Value: "x"}}, "", `unknown bridge argument "cert"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := parseBridgeArgs(tc.args)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
				}
				if strings.Contains(err.Error(), key) {
					t.Fatal("error message echoes the key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.id != tc.id || len(b.key) < 16 || !bytes.Equal(b.pub, pubKey.Public) {
				t.Fatalf("got id %q, key %d bytes, pub %x", b.id, len(b.key), b.pub)
			}
		})
	}
}

func TestParsePaddingArgs(t *testing.T) {
	k, err := auth.NewStaticKeyFile(filepath.Join(t.TempDir(), "static"))
	if err != nil {
		t.Fatal(err)
	}
	key := auth.EncodePublicKey(k.Public)
	b, err := parseBridgeArgs(pt.Args{{Key: "pub", Value: key}, {Key: "padding", Value: "0.4"}, {Key: "padding-idle", Value: "500ms"}})
	if err != nil || b.pad.budget != 0.4 || b.pad.idle.Milliseconds() != 500 {
		t.Fatalf("%+v %v", b.pad, err)
	}
	for _, bad := range []pt.KV{{Key: "padding", Value: "-1"}, {Key: "padding", Value: "x"}, {Key: "padding", Value: "11"}, {Key: "padding-idle", Value: "0s"}} {
		if _, err := parseBridgeArgs(pt.Args{{Key: "pub", Value: key}, bad}); err == nil || !strings.Contains(err.Error(), bad.Key) {
			t.Errorf("%v: err %v", bad, err)
		}
	}
	b, _ = parseBridgeArgs(pt.Args{{Key: "pub", Value: key}})
	if b.pad.budget != 0 {
		t.Fatal("padding on without the argument")
	}
}

// The transport keeps at most maxBridgeClients braid clients: a new bridge
// line takes the place of the least recently used idle one, and is refused
// while all are recent, so nothing reaching the SOCKS port grows it.
func TestBridgeClientsAreBounded(t *testing.T) {
	k, err := auth.NewStaticKeyFile(filepath.Join(t.TempDir(), "static"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := &bridges{stateDir: dir, log: slog.New(slog.DiscardHandler), m: metrics.New(),
		clients: map[string]*bridgeClient{}, socks: "127.0.0.1:1"}
	defer b.shutdown()
	args := bridgeArgs{pub: k.Public, id: publicID, key: auth.BridgePSK(k.Public)}
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(20000+i))
	}
	for i := range maxBridgeClients {
		if _, err := b.get(addr(i), args); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.get(addr(0), args); err != nil {
		t.Fatalf("a known bridge refused: %v", err)
	}
	if _, err := b.get(addr(maxBridgeClients), args); err == nil || !strings.Contains(err.Error(), "refusing another bridge line") {
		t.Fatalf("bridge %d while all are recent: %v", maxBridgeClients+1, err)
	}
	b.mu.Lock()
	for _, bc := range b.clients {
		bc.used = bc.used.Add(-2 * bridgeIdle)
	}
	for _, bc := range b.clients {
		if bc.server == addr(1) {
			bc.used = bc.used.Add(-time.Hour) // the least recent
		}
	}
	b.mu.Unlock()
	if _, err := b.get(addr(maxBridgeClients), args); err != nil {
		t.Fatal(err)
	}
	keys, _ := filepath.Glob(filepath.Join(dir, "braid-bridge-*.keys"))
	if len(b.clients) != maxBridgeClients || len(keys) != maxBridgeClients {
		t.Fatalf("%d clients, %d key files; want %d", len(b.clients), len(keys), maxBridgeClients)
	}
	for _, bc := range b.clients {
		if bc.server == addr(1) {
			t.Fatal("the least recently used bridge was kept")
		}
	}
}

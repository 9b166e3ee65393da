package main

import (
	"strings"
	"testing"

	"braid/proxy/internal/pt"
)

func TestParseBridgeArgs(t *testing.T) {
	key := strings.Repeat("ab", 32)
	tests := []struct {
		name   string
		args   pt.Args
		id     string
		errHas string
	}{
		{"key only, default id", pt.Args{{Key: "key", Value: key}}, serverID, ""},
		{"key and id", pt.Args{{Key: "id", Value: "box1"}, {Key: "key", Value: key}}, "box1", ""},
		{"base64 key", pt.Args{{Key: "key", Value: "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="}}, serverID, ""},
		{"no key", pt.Args{{Key: "id", Value: "box1"}}, "", "no key= argument"},
		{"no args", nil, "", "no key= argument"},
		{"short key", pt.Args{{Key: "key", Value: "abcd"}}, "", "bridge argument key: key is 2 bytes"},
		{"not hex or base64", pt.Args{{Key: "key", Value: "zz!"}}, "", "neither hex nor base64"},
		{"bad id", pt.Args{{Key: "key", Value: key}, {Key: "id", Value: "a b"}}, "", "bridge argument id"},
		{"unknown argument", pt.Args{{Key: "key", Value: key}, {Key: "cert", Value: "x"}}, "", `unknown bridge argument "cert"`},
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
			if b.id != tc.id || len(b.key) < 16 {
				t.Fatalf("got id %q, key %d bytes", b.id, len(b.key))
			}
		})
	}
}

func TestParsePaddingArgs(t *testing.T) {
	key := strings.Repeat("ab", 32)
	b, err := parseBridgeArgs(pt.Args{{Key: "key", Value: key}, {Key: "padding", Value: "0.4"}, {Key: "padding-idle", Value: "500ms"}})
	if err != nil || b.pad.budget != 0.4 || b.pad.idle.Milliseconds() != 500 {
		t.Fatalf("%+v %v", b.pad, err)
	}
	for _, bad := range []pt.KV{{Key: "padding", Value: "-1"}, {Key: "padding", Value: "x"}, {Key: "padding", Value: "11"}, {Key: "padding-idle", Value: "0s"}} {
		if _, err := parseBridgeArgs(pt.Args{{Key: "key", Value: key}, bad}); err == nil || !strings.Contains(err.Error(), bad.Key) {
			t.Errorf("%v: err %v", bad, err)
		}
	}
	b, _ = parseBridgeArgs(pt.Args{{Key: "key", Value: key}})
	if b.pad.budget != 0 {
		t.Fatal("padding on without the argument")
	}
}

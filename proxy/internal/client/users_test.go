package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseUsers(t *testing.T) {
	u, err := ParseUsers([]byte("# local users\nalice:pw1\nbob:p:w:2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !u.Check("alice", "pw1") || !u.Check("bob", "p:w:2") || u.Check("alice", "pw2") || u.Check("carol", "pw1") {
		t.Fatal("credential checks wrong")
	}
	for _, bad := range []string{"", "alice", ":pw", "alice:", strings.Repeat("a", 256) + ":x"} {
		if _, err := ParseUsers([]byte(bad)); err == nil {
			t.Errorf("ParseUsers(%q) accepted", bad)
		}
	}
}

func TestLoadUsersRefusesReadableFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "users")
	os.WriteFile(p, []byte("alice:pw\n"), 0o640)
	if _, err := LoadUsers(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable users file: %v", err)
	}
}

func FuzzParseUsers(f *testing.F) {
	f.Add([]byte("alice:pw\n#c\nbob:x"))
	f.Fuzz(func(t *testing.T, in []byte) {
		u, err := ParseUsers(in)
		if err != nil {
			return
		}
		for user, pass := range u {
			if user == "" || pass == "" || !u.Check(user, pass) {
				t.Fatalf("bad entry %q", user)
			}
		}
	})
}

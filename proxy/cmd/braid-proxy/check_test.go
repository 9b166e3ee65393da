package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKeys writes a pre-shared key file holding one key for box1.
func writeKeys(t *testing.T, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	line := "box1 " + strings.Repeat("5a", 32) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckAcceptsWhatWouldStart(t *testing.T) {
	keys := writeKeys(t, 0o600)
	for _, args := range [][]string{
		{"server", "-key-file", keys},
		{"client", "-key-file", keys, "-server", "192.0.2.1:7443"},
	} {
		if err := runCheck(args); err != nil {
			t.Errorf("check %v: %v", args, err)
		}
	}
}

// A check that passed a configuration the role then refuses would be
// worse than none: each refusal names the field, as at start.
func TestCheckRefusesWhatWouldNotStart(t *testing.T) {
	readable := writeKeys(t, 0o644)
	missing := filepath.Join(t.TempDir(), "absent")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "client|server"},
		{[]string{"relay"}, "client|server"},
		{[]string{"server", "-key-file", readable}, "server.key_file"},
		{[]string{"server", "-key-file", missing}, "server.key_file"},
		{[]string{"server", "-key-file", writeKeys(t, 0o600), "-max-conns", "0"}, "max_conns"},
		{[]string{"client", "-key-file", readable, "-server", "192.0.2.1:7443"}, "client.key_file"},
		{[]string{"client", "-key-file", writeKeys(t, 0o600)}, "client.server"},
		{[]string{"client", "-key-file", writeKeys(t, 0o600), "-server", "192.0.2.1:7443",
			"-client-id", "box2"}, "client.client_id"},
	} {
		err := runCheck(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("check %v: got %v, want an error naming %q", c.args, err, c.want)
		}
		if !errors.As(err, new(badInput)) {
			t.Errorf("check %v: %v is not marked bad input (exit status 2)", c.args, err)
		}
	}
}

// Bad input exits 2 whichever command meets it; a failure at run time
// (here: the listen address taken) exits 1.
func TestExitStatusSeparatesBadInputFromFailure(t *testing.T) {
	keys := writeKeys(t, 0o600)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct {
		run  func([]string) error
		args []string
		bad  bool
	}{
		{runServer, []string{"-key-file", keys, "-max-conns", "0"}, true},
		{runServer, []string{"-no-such-flag"}, true},
		{runClient, []string{"-key-file", writeKeys(t, 0o644), "-server", "192.0.2.1:7443"}, true},
		{runGenkey, []string{"-id", "bad id"}, true},
		{runServer, []string{"-key-file", keys, "-listen", taken.Addr().String(), "-metrics-listen", ""}, false},
	} {
		err := c.run(c.args)
		if err == nil {
			t.Fatalf("%v: no error", c.args)
		}
		if got := errors.As(err, new(badInput)); got != c.bad {
			t.Errorf("%v: %v marked bad input %v, want %v", c.args, err, got, c.bad)
		}
	}
}

// -files=false checks the settings where the files they name are absent.
func TestCheckSettingsAlone(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	if err := runCheck([]string{"server", "-files=false", "-key-file", missing}); err != nil {
		t.Errorf("settings alone: %v", err)
	}
	err := runCheck([]string{"server", "-files=false", "-key-file", missing, "-max-conns", "0"})
	if err == nil || !strings.Contains(err.Error(), "max_conns") {
		t.Errorf("a bad setting passed without its files: %v", err)
	}
}

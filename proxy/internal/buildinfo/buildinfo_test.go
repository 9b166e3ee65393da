package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestDescribe(t *testing.T) {
	release := &debug.BuildInfo{GoVersion: "go1.24.1", Main: debug.Module{Version: "v0.2.0"}}
	if got := describe("", release); got != "v0.2.0" {
		t.Errorf("release: %q", got)
	}
	checkout := &debug.BuildInfo{GoVersion: "go1.24.1", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "3dfc980a1b2c3d4e5f60718293a4b5c6d7e8f901"},
			{Key: "vcs.modified", Value: "true"}}}
	if got := describe("", checkout); got != "devel 3dfc980a1b2c+changes (go1.24.1)" {
		t.Errorf("checkout: %q", got)
	}
	bare := &debug.BuildInfo{GoVersion: "go1.24.1"}
	if got := describe("", bare); got != "devel (go1.24.1)" {
		t.Errorf("no VCS information: %q", got)
	}
	if got := describe("0.1.0 (0073904)", checkout); got != "0.1.0 (0073904) (go1.24.1)" {
		t.Errorf("stamped by braid's build: %q", got)
	}
	if got := Version("braid-proxy"); len(got) <= len("braid-proxy ") {
		t.Errorf("Version: %q", got)
	}
}

// Package buildinfo names the build a binary came from, for --version:
// braid's release as braid's build scripts stamp it, else the module
// version Go recorded (a tagged release) or, for a plain build from a
// checkout, the commit and whether the tree had changes.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// release is braid's release and commit, e.g. "0.1.0 (0073904-dirty)",
// the text gwsteer-check --version prints: braid's build scripts (the
// packages' and Ansible's artifacts) set it at link time with
// -ldflags "-X 'braid/proxy/internal/buildinfo.release=...'". A plain go
// build leaves it empty.
var release string

// Version returns "NAME VERSION", e.g. "braid-proxy 0.1.0" or
// "braid-proxy devel 3dfc980a1b2c+changes (go1.24.1)".
func Version(name string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " unknown"
	}
	return name + " " + describe(release, bi)
}

func describe(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped + " (" + bi.GoVersion + ")"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, changed string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				changed = "+changes"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	parts := []string{"devel"}
	if rev != "" {
		parts = append(parts, rev+changed)
	}
	return strings.Join(parts, " ") + " (" + bi.GoVersion + ")"
}

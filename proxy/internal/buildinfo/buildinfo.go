// Package buildinfo names the build a binary came from, for --version:
// the module version Go recorded (a tagged release) or, for a build from a
// checkout, the commit and whether the tree had changes.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version returns "NAME VERSION", e.g. "braid-proxy 0.1.0" or
// "braid-proxy devel 3dfc980a1b2c+changes (go1.24.1)".
func Version(name string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " unknown"
	}
	return name + " " + describe(bi)
}

func describe(bi *debug.BuildInfo) string {
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

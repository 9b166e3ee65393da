package wire

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The trace simulator whose privacy figures stand for this transport
// sizes its dummies with copies of two of this package's constants; the
// wire check compares the two, so they must not drift apart.
func TestSimulatorPadsWithTheTransportsFrameSizes(t *testing.T) {
	const path = "../../../defenses/braid_wf/defences/adaptive_padding.py"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the simulator: %v", err)
	}
	for name, want := range map[string]int{"PAD_MAX_BYTES": PadMaxWire, "EMPTY_FRAME_BYTES": FrameOverhead} {
		m := regexp.MustCompile(`(?m)^` + name + ` = (\d+)$`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s: no line %q", path, name+" = <int>")
		}
		if got, _ := strconv.Atoi(string(m[1])); got != want {
			t.Errorf("%s: %s = %d, the transport's is %d", path, name, got, want)
		}
	}
}

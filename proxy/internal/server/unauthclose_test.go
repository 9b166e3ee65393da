package server

import (
	"testing"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
)

func TestUnauthCloseDrawsStayInRangeAndDifferPerServer(t *testing.T) {
	stretches := map[float64]bool{}
	for i := 0; i < 20; i++ {
		u := newUnauthClose()
		if u.stretch < 0 || u.stretch >= maxDeadlineStretch {
			t.Fatalf("stretch %v outside [0, %v)", u.stretch, maxDeadlineStretch)
		}
		if u.bytes < auth.ClientHelloLen || u.bytes >= auth.ClientHelloLen+maxExtraCloseBytes {
			t.Fatalf("budget %d outside [%d, %d)", u.bytes, auth.ClientHelloLen, auth.ClientHelloLen+maxExtraCloseBytes)
		}
		stretches[u.stretch] = true
	}
	// 20 draws of 53 random bits: a repeat has probability below 1e-13.
	if len(stretches) != 20 {
		t.Fatalf("servers share deadlines: %d distinct stretches of 20", len(stretches))
	}
}

func TestUnauthCloseStretchesDeadlines(t *testing.T) {
	u := unauthClose{stretch: 0.25}
	if got := u.deadline(config.Duration(8 * time.Second)); got != 10*time.Second {
		t.Fatalf("8 s stretched by 25 %% = %v", got)
	}
}

package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/proxy/internal/config"
)

// The client exports the path manager's gateway states from the status
// file it reads: a gateway that goes down there is down on /metrics at the
// next read (the file is re-read at most every 500 ms).
func TestClientExportsGatewayStates(t *testing.T) {
	// Waits for deadlines, in parallel: see doc.go.
	t.Parallel()
	gw := filepath.Join(t.TempDir(), "gw.json")
	write := func(secondUp bool) {
		up := "false"
		if secondUp {
			up = "true"
		}
		os.WriteFile(gw+".tmp", []byte(`{"version":1,"updated":"2026-01-01T00:00:00Z","gateways":[
		 {"id":"dsl","source":"127.0.0.1","up":true,"backup":false,"ewma_ms":12.5,"rtt_ms":11,"last_change":"2026-01-01T00:00:00Z"},
		 {"id":"lte","source":"127.0.0.3","up":`+up+`,"backup":true,"ewma_ms":40,"rtt_ms":42,"last_change":"2026-01-01T00:00:00Z"}]}`), 0o644)
		os.Rename(gw+".tmp", gw)
	}
	write(true)
	p := startPair(t, opts{clientMut: func(c *config.Client) { c.GatewayStatusFile = gw }})
	scrape := func() string {
		var b bytes.Buffer
		p.clM.WritePrometheus(&b)
		return b.String()
	}
	for _, want := range []string{
		`braid_proxy_gateway_status_loaded 1`,
		`braid_proxy_gateway_up{gateway="dsl"} 1`,
		`braid_proxy_gateway_up{gateway="lte"} 1`,
		`braid_proxy_gateway_backup{gateway="lte"} 1`,
		`braid_proxy_gateway_probe_rtt_seconds{gateway="dsl"} 0.011`,
		`braid_proxy_gateway_probe_rtt_ewma_seconds{gateway="lte"} 0.04`,
	} {
		if got := scrape(); !strings.Contains(got, want+"\n") {
			t.Fatalf("missing %q in\n%s", want, got)
		}
	}
	time.Sleep(10 * time.Millisecond) // a new modification time
	write(false)
	if !waitFor(func() bool { return strings.Contains(scrape(), `braid_proxy_gateway_up{gateway="lte"} 0`+"\n") }) {
		t.Fatalf("lte not down on /metrics:\n%s", scrape())
	}
	os.Remove(gw)
	if !waitFor(func() bool { return strings.Contains(scrape(), "braid_proxy_gateway_status_loaded 0\n") }) {
		t.Fatalf("a removed status file still counts as loaded:\n%s", scrape())
	}
}

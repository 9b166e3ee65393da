package metrics

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// A registry with one of everything the proxies keep: plain counters, a
// microsecond sum, suffix-named families, gauges, a computed counter,
// gateways and subflows with label values that need escaping.
func filledRegistry() *Registry {
	r := New()
	r.SetBuildInfo("client", `devel 0123456789ab (go1.26)`)
	for name := range counterHelp {
		r.Counter(name).Add(3)
	}
	r.Counter("setup_dial_us_total").Add(1_500_000)
	r.Counter("auth_failures_replay").Add(2)
	r.Counter("auth_failures_clock_skew").Add(1)
	r.Counter("socks_errors_auth").Add(1)
	r.Counter("conns_evicted_preauth_source").Add(4)
	r.Gauge("conns_active", func() int64 { return 7 })
	r.CounterFunc("replay_cache_forgotten", func() int64 { return 9 })
	r.AddGaugeFamily("gateway_probe_rtt_seconds", GaugeFamily{Label: "gateway", Help: "RTT.",
		Values: func() map[string]float64 { return map[string]float64{"gw1": 0.0125, "gw2": 0} }})
	r.AddCounterFamily("relay_failures", GaugeFamily{Label: "relay", Help: "Failures.",
		Values: func() map[string]float64 { return map[string]float64{"relay.example:7443": 2} }})
	r.Gateway(`dsl "home"`).Up.Add(10)
	r.Subflow("10.1.1.2").Down.Add(20)
	return r
}

// What /metrics serves passes the Prometheus project's own linter (which
// parses it with the project's text parser first): HELP and TYPE for every
// family, counters ending in _total, base units, no reserved names.
func TestPrometheusExpositionPassesPromlint(t *testing.T) {
	// The linter does catch what the old /metrics served.
	old := "braid_proxy_conns_total 3\n"
	if problems, err := promlint.New(strings.NewReader(old)).Lint(); err != nil || len(problems) == 0 {
		t.Fatalf("promlint found nothing in %q (%v)", old, err)
	}
	var b bytes.Buffer
	if err := filledRegistry().WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.New(bytes.NewReader(b.Bytes())).Lint()
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, b.String())
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	for _, want := range []string{
		`braid_proxy_build_info{role="client",version="devel 0123456789ab (go1.26)"} 1`,
		`braid_proxy_setup_dial_seconds_total 1.5`,
		`braid_proxy_auth_failures_by_reason_total{reason="replay"} 2`,
		`braid_proxy_conns_evicted_preauth_total{cap="source"} 4`,
		`braid_proxy_replay_cache_forgotten_total 9`,
		`braid_proxy_gateway_up_bytes_total{gateway="dsl \"home\""} 10`,
		`braid_proxy_subflow_received_bytes_total{addr="10.1.1.2"} 20`,
		"# TYPE braid_proxy_conns_active gauge",
		"# TYPE braid_proxy_relay_failures_total counter",
		`braid_proxy_relay_failures_total{relay="relay.example:7443"} 2`,
		`braid_proxy_gateway_probe_rtt_seconds{gateway="gw1"} 0.0125`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "no description yet") {
		t.Errorf("a metric without a description:\n%s", b.String())
	}
}

// Every counter and gauge name the proxy's code uses has a description, so
// /metrics never says "no description yet" in production.
func TestEveryMetricInTheCodeIsDescribed(t *testing.T) {
	use := regexp.MustCompile(`\.(Counter|Gauge|CounterFunc)\("([a-z0-9_]+)"(\s*\+)?`)
	known := func(kind, name string, prefix bool) bool {
		if prefix {
			for _, l := range labelled {
				if l.prefix == name {
					return true
				}
			}
			return false
		}
		switch kind {
		case "Gauge":
			_, ok := gaugeHelp[name]
			return ok
		case "CounterFunc":
			_, ok := counterFuncHelp[name]
			return ok
		}
		_, ok := counterHelp[name]
		_, us := microsecondSums[name]
		return ok || us
	}
	seen := 0
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range use.FindAllStringSubmatch(string(src), -1) {
			seen++
			if !known(m[1], m[2], m[3] != "") {
				t.Errorf("%s: %s(%q) has no description in prom.go", path, m[1], m[2])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 40 {
		t.Fatalf("found only %d metric uses: is the pattern still right?", seen)
	}
}

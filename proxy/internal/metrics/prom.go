package metrics

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// /metrics follows Prometheus's exposition format and naming rules: every
// family has HELP and TYPE lines, counters end in _total, times are in
// seconds, and names that carry a reason or kind in their suffix on
// /status ("auth_failures_replay") are one family with a label. /status
// keeps the registry's own names.

// Namespace prefixes every metric family on /metrics.
const Namespace = "braid_proxy"

// counterHelp describes each counter the proxy keeps. A counter missing
// here is still exposed, with a HELP line that says so; a test keeps the
// table complete.
var counterHelp = map[string]string{
	"auth_failures":                "Connections closed because their hello did not authenticate (any reason).",
	"bad_requests":                 "Authenticated connections whose request did not parse.",
	"bytes_down":                   "Bytes relayed towards the client application.",
	"bytes_up":                     "Bytes relayed from the client application.",
	"connect_failures":             "Destinations the server could not connect to.",
	"conns_empty":                  "Connections closed before sending a byte (scans, unused spares).",
	"conns_rejected_limit":         "Connections refused because max_conns was reached.",
	"conns_total":                  "Connections accepted.",
	"early_data_refused":           "Connections whose early data the server refused (client id over its replay share).",
	"fast_open_unavailable":        "Connections that could not use TCP Fast Open.",
	"frame_auth_failures":          "Relayed frames that failed authentication.",
	"hellos_early_data_refused":    "Authentic hellos whose early data was refused (client id over its replay share).",
	"log_suppressed":               "Log lines dropped by rate limiting.",
	"padding_bytes_received":       "Padding bytes received and dropped.",
	"padding_bytes_sent":           "Padding bytes sent.",
	"padding_conns":                "Connections that padded their upload.",
	"padding_data_bytes_sent":      "Data bytes sent on connections that pad.",
	"padding_frames_sent":          "Padding frames sent.",
	"padding_linger_conns":         "Connections that stayed open to pad after their end of stream.",
	"padding_peer_unsupported":     "Connections whose peer does not drop padding.",
	"preconnect_dial_failures":     "Spare connections that failed to connect.",
	"preconnect_discarded":         "Spare connections closed unused.",
	"preconnect_hits":              "Connections that took a spare.",
	"preconnect_hits_unjoined":     "Connections that took a spare whose other subflows had not joined yet.",
	"preconnect_join_timeouts":     "Spares whose subflows did not join in time.",
	"preconnect_misses":            "Connections that found no spare.",
	"refused_client_limit":         "Connections refused by the per-client connection limit.",
	"refused_destinations":         "Requests refused by the destination policy.",
	"refused_plaintext":            "Plaintext relays refused (the server does not allow them).",
	"relays_total":                 "Relays started.",
	"resolve_failures":             "Destination names that did not resolve.",
	"setup_count":                  "Connection set-ups timed in the setup_*_seconds sums.",
	"socks_auth_failures":          "SOCKS user/password authentications that failed.",
	"socks_conns_total":            "SOCKS connections accepted.",
	"handshake_padding_bytes_sent": "Random bytes sent after the handshake's messages (the hello's or the answer's tail), which vary their sizes.",
	"socks_early_replies":          "SOCKS requests answered before the server reached the destination (early mode, or auto for a destination reached lately).",
	"bridge_clients_evicted":       "braid-pt: bridge clients dropped to make room for another bridge line (the least recently used idle one).",
	"socks_errors":                 "SOCKS exchanges that failed (any kind).",
	"transparent_conns_total":      "Redirected (transparent) connections accepted.",
	"transparent_errors":           "Redirected connections without a usable original destination.",
	"upstream_auth_failures":       "Server handshakes that failed.",
	"upstream_dial_failures":       "Connections to the server that failed.",
	"upstream_refused":             "Requests the server refused or that failed upstream.",
	"relay_retries":                "Connections whose relay failed during set-up and that were retried on another relay.",
	"health_probes":                "Health checks from clients answered (requests for the unspecified address).",
}

// microsecondSums are counters kept in microseconds, exposed in seconds.
var microsecondSums = map[string]string{
	"setup_dial_us_total":      "Time spent connecting to the server, summed over set-ups.",
	"setup_handshake_us_total": "Time spent in the server handshake, summed over set-ups.",
}

// labelled are counter families whose member is named by a suffix.
var labelled = []struct{ prefix, family, label, help string }{
	{"auth_failures_", "auth_failures_by_reason", "reason", "Connections whose hello did not authenticate, by reason."},
	{"socks_errors_", "socks_errors_by_kind", "kind", "Failed SOCKS exchanges, by kind."},
	{"conns_evicted_preauth_", "conns_evicted_preauth", "cap", "Unauthenticated connections evicted to make room, by the cap that was full."},
	{"socks_evicted_handshake_", "socks_evicted_handshake", "cap", "SOCKS connections closed before their request to make room, by the cap that was full."},
}

// gaugeHelp describes the values computed when read.
var gaugeHelp = map[string]string{
	"conns_active":           "Connections open now.",
	"conns_preauth":          "Unauthenticated connections held now.",
	"padding_groups":         "Clients with a padding connection in the client scope.",
	"preconnect_idle":        "Spare connections waiting.",
	"preconnect_idle_joined": "Spare connections waiting with every subflow joined.",
	"replay_cache_entries":   "Hello nonces remembered by the replay cache.",
	"gateway_status_loaded":  "1 if the client has read the path manager's gateway status file, 0 if it is off, missing or invalid.",
	"goroutines":             "Goroutines.",
	"open_fds":               "Open file descriptors.",
	"heap_inuse_bytes":       "Heap memory in use, bytes.",
	"uptime_seconds":         "Seconds since the process started.",
}

// counterFuncHelp describes the counters computed when read.
var counterFuncHelp = map[string]string{
	"replay_cache_forgotten": "Hello nonces forgotten before their time to let a hello without early data in.",
}

// GaugeFamily is a gauge per label value, read when /metrics or /status is.
type GaugeFamily struct {
	Label, Help string
	Values      func() map[string]float64
}

// AddCounterFamily registers a counter per label value under name (which
// ends in _total on /metrics), read when /metrics or /status is.
func (r *Registry) AddCounterFamily(name string, f GaugeFamily) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cfamilies[name] = f
}

// AddGaugeFamily registers a gauge family under name.
func (r *Registry) AddGaugeFamily(name string, f GaugeFamily) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.families[name] = f
}

// registered copies, under the lock, what is computed when read: gauges,
// computed counters, gauge families and the build info. The callers run
// the functions outside the lock, since a gauge may take other locks.
func (r *Registry) registered() (gauges, counters map[string]func() int64, families, cfamilies map[string]GaugeFamily, info [2]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.gauges), maps.Clone(r.counterFuncs), maps.Clone(r.families), maps.Clone(r.cfamilies), r.info
}

// labelledSamples formats one sample per key of values, sorted by key:
// name{label="key"} value.
func labelledSamples(name, label string, values map[string]string) []string {
	s := make([]string, 0, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		s = append(s, fmt.Sprintf("%s_%s{%s=\"%s\"} %s", Namespace, name, label, escapeLabel(k), values[k]))
	}
	return s
}

// family is one metric family's lines.
type family struct {
	name, typ, help string
	samples         []string // "name{labels} value"
}

// SetBuildInfo records what braid_proxy_build_info reports: the role
// ("client", "server", "pt-client", ...) and the binary's version.
func (r *Registry) SetBuildInfo(role, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.info = [2]string{role, version}
}

// CounterFunc registers a counter computed on demand (a value that only
// grows, kept elsewhere).
func (r *Registry) CounterFunc(name string, f func() int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counterFuncs[name] = f
}

// WritePrometheus writes every metric in the exposition format.
func (r *Registry) WritePrometheus(w io.Writer) error {
	var fams []family
	add := func(name, typ, help string, samples ...string) {
		fams = append(fams, family{name: Namespace + "_" + name, typ: typ, help: help, samples: samples})
	}
	byLabel := map[int][]string{}
	r.counters.Range(func(k, v any) bool {
		name, val := k.(string), v.(*atomic.Int64).Load()
		if help, ok := microsecondSums[name]; ok {
			base := strings.TrimSuffix(name, "_us_total") + "_seconds_total"
			add(base, "counter", help, fmt.Sprintf("%s_%s %s", Namespace, base, seconds(val)))
			return true
		}
		for i, l := range labelled {
			if member, ok := strings.CutPrefix(name, l.prefix); ok {
				byLabel[i] = append(byLabel[i], fmt.Sprintf("%s_%s_total{%s=\"%s\"} %d", Namespace, l.family, l.label, escapeLabel(member), val))
				return true
			}
		}
		help, ok := counterHelp[name]
		if !ok {
			help = "Counter " + name + " (no description yet)."
		}
		base := strings.TrimSuffix(name, "_total") + "_total"
		add(base, "counter", help, fmt.Sprintf("%s_%s %d", Namespace, base, val))
		return true
	})
	for i, l := range labelled {
		if s := byLabel[i]; len(s) > 0 {
			sort.Strings(s)
			add(l.family+"_total", "counter", l.help, s...)
		}
	}

	gauges, cfuncs, families, cfamilies, info := r.registered()
	for name, f := range gauges {
		help, ok := gaugeHelp[name]
		if !ok {
			help = "Gauge " + name + " (no description yet)."
		}
		add(name, "gauge", help, fmt.Sprintf("%s_%s %d", Namespace, name, f()))
	}
	for name, f := range cfuncs {
		help, ok := counterFuncHelp[name]
		if !ok {
			help = "Counter " + name + " (no description yet)."
		}
		add(name+"_total", "counter", help, fmt.Sprintf("%s_%s_total %d", Namespace, name, f()))
	}
	for name, v := range r.processValues() {
		add(name, "gauge", gaugeHelp[name], fmt.Sprintf("%s_%s %d", Namespace, name, v))
	}
	for name, f := range families {
		values := map[string]string{}
		for k, v := range f.Values() {
			values[k] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		if len(values) > 0 {
			add(name, "gauge", f.Help, labelledSamples(name, f.Label, values)...)
		}
	}
	for name, f := range cfamilies {
		values := map[string]string{}
		for k, v := range f.Values() {
			values[k] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		if len(values) > 0 {
			add(name+"_total", "counter", f.Help, labelledSamples(name+"_total", f.Label, values)...)
		}
	}
	add("build_info", "gauge", "The build this process runs, and its role: always 1.",
		fmt.Sprintf("%s_build_info{role=\"%s\",version=\"%s\"} 1", Namespace, escapeLabel(info[0]), escapeLabel(info[1])))

	gws, sfs := r.gatewayValues(), r.subflowValues()
	perKey := func(family, label, help string, values map[string]map[string]int64, field string) {
		column := make(map[string]string, len(values))
		for k, v := range values {
			column[k] = strconv.FormatInt(v[field], 10)
		}
		if len(column) > 0 {
			add(family, "counter", help, labelledSamples(family, label, column)...)
		}
	}
	perKey("gateway_conns_total", "gateway", "Connections whose first subflow left through the gateway.", gws, "conns")
	perKey("gateway_up_bytes_total", "gateway", "Bytes relayed up on connections first routed through the gateway.", gws, "bytes_up")
	perKey("gateway_down_bytes_total", "gateway", "Bytes relayed down on connections first routed through the gateway.", gws, "bytes_down")
	perKey("gateway_race_wins_total", "gateway", "Races the gateway won.", gws, "race_wins")
	perKey("subflows_total", "addr", "Subflows seen from or to the address (ended connections).", sfs, "subflows")
	perKey("subflow_sent_bytes_total", "addr", "Bytes the kernel sent on subflows of the address.", sfs, "bytes_sent")
	perKey("subflow_received_bytes_total", "addr", "Bytes the kernel received on subflows of the address.", sfs, "bytes_received")

	sort.Slice(fams, func(i, j int) bool { return fams[i].name < fams[j].name })
	var b strings.Builder
	for _, f := range fams {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.typ)
		for _, s := range f.samples {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// seconds formats microseconds as seconds.
func seconds(us int64) string {
	return strconv.FormatFloat(float64(us)/1e6, 'f', -1, 64)
}

// escapeLabel escapes a label value as the exposition format wants.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// escapeHelp escapes what a HELP line may not hold as is.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

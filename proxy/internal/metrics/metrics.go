// Package metrics keeps the counters both roles expose on their localhost
// status endpoint: /metrics in Prometheus text format and /status as JSON.
// Nothing secret is ever recorded (no keys, passwords or destinations).
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"braid/proxy/internal/mptcpinfo"
)

// Registry holds named counters and per-gateway byte counters.
//
// Counters are looked up on every connection (and bytes counted on every
// relayed chunk), so a lookup of an existing name takes no lock (sync.Map,
// whose reads of stable keys are lock-free); the mutex only serialises
// creating names and the gauges.
type Registry struct {
	start    time.Time
	mu       sync.Mutex // creation of names, gauges, nSubflows
	counters sync.Map   // string -> *atomic.Int64
	gateways sync.Map   // string -> *Gateway
	subflows sync.Map   // string -> *Gateway
	// nSubflows bounds subflows: the server keys them by client address,
	// which an Internet-facing relay sees without end.
	nSubflows    int
	gauges       map[string]func() int64
	counterFuncs map[string]func() int64
	families     map[string]GaugeFamily
	cfamilies    map[string]GaugeFamily // counters per label value
	info         [2]string              // role, version: braid_proxy_build_info
}

// MaxSubflowKeys bounds the per-address subflow counters; addresses seen
// after that many are added up under OtherSubflows.
const MaxSubflowKeys = 256

// OtherSubflows is the key of subflows beyond MaxSubflowKeys addresses.
const OtherSubflows = "other"

// Gateway counts bytes and connections whose first subflow left through it.
type Gateway struct {
	Conns    atomic.Int64
	Up, Down atomic.Int64
	RaceWins atomic.Int64
}

// Add implements relay.Counters.
func (g *Gateway) Add(up bool, n int64) {
	if up {
		g.Up.Add(n)
	} else {
		g.Down.Add(n)
	}
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{start: time.Now(), gauges: map[string]func() int64{}, counterFuncs: map[string]func() int64{},
		families: map[string]GaugeFamily{}, cfamilies: map[string]GaugeFamily{}}
}

// Counter returns (creating) the named counter.
func (r *Registry) Counter(name string) *atomic.Int64 {
	if c, ok := r.counters.Load(name); ok {
		return c.(*atomic.Int64)
	}
	c, _ := r.counters.LoadOrStore(name, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// Gauge registers a value computed on demand.
func (r *Registry) Gauge(name string, f func() int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gauges[name] = f
}

// Gateway returns (creating) the counters for gateway id ("default" when the
// kernel chose the source). Ids come from the local status file, a short
// list.
func (r *Registry) Gateway(id string) *Gateway {
	if g, ok := r.gateways.Load(id); ok {
		return g.(*Gateway)
	}
	g, _ := r.gateways.LoadOrStore(id, new(Gateway))
	return g.(*Gateway)
}

// Subflow returns (creating) the counters for subflows whose own address
// (client) or peer address (server) is addr: bytes each network carried,
// read from the kernel when a connection ends. After MaxSubflowKeys
// addresses, new ones share OtherSubflows.
func (r *Registry) Subflow(addr string) *Gateway {
	if g, ok := r.subflows.Load(addr); ok {
		return g.(*Gateway)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g, ok := r.subflows.Load(addr); ok {
		return g.(*Gateway)
	}
	if r.nSubflows >= MaxSubflowKeys {
		addr = OtherSubflows
		if g, ok := r.subflows.Load(addr); ok {
			return g.(*Gateway)
		}
	}
	g := new(Gateway)
	r.subflows.Store(addr, g)
	r.nSubflows++
	return g
}

// Snapshot returns all values (for /status and tests).
func (r *Registry) Snapshot() map[string]any {
	out := map[string]any{}
	r.counters.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	gauges, counters, families, cfamilies, _ := r.registered()
	for _, funcs := range []map[string]func() int64{gauges, counters} {
		for k, f := range funcs { // outside the lock: a gauge may take others
			out[k] = f()
		}
	}
	out["gateways"] = r.gatewayValues()
	out["subflows"] = r.subflowValues()
	for k, v := range r.processValues() {
		out[k] = v
	}
	for _, fams := range []map[string]GaugeFamily{families, cfamilies} {
		for k, f := range fams {
			out[k] = f.Values()
		}
	}
	return out
}

// gatewayValues returns each gateway's counters by name.
func (r *Registry) gatewayValues() map[string]map[string]int64 {
	gws := map[string]map[string]int64{}
	r.gateways.Range(func(k, v any) bool {
		g := v.(*Gateway)
		gws[k.(string)] = map[string]int64{"conns": g.Conns.Load(), "bytes_up": g.Up.Load(), "bytes_down": g.Down.Load(), "race_wins": g.RaceWins.Load()}
		return true
	})
	return gws
}

// subflowValues returns each subflow address's counters by name.
func (r *Registry) subflowValues() map[string]map[string]int64 {
	sfs := map[string]map[string]int64{}
	r.subflows.Range(func(k, v any) bool {
		g := v.(*Gateway)
		sfs[k.(string)] = map[string]int64{"subflows": g.Conns.Load(), "bytes_sent": g.Up.Load(), "bytes_received": g.Down.Load()}
		return true
	})
	return sfs
}

// processValues returns the process's own gauges.
func (r *Registry) processValues() map[string]int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return map[string]int64{
		"goroutines":       int64(runtime.NumGoroutine()),
		"open_fds":         openFDs(),
		"heap_inuse_bytes": int64(ms.HeapInuse),
		"uptime_seconds":   int64(time.Since(r.start).Seconds()),
	}
}

func openFDs() int64 {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return int64(len(ents))
}

// Handler serves /metrics and /status.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(r.Snapshot())
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		r.WritePrometheus(w)
	})
	return mux
}

// SubflowSampler keeps the largest counters seen per subflow of one MPTCP
// connection; the kernel forgets a subflow once it closes, so a connection
// is sampled while it is still up and recorded when it ends.
type SubflowSampler struct {
	Conn     *net.TCPConn
	mu       sync.Mutex
	seen     map[[2]netip.AddrPort]mptcpinfo.Subflow
	notMPTCP atomic.Bool // a plain TCP connection never becomes MPTCP
}

// Sample reads the kernel's per-subflow counters now.
func (s *SubflowSampler) Sample() {
	if s.notMPTCP.Load() {
		return
	}
	sfs, err := mptcpinfo.Subflows(s.Conn)
	if errors.Is(err, mptcpinfo.ErrNotMPTCP) {
		s.notMPTCP.Store(true)
	}
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[[2]netip.AddrPort]mptcpinfo.Subflow{}
	}
	for _, sf := range sfs {
		k := [2]netip.AddrPort{sf.Local, sf.Remote}
		old := s.seen[k]
		sf.BytesAcked = max(sf.BytesAcked, old.BytesAcked)
		sf.BytesReceived = max(sf.BytesReceived, old.BytesReceived)
		s.seen[k] = sf
	}
}

// Record adds the sampled counters to r, keyed by the local address
// (local=true, the client's gateway source) or the peer's (the server).
func (s *SubflowSampler) Record(r *Registry, local bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sf := range s.seen {
		a := sf.Remote.Addr()
		if local {
			a = sf.Local.Addr()
		}
		g := r.Subflow(a.String())
		g.Conns.Add(1)
		g.Up.Add(int64(sf.BytesAcked))
		g.Down.Add(int64(sf.BytesReceived))
	}
}

// Serve runs the endpoint on addr until ctx ends.
func Serve(ctx context.Context, addr string, r *Registry, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("metrics endpoint listening", "addr", ln.Addr().String())
	go srv.Serve(ln)
	return nil
}

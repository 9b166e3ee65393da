// Package metrics keeps the counters both roles expose on their localhost
// status endpoint: /metrics in Prometheus text format and /status as JSON.
// Nothing secret is ever recorded (no keys, passwords or destinations).
package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Registry holds named counters and per-gateway byte counters.
type Registry struct {
	start    time.Time
	mu       sync.Mutex
	counters map[string]*atomic.Int64
	gateways map[string]*Gateway
	gauges   map[string]func() int64
}

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
	return &Registry{
		start:    time.Now(),
		counters: map[string]*atomic.Int64{},
		gateways: map[string]*Gateway{},
		gauges:   map[string]func() int64{},
	}
}

// Counter returns (creating) the named counter.
func (r *Registry) Counter(name string) *atomic.Int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.counters[name]
	if !ok {
		c = new(atomic.Int64)
		r.counters[name] = c
	}
	return c
}

// Gauge registers a value computed on demand.
func (r *Registry) Gauge(name string, f func() int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gauges[name] = f
}

// Gateway returns (creating) the counters for gateway id ("default" when the
// kernel chose the source).
func (r *Registry) Gateway(id string) *Gateway {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.gateways[id]
	if !ok {
		g = new(Gateway)
		r.gateways[id] = g
	}
	return g
}

// Snapshot returns all values (for /status and tests).
func (r *Registry) Snapshot() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]any{}
	for k, v := range r.counters {
		out[k] = v.Load()
	}
	for k, f := range r.gauges {
		out[k] = f()
	}
	gws := map[string]map[string]int64{}
	for id, g := range r.gateways {
		gws[id] = map[string]int64{"conns": g.Conns.Load(), "bytes_up": g.Up.Load(), "bytes_down": g.Down.Load(), "race_wins": g.RaceWins.Load()}
	}
	out["gateways"] = gws
	out["goroutines"] = int64(runtime.NumGoroutine())
	out["open_fds"] = openFDs()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out["heap_inuse_bytes"] = int64(ms.HeapInuse)
	out["uptime_seconds"] = int64(time.Since(r.start).Seconds())
	return out
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
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		snap := r.Snapshot()
		gws := snap["gateways"].(map[string]map[string]int64)
		delete(snap, "gateways")
		keys := make([]string, 0, len(snap))
		for k := range snap {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "braid_proxy_%s %v\n", k, snap[k])
		}
		ids := make([]string, 0, len(gws))
		for id := range gws {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			for _, m := range []string{"conns", "bytes_up", "bytes_down", "race_wins"} {
				fmt.Fprintf(w, "braid_proxy_gateway_%s{gateway=%q} %d\n", m, id, gws[id][m])
			}
		}
	})
	return mux
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

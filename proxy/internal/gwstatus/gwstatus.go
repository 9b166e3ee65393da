// Package gwstatus reads the gateway status file that the path manager
// plugin (gwsteer) writes, and ranks gateways for the first subflow of new
// connections.
//
// Format (version 1):
//
//	{"version":1,"updated":"<RFC3339>","gateways":[
//	  {"id":"gw1","source":"10.1.1.2","up":true,"backup":false,
//	   "ewma_ms":12.5,"rtt_ms":11.0,"last_change":"<RFC3339>"}, ...]}
//
// Best = up, not backup, lowest ewma_ms (ties by id). Backup gateways are
// only used when no regular gateway is up. A missing or unreadable file
// means "no preference": the kernel picks the source (logged once per
// state change, not per connection).
package gwstatus

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"sort"
	"sync"
	"time"
)

// DefaultPath is where gwsteer writes its status.
const DefaultPath = "/run/braid/gateways.json"

// MaxFileSize bounds the status file we are willing to parse.
const MaxFileSize = 1 << 20

// Gateway is one entry of the status file.
type Gateway struct {
	ID         string     `json:"id"`
	Source     netip.Addr `json:"source"`
	Up         bool       `json:"up"`
	Backup     bool       `json:"backup"`
	EwmaMs     float64    `json:"ewma_ms"`
	RttMs      float64    `json:"rtt_ms"`
	LastChange time.Time  `json:"last_change"`
}

// Status is the whole file.
type Status struct {
	Version  int       `json:"version"`
	Updated  time.Time `json:"updated"`
	Gateways []Gateway `json:"gateways"`
}

// Parse decodes and validates a status file.
func Parse(data []byte) (*Status, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("status file larger than %d bytes", MaxFileSize)
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decoding gateway status: %w", err)
	}
	if s.Version != 1 {
		return nil, fmt.Errorf("gateway status version %d, want 1", s.Version)
	}
	seen := map[string]bool{}
	for i, g := range s.Gateways {
		if g.ID == "" || seen[g.ID] {
			return nil, fmt.Errorf("gateways[%d]: empty or duplicate id", i)
		}
		seen[g.ID] = true
		if !g.Source.IsValid() || g.Source.Zone() != "" {
			return nil, fmt.Errorf("gateways[%d] (%s): invalid source", i, g.ID)
		}
		if math.IsNaN(g.EwmaMs) || math.IsInf(g.EwmaMs, 0) || g.EwmaMs < 0 {
			return nil, fmt.Errorf("gateways[%d] (%s): invalid ewma_ms", i, g.ID)
		}
	}
	return &s, nil
}

// Ranked returns usable gateways, best first.
func (s *Status) Ranked() []Gateway {
	var regular, backup []Gateway
	for _, g := range s.Gateways {
		if !g.Up {
			continue
		}
		if g.Backup {
			backup = append(backup, g)
		} else {
			regular = append(regular, g)
		}
	}
	out := regular
	if len(out) == 0 {
		out = backup
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].EwmaMs != out[j].EwmaMs {
			return out[i].EwmaMs < out[j].EwmaMs
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Watcher caches the file and re-reads it when it changes (checked at
// most every MinInterval).
type Watcher struct {
	Path        string
	MinInterval time.Duration
	Log         *slog.Logger

	mu        sync.Mutex
	checked   time.Time
	modTime   time.Time
	size      int64
	ranked    []Gateway
	all       []Gateway // every gateway of the file as last read; nil if none
	lastState string    // for log-once
}

// NewWatcher returns a watcher for path.
func NewWatcher(path string, log *slog.Logger) *Watcher {
	return &Watcher{Path: path, MinInterval: 500 * time.Millisecond, Log: log}
}

// Best returns up to n gateways, best first (empty: no preference).
func (w *Watcher) Best(n int) []Gateway {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.maybeRefresh()
	if len(w.ranked) < n {
		n = len(w.ranked)
	}
	return append([]Gateway(nil), w.ranked[:n]...)
}

// All returns every gateway in the file, up or not, and whether the file
// was read (false: off, missing or invalid).
func (w *Watcher) All() ([]Gateway, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.maybeRefresh()
	return append([]Gateway(nil), w.all...), w.lastState == "ok"
}

func (w *Watcher) maybeRefresh() {
	now := time.Now()
	if now.Sub(w.checked) >= w.MinInterval || w.checked.IsZero() {
		w.checked = now
		w.refresh()
	}
}

func (w *Watcher) refresh() {
	if w.Path == "" { // off: the kernel chooses, nothing to report
		w.ranked, w.all = nil, nil
		return
	}
	st, err := os.Stat(w.Path)
	if err != nil {
		w.ranked, w.all = nil, nil
		w.note("unavailable", "gateway status file unavailable; kernel chooses the first subflow's source", "path", w.Path, "err", errText(err))
		return
	}
	if st.ModTime().Equal(w.modTime) && st.Size() == w.size && w.lastState == "ok" {
		return
	}
	data, err := os.ReadFile(w.Path)
	if err == nil && len(data) > MaxFileSize {
		err = errors.New("file too large")
	}
	var s *Status
	if err == nil {
		s, err = Parse(data)
	}
	if err != nil {
		w.ranked, w.all = nil, nil
		w.note("invalid", "gateway status file unreadable; kernel chooses the first subflow's source", "path", w.Path, "err", errText(err))
		return
	}
	w.modTime, w.size = st.ModTime(), st.Size()
	w.ranked, w.all = s.Ranked(), s.Gateways
	w.note("ok", "gateway status loaded", "path", w.Path, "usable", len(w.ranked))
}

func (w *Watcher) note(state, msg string, args ...any) {
	if w.lastState == state && state != "ok" {
		return
	}
	w.lastState = state
	if w.Log == nil {
		return
	}
	if state == "ok" {
		w.Log.Debug(msg, args...)
	} else {
		w.Log.Warn(msg, args...)
	}
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

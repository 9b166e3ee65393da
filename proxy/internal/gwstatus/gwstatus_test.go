package gwstatus

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const sample = `{"version":1,"updated":"2026-11-22T04:00:00Z","gateways":[
 {"id":"gw1","source":"10.1.1.2","up":true,"backup":false,"ewma_ms":12.5,"rtt_ms":11.0,"last_change":"2026-11-22T03:59:00Z"},
 {"id":"gw2","source":"10.1.2.2","up":true,"backup":false,"ewma_ms":8.0,"rtt_ms":9.0,"last_change":"2026-11-22T03:59:00Z"},
 {"id":"gw3","source":"10.1.3.2","up":false,"backup":false,"ewma_ms":1.0,"rtt_ms":1.0,"last_change":"2026-11-22T03:59:00Z"},
 {"id":"bk","source":"10.1.4.2","up":true,"backup":true,"ewma_ms":0.5,"rtt_ms":1.0,"last_change":"2026-11-22T03:59:00Z"}]}`

func TestRanked(t *testing.T) {
	s, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	r := s.Ranked()
	if len(r) != 2 || r[0].ID != "gw2" || r[1].ID != "gw1" {
		t.Fatalf("ranked %+v", r)
	}
	// Only a backup is up: use it.
	s.Gateways[0].Up, s.Gateways[1].Up = false, false
	if r := s.Ranked(); len(r) != 1 || r[0].ID != "bk" {
		t.Fatalf("backup fallback %+v", r)
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{
		`{"version":2,"gateways":[]}`,
		`{"version":1,"gateways":[{"id":"","source":"10.0.0.1"}]}`,
		`{"version":1,"gateways":[{"id":"a","source":"nope"}]}`,
		`{"version":1,"gateways":[{"id":"a","source":"10.0.0.1"},{"id":"a","source":"10.0.0.2"}]}`,
		`{"version":1,"gateways":[{"id":"a","source":"10.0.0.1","ewma_ms":-1}]}`,
		`not json`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestWatcher(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gw.json")
	w := NewWatcher(p, nil)
	w.MinInterval = 0
	if b := w.Best(2); len(b) != 0 {
		t.Fatalf("missing file gave %v", b)
	}
	os.WriteFile(p, []byte(sample), 0o644)
	if b := w.Best(1); len(b) != 1 || b[0].Source.String() != "10.1.2.2" {
		t.Fatalf("best %v", b)
	}
	os.WriteFile(p, []byte("garbage"), 0o644)
	os.Chtimes(p, time.Now().Add(time.Second), time.Now().Add(time.Second))
	if b := w.Best(2); len(b) != 0 {
		t.Fatalf("garbage gave %v", b)
	}
}

func TestWatcherOff(t *testing.T) {
	var logged bytes.Buffer
	w := NewWatcher("", slog.New(slog.NewTextHandler(&logged, nil)))
	w.MinInterval = 0
	if b := w.Best(2); len(b) != 0 {
		t.Fatalf("no file gave %v", b)
	}
	if logged.Len() != 0 {
		t.Fatalf("an unset status file is not a fault, but it logged: %s", logged.String())
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Parse(in)
		if err != nil {
			return
		}
		for _, g := range s.Ranked() {
			if !g.Up || !g.Source.IsValid() {
				t.Fatalf("unusable gateway ranked: %+v", g)
			}
		}
	})
}

// Package padding holds the delay distributions of braid's adaptive padding
// (WTF-PAD-style): per direction a histogram H_B of delays
// between bursts and H_G of delays inside bursts, in log-spaced bins with
// an infinity bin, as defenses/braid_wf/defences/adaptive_padding.py fits them from traces
// and writes them (histograms_to_json). The state machine that uses them
// runs on each wire.Conn (package wire); this package only parses and
// samples.
//
// Sampling mirrors the simulator: the infinity bin with probability
// p_infinity, otherwise a bin in proportion to its count and a delay
// uniform in log within the bin.
package padding

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"time"
)

// Format names the JSON layout (defenses/braid_wf/defences/adaptive_padding.py JSON_FORMAT).
const Format = "braid-ap-histograms/1"

//go:embed default_histograms.json
var defaultJSON []byte

// Histogram is one delay distribution.
type Histogram struct {
	edges []float64 // seconds, len(counts)+1, increasing
	cdf   []float64 // cumulative counts / total
	pInf  float64
}

// Direction is the pair of distributions one end pads its sending
// direction with.
type Direction struct {
	Burst Histogram // H_B: after a real frame, until the first dummy
	Gap   Histogram // H_G: between dummies of a fake burst; infinity ends it
}

// Histograms are both directions': Out is the client's (client to
// server), In the server's (server to client).
type Histograms struct {
	Out, In Direction
}

type jsonHist struct {
	Counts    []float64 `json:"counts"`
	PInfinity float64   `json:"p_infinity"`
}

type jsonDir struct {
	Burst jsonHist `json:"burst"`
	Gap   jsonHist `json:"gap"`
}

type jsonDoc struct {
	Format string    `json:"format"`
	Edges  []float64 `json:"edges_s"`
	Out    jsonDir   `json:"out"`
	In     jsonDir   `json:"in"`
}

// Parse reads histograms in the simulator's JSON format.
func Parse(data []byte) (*Histograms, error) {
	var doc jsonDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("padding histograms: %w", err)
	}
	if doc.Format != Format {
		return nil, fmt.Errorf("padding histograms: format %q, want %q", doc.Format, Format)
	}
	if len(doc.Edges) < 2 {
		return nil, errors.New("padding histograms: fewer than two bin edges")
	}
	for i, e := range doc.Edges {
		if !(e > 0) || math.IsInf(e, 0) || (i > 0 && e <= doc.Edges[i-1]) {
			return nil, errors.New("padding histograms: bin edges must be positive, finite and increasing")
		}
	}
	h := &Histograms{}
	for _, d := range []struct {
		name string
		src  *jsonDir
		dst  *Direction
	}{{"out", &doc.Out, &h.Out}, {"in", &doc.In, &h.In}} {
		var err error
		if d.dst.Burst, err = newHistogram(doc.Edges, d.src.Burst); err != nil {
			return nil, fmt.Errorf("padding histograms: %s.burst: %w", d.name, err)
		}
		if d.dst.Gap, err = newHistogram(doc.Edges, d.src.Gap); err != nil {
			return nil, fmt.Errorf("padding histograms: %s.gap: %w", d.name, err)
		}
	}
	return h, nil
}

func newHistogram(edges []float64, j jsonHist) (Histogram, error) {
	if len(j.Counts) != len(edges)-1 {
		return Histogram{}, fmt.Errorf("%d counts for %d bins", len(j.Counts), len(edges)-1)
	}
	if !(j.PInfinity >= 0 && j.PInfinity <= 1) {
		return Histogram{}, errors.New("p_infinity must be in [0, 1]")
	}
	cdf := make([]float64, len(j.Counts))
	total := 0.0
	for i, c := range j.Counts {
		if !(c >= 0) || math.IsInf(c, 0) {
			return Histogram{}, errors.New("counts must be finite and not negative")
		}
		total += c
		cdf[i] = total
	}
	if total <= 0 && j.PInfinity < 1 {
		return Histogram{}, errors.New("no delays and p_infinity < 1")
	}
	for i := range cdf {
		cdf[i] /= max(total, 1)
	}
	return Histogram{edges: edges, cdf: cdf, pInf: j.PInfinity}, nil
}

// Load reads a histograms file.
func Load(path string) (*Histograms, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("padding histograms: %w", err)
	}
	return Parse(data)
}

// Default returns the built-in histograms: fitted by
// defenses/braid_wf/defences/adaptive_padding.py on braid's synthetic corpus (braid_wf.synth, 50
// sites x 30 loads).
func Default() *Histograms { return defaultHist() }

var defaultHist = sync.OnceValue(func() *Histograms {
	h, err := Parse(defaultJSON)
	if err != nil {
		panic("padding: built-in histograms: " + err.Error())
	}
	return h
})

// ForConfig returns the histograms of a padding_histograms setting: the
// file's, or the built-in ones for "".
func ForConfig(path string) (*Histograms, error) {
	if path == "" {
		return Default(), nil
	}
	return Load(path)
}

// Sample draws a delay; ok is false when the infinity bin was drawn.
func (h *Histogram) Sample(r *rand.Rand) (d time.Duration, ok bool) {
	if r.Float64() < h.pInf {
		return 0, false
	}
	u := r.Float64()
	b := sort.Search(len(h.cdf), func(i int) bool { return h.cdf[i] > u }) // numpy searchsorted side=right
	b = min(b, len(h.cdf)-1)
	lo, hi := math.Log(h.edges[b]), math.Log(h.edges[b+1])
	s := math.Exp(lo + (hi-lo)*r.Float64())
	return time.Duration(s * float64(time.Second)), true
}

// PInfinity is the probability of the infinity bin.
func (h *Histogram) PInfinity() float64 { return h.pInf }

// TestJSON returns histograms (both directions alike) whose H_B is the bin
// holding burst seconds, H_G the bin holding gap seconds with p_infinity
// pInf, on the simulator's bins: for tests.
func TestJSON(burst, gap, pInf float64) []byte {
	const bins = 64
	edges := make([]float64, bins+1)
	for i := range edges {
		edges[i] = math.Pow(10, -6+8*float64(i)/bins)
	}
	one := func(s float64) []float64 {
		c := make([]float64, bins)
		c[sort.SearchFloat64s(edges, s*1.0001)-1] = 1
		return c
	}
	d := jsonDir{Burst: jsonHist{Counts: one(burst)}, Gap: jsonHist{Counts: one(gap), PInfinity: pInf}}
	b, _ := json.Marshal(jsonDoc{Format: Format, Edges: edges, Out: d, In: d})
	return b
}

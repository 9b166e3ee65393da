package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The relay-capacity benchmark's two loads: connections opened at a
// fixed offered rate (Rate), and many connections held open with a
// periodic echo (Hold).

// RoundRobin spreads connections over several dialers in turn (e.g. one
// SOCKS port per client box).
func RoundRobin(dials []Dialer) Dialer {
	if len(dials) == 1 {
		return dials[0]
	}
	var next atomic.Uint64
	return func(ctx context.Context) (net.Conn, error) {
		return dials[(next.Add(1)-1)%uint64(len(dials))](ctx)
	}
}

// RateSummary is the outcome of one offered-rate step.
type RateSummary struct {
	OfferedPerS  float64 `json:"offered_per_s"`
	DurationS    float64 `json:"duration_s"`
	Offered      int     `json:"offered"` // connections due in the window
	Skipped      int     `json:"skipped"` // due while max-inflight were open: not started
	OK           int     `json:"ok"`      // exchanges that completed intact
	Failed       int     `json:"failed"`  // started and failed (or timed out)
	FirstError   string  `json:"first_error,omitempty"`
	ElapsedS     float64 `json:"elapsed_s"`      // until the last started one ended
	AchievedPerS float64 `json:"achieved_per_s"` // ok / elapsed
	LatMedMs     float64 `json:"latency_median_ms"`
	LatP90Ms     float64 `json:"latency_p90_ms"`
	LatP99Ms     float64 `json:"latency_p99_ms"`
	SetupMedMs   float64 `json:"setup_median_ms"`
}

// Rate starts connections at rate per second for d, open loop: a
// connection is started when it is due whether or not earlier ones have
// ended, unless maxInflight are in flight (then it is skipped and
// counted). Each one runs a down/up exchange bounded by perConn. Latency
// is the whole exchange, dial to trailer.
func Rate(ctx context.Context, dial Dialer, rate float64, d time.Duration, maxInflight int, perConn time.Duration,
	down, up uint64, o Options) RateSummary {
	s := RateSummary{OfferedPerS: rate, DurationS: d.Seconds()}
	var (
		mu       sync.Mutex
		lat      []float64
		setup    []float64
		wg       sync.WaitGroup
		inflight atomic.Int64
	)
	start := time.Now()
	seed := uint64(0)
	for {
		el := time.Since(start)
		if el >= d || ctx.Err() != nil {
			break
		}
		due := int(el.Seconds() * rate)
		for ; s.Offered < due; s.Offered++ {
			if inflight.Load() >= int64(maxInflight) {
				s.Skipped++
				continue
			}
			inflight.Add(1)
			wg.Add(1)
			seed++
			go func(seed uint64) {
				defer wg.Done()
				defer inflight.Add(-1)
				cctx, cancel := context.WithTimeout(ctx, perConn)
				defer cancel()
				t0 := time.Now()
				r := TransferOpts(cctx, dial, seed, down, up, o)
				ms := float64(time.Since(t0).Microseconds()) / 1000
				mu.Lock()
				defer mu.Unlock()
				if r.Err != nil {
					s.Failed++
					if s.FirstError == "" {
						s.FirstError = r.Err.Error()
					}
					return
				}
				s.OK++
				lat = append(lat, ms)
				setup = append(setup, float64(r.Setup.Microseconds())/1000)
			}(seed)
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	el := time.Since(start)
	s.ElapsedS = el.Seconds()
	s.AchievedPerS = float64(s.OK) / el.Seconds()
	s.LatMedMs, s.LatP90Ms, s.LatP99Ms = quantile(lat, 0.5), quantile(lat, 0.9), quantile(lat, 0.99)
	s.SetupMedMs = quantile(setup, 0.5)
	return s
}

// HoldOptions describe a hold: N connections opened at OpenRate per
// second (at most OpenInflight dials at once), each echoing EchoBytes
// every Interval (from a random offset, so the echoes spread evenly),
// held for Hold once all have been opened.
type HoldOptions struct {
	N            int
	OpenRate     float64
	OpenInflight int
	Interval     time.Duration
	EchoBytes    int
	Hold         time.Duration
	// Progress, if set, is called about once a second while opening, with
	// the connections opened and failed so far.
	Progress func(opened, failed int)
	// Held, if set, is called once every connection has been tried, before
	// the hold; Release after it, before the connections are closed.
	Held, Release func(open int)
}

// HoldSummary is the outcome of a hold.
type HoldSummary struct {
	Conns        int     `json:"conns"`
	Opened       int     `json:"opened"`
	OpenFailed   int     `json:"open_failed"`
	FirstError   string  `json:"first_error,omitempty"`
	OpenS        float64 `json:"open_s"` // until every connection was tried
	HeldS        float64 `json:"held_s"` // the hold itself
	Live         int     `json:"live"`   // opened and never failed an echo
	Echoes       int64   `json:"echoes"` // verified round trips, whole run
	EchoFailed   int64   `json:"echo_failed"`
	EchoesPerS   float64 `json:"echoes_per_s"` // during the hold
	EchoMedMs    float64 `json:"echo_median_ms"`
	EchoP99Ms    float64 `json:"echo_p99_ms"`
	EchoErrorMsg string  `json:"echo_first_error,omitempty"`
}

// held is one open echo connection.
type held struct {
	c      net.Conn
	rtts   []float64
	failed error
}

// run echoes o.EchoBytes every interval until ctx ends; the first echo
// after a random part of an interval.
func (h *held) run(ctx context.Context, o HoldOptions, echoes *atomic.Int64) {
	out := make([]byte, o.EchoBytes)
	in := make([]byte, o.EchoBytes)
	t := time.NewTimer(rand.N(o.Interval) + 1)
	defer t.Stop()
	for n := uint64(0); ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		binary.BigEndian.PutUint64(out, n)
		t0 := time.Now()
		h.c.SetDeadline(t0.Add(10 * time.Second))
		if _, err := h.c.Write(out); err != nil {
			if ctx.Err() == nil {
				h.failed = err
			}
			return
		}
		if _, err := io.ReadFull(h.c, in); err != nil {
			if ctx.Err() == nil {
				h.failed = err
			}
			return
		}
		if !bytes.Equal(in, out) {
			h.failed = fmt.Errorf("echo %d came back altered", n)
			return
		}
		h.rtts = append(h.rtts, float64(time.Since(t0).Microseconds())/1000)
		echoes.Add(1)
		t.Reset(o.Interval)
	}
}

// Hold opens o.N echo connections, keeps them live for o.Hold and closes
// them. A connection that fails to open is counted, not retried.
func Hold(ctx context.Context, dial Dialer, o HoldOptions) HoldSummary {
	o.EchoBytes = max(o.EchoBytes, 8)
	o.Interval = max(o.Interval, time.Millisecond)
	o.OpenInflight = max(o.OpenInflight, 1)
	s := HoldSummary{Conns: o.N}
	echoCtx, stopEcho := context.WithCancel(ctx)
	defer stopEcho()
	var (
		mu      sync.Mutex
		conns   []*held
		dials   sync.WaitGroup
		loops   sync.WaitGroup
		echoes  atomic.Int64
		sem     = make(chan struct{}, o.OpenInflight)
		opened  atomic.Int64
		failed  atomic.Int64
		lastRep = time.Now()
	)
	start := time.Now()
	for i := 0; i < o.N && ctx.Err() == nil; i++ {
		if o.OpenRate > 0 {
			if wait := time.Duration(float64(i)/o.OpenRate*float64(time.Second)) - time.Since(start); wait > 0 {
				time.Sleep(wait)
			}
		}
		sem <- struct{}{}
		if o.Progress != nil && time.Since(lastRep) >= time.Second {
			o.Progress(int(opened.Load()), int(failed.Load()))
			lastRep = time.Now()
		}
		dials.Add(1)
		go func() {
			defer dials.Done()
			defer func() { <-sem }()
			c, err := dialEcho(ctx, dial)
			if err != nil {
				failed.Add(1)
				mu.Lock()
				if s.FirstError == "" {
					s.FirstError = err.Error()
				}
				mu.Unlock()
				return
			}
			opened.Add(1)
			h := &held{c: c}
			mu.Lock()
			conns = append(conns, h)
			mu.Unlock()
			loops.Add(1)
			go func() {
				defer loops.Done()
				h.run(echoCtx, o, &echoes)
			}()
		}()
	}
	dials.Wait()
	s.OpenS = time.Since(start).Seconds()
	s.Opened, s.OpenFailed = int(opened.Load()), int(failed.Load())
	if o.Progress != nil {
		o.Progress(s.Opened, s.OpenFailed)
	}
	if o.Held != nil {
		o.Held(s.Opened)
	}
	e0, h0 := echoes.Load(), time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(o.Hold):
	}
	s.HeldS = time.Since(h0).Seconds()
	s.EchoesPerS = float64(echoes.Load()-e0) / s.HeldS
	if o.Release != nil {
		o.Release(s.Opened)
	}
	stopEcho()
	for _, h := range conns {
		h.c.SetDeadline(time.Now()) // wakes an echo waiting for its answer
	}
	loops.Wait()
	var rtts []float64
	for _, h := range conns {
		h.c.Close()
		rtts = append(rtts, h.rtts...)
		if h.failed != nil {
			s.EchoFailed++
			if s.EchoErrorMsg == "" {
				s.EchoErrorMsg = h.failed.Error()
			}
			continue
		}
		s.Live++
	}
	s.Echoes = echoes.Load()
	s.EchoMedMs, s.EchoP99Ms = quantile(rtts, 0.5), quantile(rtts, 0.99)
	return s
}

// dialEcho opens a connection and asks the server for echo mode.
func dialEcho(ctx context.Context, dial Dialer) (net.Conn, error) {
	c, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	var hdr [headerLen]byte
	copy(hdr[:], echoMagic[:])
	if _, err := c.Write(hdr[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("header: %w", err)
	}
	return c, nil
}

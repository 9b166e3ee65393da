package loadgen

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// sink starts a loopback loadgen server for the test.
func sink(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go Serve(ln)
	return ln.Addr().String()
}

func TestRoundRobinSpreadsInTurn(t *testing.T) {
	var calls [3]int
	dials := make([]Dialer, len(calls))
	for i := range dials {
		dials[i] = func(context.Context) (net.Conn, error) { calls[i]++; return nil, nil }
	}
	d := RoundRobin(dials)
	for range 7 {
		d(context.Background())
	}
	if calls != [3]int{3, 2, 2} {
		t.Fatalf("calls per dialer %v, want [3 2 2]", calls)
	}
}

func TestRateOffersOpenLoop(t *testing.T) {
	dial := DirectDialer(sink(t), false, "")
	s := Rate(context.Background(), dial, 200, 500*time.Millisecond, 64, 5*time.Second, 512, 64, Options{Verify: true})
	if s.Failed != 0 || s.Skipped != 0 {
		t.Fatalf("failed %d skipped %d (%s)", s.Failed, s.Skipped, s.FirstError)
	}
	// About 100 due in 0.5 s at 200/s (the loop wakes every millisecond;
	// fewer when a loaded machine wakes it late at the end).
	if s.Offered < 50 || s.Offered > 101 || s.OK != s.Offered {
		t.Fatalf("offered %d ok %d, want ~100 all ok", s.Offered, s.OK)
	}
	if s.AchievedPerS <= 0 || s.LatMedMs <= 0 || s.LatP99Ms < s.LatMedMs {
		t.Fatalf("implausible summary %+v", s)
	}
}

func TestRateSkipsBeyondMaxInflight(t *testing.T) {
	// A dialer that never completes: everything beyond the cap is skipped.
	block := func(ctx context.Context) (net.Conn, error) { <-ctx.Done(); return nil, ctx.Err() }
	s := Rate(context.Background(), block, 1000, 200*time.Millisecond, 5, 300*time.Millisecond, 1, 0, Options{})
	if s.Failed != 5 || s.OK != 0 || s.Skipped != s.Offered-5 {
		t.Fatalf("offered %d skipped %d failed %d ok %d, want 5 failed, the rest skipped",
			s.Offered, s.Skipped, s.Failed, s.OK)
	}
}

func TestHoldKeepsConnectionsLive(t *testing.T) {
	dial := DirectDialer(sink(t), false, "")
	var held, released atomic.Int64
	s := Hold(context.Background(), dial, HoldOptions{
		N: 50, OpenRate: 500, OpenInflight: 8, Interval: 20 * time.Millisecond, EchoBytes: 16,
		Hold:    300 * time.Millisecond,
		Held:    func(n int) { held.Store(int64(n)) },
		Release: func(n int) { released.Store(int64(n)) },
	})
	if s.Opened != 50 || s.OpenFailed != 0 || s.Live != 50 || s.EchoFailed != 0 {
		t.Fatalf("opened %d failed %d live %d echo failed %d (%s %s)", s.Opened, s.OpenFailed, s.Live,
			s.EchoFailed, s.FirstError, s.EchoErrorMsg)
	}
	if held.Load() != 50 || released.Load() != 50 {
		t.Fatalf("held callback %d, release %d, want 50", held.Load(), released.Load())
	}
	// 50 connections, one echo each per 20 ms, for 300 ms: ~750, far
	// fewer on a loaded machine; every connection echoes at least once.
	if s.EchoesPerS <= 0 || s.Echoes < int64(s.Live) || s.EchoMedMs <= 0 {
		t.Fatalf("echoes %d (%.0f/s), median %.3f ms", s.Echoes, s.EchoesPerS, s.EchoMedMs)
	}
}

func TestHoldCountsFailedOpens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every dial is refused
	s := Hold(context.Background(), DirectDialer(addr, false, ""), HoldOptions{N: 5, Hold: time.Millisecond})
	if s.Opened != 0 || s.OpenFailed != 5 || s.FirstError == "" || s.Live != 0 {
		t.Fatalf("%+v, want 5 failed opens", s)
	}
}

package e2e

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/wire"
)

// A key holder floods valid hellos for the client's id past its share of
// the server's replay cache (8 here, 65,536 in production; the cache's own
// test runs at that size). The server still answers hellos without early
// data, refuses early data with an authenticated "retry without" that acts
// on nothing, and the client, told so, loses one connection and then
// connects by waiting for the answer: the id is never locked out.
func TestFloodedClientIDStillConnects(t *testing.T) {
	p := startPair(t, opts{})
	const share = 8
	p.srv.SetReplayShare(share)
	_, port, _ := net.SplitHostPort(p.sink)
	sink := "127.0.0.1:" + port
	for i := 0; i < 3*share; i++ {
		_, hello, err := auth.NewClientHello(testPSK(), nil, 0, time.Now(), wire.AppendRequest(nil, mustDest(sink)))
		if err != nil {
			t.Fatal(err)
		}
		if out := p.rawServerN(hello, auth.ServerHelloLen); len(out) != auth.ServerHelloLen {
			t.Fatalf("flood hello %d without early data got %d bytes, want an answer", i, len(out))
		}
	}
	if got := p.counter(p.srvM, "auth_failures"); got != 0 {
		t.Fatalf("hellos without early data refused: %d auth failures", got)
	}

	// Early data past what the server reads with the hello (a browser's
	// first requests, frame after frame): still unread when it answers.
	hs, flight, early := earlyFlight(t, time.Now(), sink, []byte("must not reach the sink"))
	for i := 0; i < 16; i++ {
		flight = early.Append(flight, 0, bytes.Repeat([]byte{'x'}, 8192))
	}
	c, reply, _ := sendFlight(t, p, hs, flight)
	if st, err := wire.ParseReply(reply); err != nil || st != wire.StatusRetryWithoutEarlyData {
		t.Fatalf("early data with the share full: reply %v %v, want retry without early data", st, err)
	}
	// The server reads what the client sent before it saw the answer and
	// then closes: a close with unread data is a reset, which discards an
	// answer still queued to be sent (held by the scheduler, a full
	// window) and leaves the client with a relay that reset it.
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the retry answer: %d bytes, %v; want the server's orderly close (EOF)", n, err)
	}
	if got := p.counter(p.srvM, "hellos_early_data_refused"); got != 1 {
		t.Fatalf("early-data refusals counted %d, want 1", got)
	}

	// The client's own early connection meets the same refusal; it may
	// fail that one, never the next.
	p.mustWorkPastDeadSpare("after the flood")
	p.mustWork()
	if got := p.counter(p.clM, "early_data_refused"); got != 1 {
		t.Fatalf("client met %d early-data refusals, want 1 (then it waits for answers)", got)
	}
}

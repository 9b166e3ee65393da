package e2e

import (
	"context"
	"testing"
	"time"

	"braid/proxy/internal/config"
	"braid/proxy/internal/loadgen"
)

// BenchmarkConnectionSetup measures what one proxied connection costs, end
// to end on loopback (SOCKS exchange, hello, request, reply, a 1-byte
// response, both half-closes): allocs/op and B/op are the per-connection
// garbage of client, server and load generator together, which drives the
// GC work each connection causes.
//
//	go test -run '^$' -bench ConnectionSetup -benchmem ./internal/e2e
func BenchmarkConnectionSetup(b *testing.B) {
	for _, tc := range []struct {
		name    string
		encrypt bool
	}{{"encrypted", true}, {"plaintext", false}} {
		b.Run(tc.name, func(b *testing.B) {
			p := startPair(b, opts{
				serverMut: func(s *config.Server) { s.AllowPlaintext = true },
				clientMut: func(c *config.Client) { c.Encrypt = tc.encrypt },
			})
			dial, err := loadgen.SOCKSDialer(p.socks, p.sink, "", "")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if r := loadgen.Transfer(ctx, dial, 42, 1, 0, false); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		})
	}
}

package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/wire"
)

// Relays are checked two ways. Passively: a connection whose dial or
// handshake to a relay fails marks that relay down at once, so the
// connections after it go elsewhere. Actively, with a servers list of more
// than one: every health_interval each relay gets a health check, a real
// authenticated handshake (a TCP connect alone would pass a relay whose
// braid-proxy is stuck, or a box that took over its address). A check
// that fails marks the relay down; one that succeeds marks it up. After
// health_close_after consecutive failed checks the connections still in
// flight on the relay are closed: a relay that vanished without a reset
// (its host or its provider's network gone) would otherwise hold them
// until the idle timeout (5 minutes by default) or TCP's retransmission
// limit, and the application would wait that long for an error.

// probeDest is what a health check asks the relay for: the unspecified
// address, which no server connects to. braid-proxy servers answer it as
// a health check (counted as health_probes); older ones refuse it by
// policy. Either answer arrives inside an authenticated server hello,
// which is what the check verifies.
var probeDest = dest.Addr{IP: netip.IPv4Unspecified(), Port: 9}

// runHealth checks the relays until ctx ends.
func (c *Client) runHealth(ctx context.Context) {
	for {
		rt := c.rt.Load()
		wait := time.Duration(rt.cfg.HealthInterval)
		if wait <= 0 || len(rt.relays.list) < 2 {
			wait = time.Second // look again: a reload may turn checks on
		} else {
			c.checkAll(ctx, rt)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// checkAll checks every relay at once and waits for the results.
func (c *Client) checkAll(ctx context.Context, rt *runtimeState) {
	var wg sync.WaitGroup
	for _, r := range rt.relays.list {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, time.Duration(rt.cfg.HealthTimeout))
			defer cancel()
			err := c.probe(pctx, rt, r)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				r.h.probeFails.Store(0)
				c.relayUp(r, "health check passed")
				return
			}
			r.h.probeFailures.Add(1)
			n := r.h.probeFails.Add(1)
			c.relayDown(r, "health check failed", err)
			if k := rt.cfg.HealthCloseAfter; k > 0 && int(n) >= k {
				if cut := r.h.cutAll(); cut > 0 {
					r.h.cut.Add(int64(cut))
					c.log.Warn("closing connections in flight on a relay that failed its health checks",
						"relay", r.addr, "failed_checks", n, "conns", cut)
				}
			}
		})
	}
	wg.Wait()
}

// probe runs one health check of r: connect (as a real connection would,
// through the chosen gateway) and complete an authenticated handshake.
func (c *Client) probe(ctx context.Context, rt *runtimeState, r *relayHost) error {
	raw, _, err := c.dial(ctx, rt, r)
	if err != nil {
		return err
	}
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	if rt.tls != nil {
		// As openTLS, without its counters and logs: a relay that is
		// down fails a check every interval.
		tc := tls.Client(raw, rt.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake: %w", err)
		}
		req := wire.AppendRequest(nil, probeDest)
		if _, err := tc.Write(append([]byte{byte(len(req))}, req...)); err != nil {
			return fmt.Errorf("sending request: %w", err)
		}
		var rep [2]byte
		if _, err := io.ReadFull(tc, rep[:]); err != nil {
			return fmt.Errorf("reading reply: %w", err)
		}
		_, err = wire.ParseReply(rep[:])
		return err
	}
	flags := byte(0)
	if !rt.cfg.Encrypt {
		flags |= auth.FlagPlaintext
	}
	hs, first, err := auth.NewClientHello(rt.psk, r.pub, flags, time.Now(), wire.AppendRequest(nil, probeDest))
	if err != nil {
		return err
	}
	if _, err := raw.Write(first); err != nil {
		return fmt.Errorf("sending hello: %w", err)
	}
	sh := make([]byte, hs.ServerHelloLen())
	if _, err := io.ReadFull(raw, sh); err != nil {
		return fmt.Errorf("reading server hello: %w", err)
	}
	if _, _, _, err := hs.ReadServerHello(sh); err != nil {
		return fmt.Errorf("server hello: %w", err)
	}
	return nil
}

// relayFailed records a real connection's failed dial or handshake on r:
// r is down at once.
func (c *Client) relayFailed(r *relayHost, err error) {
	r.h.failures.Add(1)
	c.relayDown(r, "connection to relay failed", err)
}

// relayWorked records a real connection that r served.
func (c *Client) relayWorked(r *relayHost) {
	r.h.probeFails.Store(0)
	c.relayUp(r, "connection through relay succeeded")
}

func (c *Client) relayDown(r *relayHost, why string, err error) {
	if r.h.up.Swap(false) {
		c.log.Warn("relay down: new connections go to relays that are up, if any", "relay", r.addr, "why", why, "err", err)
		c.pool.kick() // drop its spares, fill for the relay used now
	}
}

func (c *Client) relayUp(r *relayHost, why string) {
	if !r.h.up.Swap(true) {
		c.log.Info("relay up again", "relay", r.addr, "why", why)
		c.pool.kick()
	}
}

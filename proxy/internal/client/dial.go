package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"braid/proxy/internal/gwstatus"
	"braid/proxy/internal/sockopt"
)

// pendingDial is a connection to the server being opened while the SOCKS
// exchange with the application is still going on, so the two overlap.
type pendingDial struct {
	relay *relayHost
	done  chan struct{}
	conn  *net.TCPConn
	gwID  string
	err   error
	taken bool
}

// startDial opens a connection to r, or takes one of its spares.
func (c *Client) startDial(rt *runtimeState, r *relayHost) *pendingDial {
	p := &pendingDial{relay: r, done: make(chan struct{})}
	if p.conn, p.gwID = c.pool.take(rt, r); p.conn != nil {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		ctx, cancel := context.WithTimeout(c.connCtx, time.Duration(rt.cfg.DialTimeout))
		defer cancel()
		p.conn, p.gwID, p.err = c.dial(ctx, rt, r)
	}()
	return p
}

// wait returns the dialed connection; the caller owns it.
func (p *pendingDial) wait() (*net.TCPConn, string, error) {
	<-p.done
	p.taken = true
	return p.conn, p.gwID, p.err
}

// discard closes the connection if nobody took it (in the background, so a
// failing SOCKS exchange is not delayed by the dial).
func (p *pendingDial) discard() {
	if p.taken {
		return
	}
	go func() {
		<-p.done
		if p.conn != nil {
			p.conn.Close()
		}
	}()
}

// dial opens the MPTCP connection to r, binding the first subflow to the
// best gateway's source address, or racing the two best.
func (c *Client) dial(ctx context.Context, rt *runtimeState, r *relayHost) (*net.TCPConn, string, error) {
	if c.Source.IsValid() {
		conn, err := c.dialFrom(ctx, rt, r, c.Source)
		return conn, "bind", err
	}
	n := 1
	if rt.cfg.Race {
		n = 2
	}
	gws := rt.gateways.Best(n)
	if len(gws) == 0 {
		conn, err := c.dialFrom(ctx, rt, r, netip.Addr{})
		return conn, "default", err
	}
	if len(gws) == 1 {
		conn, err := c.dialFrom(ctx, rt, r, gws[0].Source)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("dial through best gateway failed; using the kernel's choice", "gateway", gws[0].ID, "err", err)
			conn, err = c.dialFrom(ctx, rt, r, netip.Addr{})
			return conn, "default", err
		}
		return conn, gws[0].ID, err
	}
	return c.race(ctx, rt, r, gws)
}

type dialResult struct {
	conn *net.TCPConn
	gw   gwstatus.Gateway
	err  error
}

func (c *Client) race(ctx context.Context, rt *runtimeState, r *relayHost, gws []gwstatus.Gateway) (*net.TCPConn, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan dialResult, len(gws))
	start := func(g gwstatus.Gateway) {
		go func() {
			conn, err := c.dialFrom(ctx, rt, r, g.Source)
			results <- dialResult{conn, g, err}
		}()
	}
	start(gws[0])
	pending := 1
	var errs []error
	delay := time.Duration(rt.cfg.RaceDelay)
	var timer <-chan time.Time
	if delay > 0 {
		timer = time.After(delay)
	} else {
		start(gws[1])
		pending++
	}
	launched := pending
	for pending > 0 || launched < len(gws) {
		select {
		case <-timer:
			timer = nil
			if launched < len(gws) {
				start(gws[1])
				launched++
				pending++
			}
		case res := <-results:
			pending--
			if res.err == nil {
				// Close late winners in the background.
				left := pending
				go func() {
					for ; left > 0; left-- {
						if l := <-results; l.conn != nil {
							l.conn.Close()
						}
					}
				}()
				c.metrics.Gateway(res.gw.ID).RaceWins.Add(1)
				return res.conn, res.gw.ID, nil
			}
			errs = append(errs, fmt.Errorf("gateway %s: %w", res.gw.ID, res.err))
			if launched < len(gws) { // first failed before the delay: start the other now
				timer = nil
				start(gws[1])
				launched++
				pending++
			}
		}
	}
	return nil, "", errors.Join(errs...)
}

func (c *Client) dialFrom(ctx context.Context, rt *runtimeState, r *relayHost, src netip.Addr) (*net.TCPConn, error) {
	d := net.Dialer{KeepAlive: rt.cfg.RelayKeepAlive()}
	// Fast Open makes connect return before the handshake, so it cannot be
	// combined with racing, which keeps the first completed handshake.
	if rt.cfg.FastOpen && !rt.cfg.Race {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			if err := sockopt.FastOpenConnect(rc); err != nil {
				c.metrics.Counter("fast_open_unavailable").Add(1)
			}
			return nil
		}
	}
	d.SetMultipathTCP(!rt.cfg.NoMPTCP)
	if src.IsValid() {
		local := netip.AddrPortFrom(src, 0)
		// A server given as an address skips the resolver's parsing and
		// allocations. (Without a source, DialTCP would bind to the
		// wildcard address first, so that path keeps DialContext; a name
		// is resolved on every dial, it may move.)
		if server, err := netip.ParseAddrPort(r.addr); err == nil {
			return d.DialTCP(ctx, "tcp", local, server)
		}
		d.LocalAddr = net.TCPAddrFromAddrPort(local)
	}
	conn, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, err
	}
	return conn.(*net.TCPConn), nil
}

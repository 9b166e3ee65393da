package main

// The server role's connections to the bridge: the Extended ORPort, which
// learns each client's address, or the plain ORPort.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"braid/proxy/internal/client"
	"braid/proxy/internal/extorport"
	"braid/proxy/internal/pt"
)

// orDialer opens the connection to tor for one authenticated client.
type orDialer struct {
	target    netip.AddrPort
	extended  bool             // target is the Extended ORPort
	cookie    extorport.Cookie // its authentication cookie
	outbound  pt.Common        // TOR_PT_OUTBOUND_BIND_ADDRESS_*
	keepAlive time.Duration
	log       *slog.Logger
}

// newORDialer picks the Extended ORPort when tor offers one with a cookie
// file it can read, else the plain ORPort.
func newORDialer(env *pt.Server, keepAlive time.Duration, log *slog.Logger) (*orDialer, error) {
	d := &orDialer{outbound: env.Common, keepAlive: keepAlive, log: log}
	switch {
	case env.ExtORPort.IsValid() && env.AuthCookie != "":
		cookie, err := extorport.ReadCookie(env.AuthCookie)
		if err != nil {
			return nil, fmt.Errorf("TOR_PT_AUTH_COOKIE_FILE: %w", err)
		}
		d.target, d.extended, d.cookie = env.ExtORPort, true, cookie
		if !env.ExtORPort.Addr().IsLoopback() {
			log.Warn("the Extended ORPort is not on a loopback address: its traffic is not encrypted", "extorport", env.ExtORPort.String())
		}
	case env.ORPort.IsValid():
		if env.ExtORPort.IsValid() {
			log.Warn("tor gave an Extended ORPort without TOR_PT_AUTH_COOKIE_FILE; using the plain ORPort")
		}
		d.target = env.ORPort
	default:
		return nil, errors.New("TOR_PT_EXTENDED_SERVER_PORT without TOR_PT_AUTH_COOKIE_FILE, and no TOR_PT_ORPORT")
	}
	return d, nil
}

// dial connects to tor for the client at client (the remote address of its
// MPTCP connection); on the Extended ORPort it authenticates and names the
// client and the transport before the OR protocol starts.
func (d *orDialer) dial(ctx context.Context, client netip.AddrPort) (*net.TCPConn, error) {
	nd := net.Dialer{KeepAlive: d.keepAlive}
	if src, ok := d.outbound.OutboundFor(d.target.Addr()); ok {
		nd.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	c, err := nd.DialContext(ctx, "tcp", d.target.String())
	if err != nil {
		return nil, err
	}
	conn := c.(*net.TCPConn)
	if !d.extended {
		return conn, nil
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if err := extorport.Handshake(conn, d.cookie, client, transport); err != nil {
		conn.Close()
		// The reason, never the cookie; the client's connection closes.
		d.log.Warn("Extended ORPort refused the client's connection; closing it", "client", client.String(), "err", err)
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// describe names the destination for the start-up log line.
func (d *orDialer) describe() string {
	if d.extended {
		return "extorport " + d.target.String()
	}
	return "orport " + d.target.String()
}

// bindSource gives a client role's braid client for server the outbound
// bind address of server's family (TOR_PT_OUTBOUND_BIND_ADDRESS_*): its
// connections' first subflow leaves from there, in place of the gateway
// choice; the path manager adds the other subflows.
func bindSource(c *client.Client, outbound pt.Common, server netip.AddrPort, log *slog.Logger) {
	if src, ok := outbound.OutboundFor(server.Addr()); ok {
		c.Source = src
		log.Info("outbound bind address: first subflows leave from it", "bridge", server.String(), "source", src.String())
	}
}

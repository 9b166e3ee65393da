package client

import (
	"errors"
	"fmt"
	"net"

	"braid/proxy/internal/dest"
	"braid/proxy/internal/wire"
)

// ErrBusy is returned by Connect when the client is at max_conns or shutting
// down.
var ErrBusy = errors.New("client at its connection limit or shutting down")

// Connect carries conn, whose own handshake the caller has done (a Tor
// pluggable transport's SOCKS exchange with per-bridge arguments), through
// the server to d: the same dial (gateway choice, racing), authentication,
// encryption and relay as a SOCKS connection. ready runs once the server has
// accepted the request (the caller sends its positive reply there); on
// failure Connect returns the status for the caller's negative reply.
// Connect returns when the relay ends.
func (c *Client) Connect(conn *net.TCPConn, d dest.Addr, ready func() error) (wire.Status, error) {
	rt := c.rt.Load()
	slot := c.conns.Admit(rt.cfg.MaxConns)
	if slot == nil {
		c.metrics.Counter("conns_rejected_limit").Add(1)
		return wire.StatusGeneralFailure, ErrBusy
	}
	defer slot.Done()
	up, status, err := c.open(rt, d, nil, false)
	if err == nil && status != wire.StatusOK {
		err = fmt.Errorf("server answered %s", status)
	}
	if err != nil {
		if status == wire.StatusOK {
			status = wire.StatusGeneralFailure
		}
		c.upstreamFailed(status, err)
		return status, err
	}
	defer up.conn.Close()
	if err := ready(); err != nil {
		return wire.StatusOK, err
	}
	c.relay(conn, up, rt)
	return wire.StatusOK, nil
}

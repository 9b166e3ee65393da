package client

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/relay"
	"braid/proxy/internal/wire"
)

// upstream is the connection to the server carrying one client connection.
type upstream struct {
	conn    relay.Conn
	raw     *net.TCPConn
	gateway *metrics.Gateway
	gwID    string
	relay   *relayHost
	// await, if set, reads and checks the server's answer, which has not
	// arrived yet (early data); nothing is relayed back before it.
	await func() error
}

// open connects to the server (or takes the connection pre-dialed during
// the SOCKS exchange), authenticates and names d. The hello and the sealed
// request go out in the first flight.
//
// With early set, open returns as soon as they are sent: the application's
// data follows at once (auth.FlagEarlyData), and the server's answer is
// read and checked by the upstream's await before the first byte is relayed
// back. The whole exchange then costs no round trip of its own. Otherwise
// open waits for the answer, which costs one round trip after the MPTCP
// handshake and yields the real status.
//
// The relay is pre's, or the policy's choice for d. If connecting to it or
// its handshake fails before anything was answered, the relay is marked
// down and the connection is tried once more on the next relay the policy
// chooses, so the application does not see the failure. (With early data
// the handshake completes after open returns: a failure then fails the
// connection, and only marks the relay down.)
func (c *Client) open(rt *runtimeState, d dest.Addr, pre *pendingDial, early bool) (*upstream, wire.Status, error) {
	if pre == nil {
		pre = c.startDial(rt, rt.relays.pick(d, nil))
	}
	up, status, err := c.openOn(rt, d, pre, early)
	var rerr *relayError
	if !errors.As(err, &rerr) {
		return up, status, err
	}
	failed := pre.relay
	c.relayFailed(failed, err)
	next := rt.relays.pick(d, failed)
	if next == nil {
		return up, status, err
	}
	c.metrics.Counter("relay_retries").Add(1)
	c.log.Info("retrying connection on another relay", "failed", failed.addr, "relay", next.addr, "err", err)
	up, status, err = c.openOn(rt, d, c.startDial(rt, next), early)
	if errors.As(err, &rerr) {
		c.relayFailed(next, err)
	}
	return up, status, err
}

// relayError is a failure of the relay itself (connecting, or its
// handshake), as opposed to an answer from it.
type relayError struct{ err error }

func (e *relayError) Error() string { return e.err.Error() }
func (e *relayError) Unwrap() error { return e.err }

// openOn is open on pre's relay, without retries.
func (c *Client) openOn(rt *runtimeState, d dest.Addr, pre *pendingDial, early bool) (*upstream, wire.Status, error) {
	cfg := rt.cfg
	r := pre.relay
	var (
		hs          *auth.ClientHandshake
		earlySealer *wire.Sealer
		first       []byte
		err         error
	)
	if rt.tls == nil {
		flags := byte(auth.FlagPadReply) // the answer's size varies too
		if !cfg.Encrypt {
			flags |= auth.FlagPlaintext
		}
		if early {
			flags |= auth.FlagEarlyData
		}
		if cfg.Encrypt {
			// This client drops padding frames, also after the server's
			// end of stream, and pads after its own if it pads at all.
			flags |= auth.FlagPadding | auth.FlagDrain
			if rt.pad != nil {
				flags |= auth.FlagLinger
			}
		}
		if hs, first, err = auth.NewClientHello(rt.psk, r.pub, flags, time.Now(), wire.AppendRequest(nil, d)); err != nil {
			return nil, wire.StatusGeneralFailure, err
		}
		c.metrics.Counter("handshake_padding_bytes_sent").Add(int64(len(first) - auth.ClientHelloLen))
		if early && cfg.Encrypt {
			earlyAEAD, _ := wire.NewAEAD(hs.EarlyKey())
			earlySealer = wire.NewSealer(earlyAEAD)
		}
	}

	t0 := time.Now()
	raw, gwID, err := pre.wait()
	t1 := time.Now()
	if err != nil {
		c.metrics.Counter("upstream_dial_failures").Add(1)
		return nil, wire.StatusNetUnreachable, &relayError{fmt.Errorf("connecting to server %s: %w", r.addr, err)}
	}
	gw := c.metrics.Gateway(gwID)
	gw.Conns.Add(1)
	r.h.conns.Add(1)
	ok := false
	defer func() {
		if !ok {
			raw.Close()
		}
	}()
	raw.SetDeadline(time.Now().Add(time.Duration(cfg.HandshakeTimeout) + time.Duration(cfg.DialTimeout)))
	setUp := func() {
		raw.SetReadDeadline(time.Time{})
		c.metrics.Counter("setup_count").Add(1)
		c.metrics.Counter("setup_dial_us_total").Add(t1.Sub(t0).Microseconds())
		c.metrics.Counter("setup_handshake_us_total").Add(time.Since(t1).Microseconds())
	}
	var (
		up     = &upstream{raw: raw, gateway: gw, gwID: gwID, relay: r}
		answer func() (wire.Status, error)
	)
	if rt.tls != nil {
		tc, err := c.openTLS(rt, raw, d)
		if err != nil {
			if errors.Is(err, errRequestTooLong) {
				return nil, wire.StatusGeneralFailure, err
			}
			return nil, wire.StatusGeneralFailure, &relayError{err}
		}
		up.conn = tc
		answer = func() (wire.Status, error) {
			var rep [2]byte
			if _, err := io.ReadFull(tc, rep[:]); err != nil {
				return wire.StatusGeneralFailure, &relayError{fmt.Errorf("reading reply: %w", err)}
			}
			return wire.ParseReply(rep[:])
		}
	} else {
		if _, err := raw.Write(first); err != nil {
			c.metrics.Counter("upstream_dial_failures").Add(1)
			return nil, wire.StatusNetUnreachable, &relayError{fmt.Errorf("sending hello to %s: %w", r.addr, err)}
		}
		var (
			wc *wire.Conn
			br *bufio.Reader
			// The answer is read through the relay's buffer when there is
			// one, so that it and the first data frame it usually arrives
			// with take one read; a plaintext relay must not read past it.
			src io.Reader = raw
		)
		up.conn = raw
		if cfg.Encrypt {
			br = wire.NewReader(raw)
			src = br
			wc = wire.NewConnReader(raw, br, nil, earlySealer)
			wc.SetPadCounters(c.padCtrs)
			up.conn = wc
		}
		answer = func() (wire.Status, error) {
			reply, keys, status, err := c.serverHello(rt, r, src, hs)
			if err != nil {
				return status, &relayError{err}
			}
			st, rflags, err := wire.ParseReplyFlags(reply)
			if err != nil || st != wire.StatusOK || !cfg.Encrypt {
				return st, err
			}
			s2cAEAD, _ := wire.NewAEAD(keys.S2C)
			c2sAEAD, _ := wire.NewAEAD(keys.C2S)
			opener := wire.NewOpener(s2cAEAD)
			if early {
				// From here on the upload is under the forward-secret
				// session key, not the early key (the server switches
				// at the key-update frame).
				wc.SetOpener(opener)
				if err := wc.UpdateKey(c2sAEAD); err != nil {
					return wire.StatusGeneralFailure, fmt.Errorf("sending key update: %w", err)
				}
			} else {
				// The data waited for the answer: it starts under the
				// session key.
				wc = wire.NewConnReader(raw, br, opener, wire.NewSealer(c2sAEAD))
				wc.SetPadCounters(c.padCtrs)
				up.conn = wc
			}
			if rflags&wire.ReplyFlagLinger != 0 {
				wc.DrainOnClose()
			}
			if rflags&wire.ReplyFlagDrain != 0 && rt.pad != nil {
				wc.LingerForPadding()
			}
			c.startPadding(rt, wc, rflags&wire.ReplyFlagPadding != 0)
			return st, nil
		}
	}
	if early {
		ok = true
		raw.SetWriteDeadline(time.Time{})
		up.await = func() error {
			status, err := answer()
			if err != nil {
				c.relayFailed(r, err) // too late to retry: the application was answered
			} else {
				c.relayWorked(r)
			}
			if err == nil && status == wire.StatusRetryWithoutEarlyData {
				off := c.early.refused(time.Now())
				c.metrics.Counter("early_data_refused").Add(1)
				c.log.Warn("server refused early data (this client id's replay share is full: is someone else using its key?); "+
					"connections wait for the server's answer", "for", off.String())
				return fmt.Errorf("server refused early data")
			}
			if err == nil && status == wire.StatusOK {
				c.early.accepted()
				c.reached.add(d.String(), time.Now())
			}
			if err == nil && status != wire.StatusOK {
				err = fmt.Errorf("server answered %s", status)
			}
			if err != nil {
				c.reached.forget(d.String())
				c.upstreamFailed(status, err)
				return err
			}
			setUp()
			return nil
		}
		return up, wire.StatusOK, nil
	}
	status, err := answer()
	if err == nil {
		c.relayWorked(r)
	}
	if err == nil && status == wire.StatusRetryWithoutEarlyData {
		// Only early data is ever refused this way.
		return nil, wire.StatusGeneralFailure, fmt.Errorf("server refused early data the client did not send")
	}
	if err != nil || status != wire.StatusOK {
		c.reached.forget(d.String())
		return nil, status, err
	}
	c.reached.add(d.String(), time.Now())
	ok = true
	raw.SetWriteDeadline(time.Time{})
	setUp()
	return up, wire.StatusOK, nil
}

// startPadding pads the upload if this client is configured to and the
// server drops padding frames (it said so in its reply).
func (c *Client) startPadding(rt *runtimeState, wc *wire.Conn, peerKnows bool) {
	if rt.pad == nil {
		return
	}
	if !peerKnows {
		c.metrics.Counter("padding_peer_unsupported").Add(1)
		return
	}
	// One key: a client box's connections are one stream to its observers.
	if err := rt.pad.Start(wc, ""); err != nil {
		c.log.Warn("adaptive padding not started", "err", err)
		return
	}
	c.metrics.Counter("padding_conns").Add(1)
	c.log.Debug("adaptive padding on", "budget", rt.pad.Config.Budget, "idle", rt.pad.Config.Idle)
}

// serverHello reads and checks the server's answer and returns its reply
// and the session keys.
func (c *Client) serverHello(rt *runtimeState, r *relayHost, src io.Reader, hs *auth.ClientHandshake) ([]byte, auth.SessionKeys, wire.Status, error) {
	sh := make([]byte, hs.ServerHelloLen())
	if _, err := io.ReadFull(src, sh); err != nil {
		if isConnectError(err) { // with Fast Open, connect errors surface here
			c.metrics.Counter("upstream_dial_failures").Add(1)
			return nil, auth.SessionKeys{}, wire.StatusNetUnreachable, fmt.Errorf("connecting to server %s: %w", r.addr, err)
		}
		c.metrics.Counter("upstream_auth_failures").Add(1)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			err = errors.New("server closed the connection during the handshake (wrong key, unknown client id, clock skew or a braid v1 server?)")
		}
		c.log.Error("server handshake failed", "err", err)
		return nil, auth.SessionKeys{}, wire.StatusGeneralFailure, err
	}
	reply, keys, pad, err := hs.ReadServerHello(sh)
	if err == nil {
		_, err = io.CopyN(io.Discard, src, int64(pad)) // the answer's random tail
	}
	if err != nil {
		c.metrics.Counter("upstream_auth_failures").Add(1)
		c.log.Error("server handshake failed", "err", err)
		return nil, keys, wire.StatusGeneralFailure, err
	}
	return reply, keys, wire.StatusOK, nil
}

// upstreamFailed counts and logs a connection the server refused or could
// not set up.
func (c *Client) upstreamFailed(status wire.Status, err error) {
	c.metrics.Counter("upstream_refused").Add(1)
	c.log.Info("upstream refused or failed", "status", status.String(), "err", err)
}

// errRequestTooLong is a request that TLS mode cannot carry: the
// destination's fault, not the relay's.
var errRequestTooLong = errors.New("too long for the request (at most 250)")

// openTLS authenticates with mutual TLS 1.3 (pinned certificates) over raw
// and names d: one length byte, then the wire request. The answer is the
// 2-byte wire reply that follows.
func (c *Client) openTLS(rt *runtimeState, raw *net.TCPConn, d dest.Addr) (*tls.Conn, error) {
	// TLS mode's request has a 1-byte length: host names of 251-253 bytes
	// do not fit (the length would wrap and the server would read
	// garbage). Refused before the handshake, so the server sees nothing.
	if n := len(wire.AppendRequest(nil, d)); n > 255 {
		return nil, fmt.Errorf("auth tls: host name of %d bytes: %w", len(d.Name), errRequestTooLong)
	}
	tc := tls.Client(raw, rt.tls)
	if err := tc.Handshake(); err != nil {
		c.metrics.Counter("upstream_auth_failures").Add(1)
		c.log.Error("server TLS handshake failed", "err", err)
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	req := wire.AppendRequest(nil, d)
	if _, err := tc.Write(append([]byte{byte(len(req))}, req...)); err != nil {
		return nil, fmt.Errorf("sending request: %w", err)
	}
	return tc, nil
}

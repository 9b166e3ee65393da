// Package client is the client-box end of braid-proxy: it accepts local
// connections (SOCKS5, or transparently redirected by iptables/nftables),
// opens one MPTCP connection to the relay server per client connection,
// authenticates, names the destination and relays both ways.
//
// The first subflow leaves through the gateway the path manager rates best
// (its status file); with racing on, the handshake is raced over the two
// best gateways and the first to complete is kept (MultiNAT's idea).
// The in-kernel or userspace path manager then adds the other subflows.
package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"braid/proxy/internal/acceptloop"
	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/gwstatus"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/origdst"
	"braid/proxy/internal/padding"
	"braid/proxy/internal/preauth"
	"braid/proxy/internal/relay"
	"braid/proxy/internal/socks5"
	"braid/proxy/internal/tlsauth"
	"braid/proxy/internal/wire"
)

// Client is a running client box proxy.
type Client struct {
	log     *slog.Logger
	metrics *metrics.Registry
	rt      atomic.Pointer[runtimeState]

	connCtx    context.Context
	cancelConn context.CancelFunc
	conns      acceptloop.Conns
	handshakes *preauth.Limiter // SOCKS connections before their request
	pool       *preconnect
	padCtrs    wire.PadCounters
	early      earlyGate
	reached    reachedSet // destinations that may get an early SOCKS reply

	// Source, if valid, is the first subflow's source address, in place
	// of the gateway choice (a Tor transport's OutboundBindAddressPT);
	// the path manager adds the other subflows as usual. Set it before
	// the first connection.
	Source netip.Addr
}

type runtimeState struct {
	cfg      *config.Client
	id       string
	psk      [auth.KeyLen]byte // auth psk: the Noise PSK from the key file
	relays   *relaySet
	tls      *tls.Config // auth tls
	users    Users
	gateways *gwstatus.Watcher
	pad      *wire.Padder // adaptive padding of the upload; nil = off
}

// New builds a client from a validated configuration.
func New(cfg *config.Client, log *slog.Logger, m *metrics.Registry) (*Client, error) {
	c := &Client{log: log, metrics: m, padCtrs: wire.NewPadCounters(m.Counter)}
	c.handshakes = preauth.New(func(reason string) {
		m.Counter("socks_evicted_handshake_" + reason).Add(1)
	})
	c.connCtx, c.cancelConn = context.WithCancel(context.Background())
	if err := c.Reload(cfg); err != nil {
		return nil, err
	}
	m.Gauge("conns_active", c.conns.Active)
	c.exportGateways(m)
	c.exportRelays(m)
	c.pool = newPreconnect(c)
	go c.pool.run(c.connCtx)
	go c.runHealth(c.connCtx)
	return c, nil
}

// Check loads everything a client with cfg would run on (key or
// certificate, SOCKS users, padding histograms) without listening or
// dialling: what "braid-proxy check client" reports.
func Check(cfg *config.Client) error {
	c := &Client{log: slog.New(slog.DiscardHandler)}
	return c.Reload(cfg)
}

// Reload applies a new configuration (keys, users, gateways, racing,
// timeouts); listen addresses are only read at start.
func (c *Client) Reload(cfg *config.Client) error {
	var (
		id     string
		key    []byte
		tlsCfg *tls.Config
		err    error
	)
	if cfg.Auth == "tls" {
		cert, err := tlsauth.LoadCert(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("client.tls_key_file: %w", err)
		}
		if err := tlsauth.CheckPin(strings.ToLower(cfg.TLSServerPin)); err != nil {
			return fmt.Errorf("client.tls_server_pin: %w", err)
		}
		tlsCfg = tlsauth.ClientConfig(cert, cfg.TLSServerPin)
		id = "tls"
	} else {
		keys, err := auth.LoadKeys(cfg.KeyFile)
		if err != nil {
			return fmt.Errorf("client.key_file: %w", err)
		}
		id = cfg.ClientID
		if id == "" {
			if len(keys) != 1 {
				return fmt.Errorf("client.client_id: required when the key file holds %d keys", len(keys))
			}
			for k := range keys {
				id = k
			}
		}
		var ok bool
		if key, ok = keys[id]; !ok {
			return fmt.Errorf("client.client_id: %q not found in key file", id)
		}
	}
	var users Users
	if cfg.SOCKSUsersFile != "" {
		if users, err = LoadUsers(cfg.SOCKSUsersFile); err != nil {
			return fmt.Errorf("client.socks_users_file: %w", err)
		}
	}
	gw := gwstatus.NewWatcher(cfg.GatewayStatusFile, c.log)
	if old := c.rt.Load(); old != nil && old.gateways.Path == cfg.GatewayStatusFile {
		gw = old.gateways
	}
	rs := &runtimeState{cfg: cfg, id: id, tls: tlsCfg, users: users, gateways: gw}
	if cfg.PaddingBudget > 0 {
		h, err := padding.ForConfig(cfg.PaddingHistograms)
		if err != nil {
			return fmt.Errorf("client.padding_histograms: %w", err)
		}
		pc := wire.PadConfig{Budget: cfg.PaddingBudget, Idle: time.Duration(cfg.PaddingIdle), Hist: &h.Out}
		if rs.pad, err = wire.NewPadder(pc, cfg.PaddingScope == config.PaddingScopeClient); err != nil {
			return fmt.Errorf("client.padding_budget: %w", err)
		}
	}
	if key != nil {
		rs.psk = auth.NoisePSK(key)
	}
	var oldRelays *relaySet
	if old := c.rt.Load(); old != nil {
		oldRelays = old.relays
	}
	if rs.relays, err = newRelaySet(cfg, oldRelays); err != nil {
		return fmt.Errorf("client.server_public_key: %w", err)
	}
	c.rt.Store(rs)
	return nil
}

// ListenLocal opens a plain TCP listener for local applications. Their
// connections get no TCP keepalive (Go's default sets it with four system
// calls per connection): the application is on this box or its LAN, and
// the idle timeout ends relays that go quiet.
func ListenLocal(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}

// ServeSOCKS serves SOCKS5 on ln until ctx ends.
//
// A SOCKS connection that has not made its request yet holds one of at most
// a quarter of max_conns; when they are all held, a new connection takes the
// place of the oldest one without unread input, which is closed. So
// connections that open and say nothing (or trickle their greeting) cannot
// keep the box's applications out for a handshake timeout: a real
// application's request takes a moment, so the oldest one held is almost
// always a stalling one.
func (c *Client) ServeSOCKS(ctx context.Context, ln net.Listener) error {
	return c.serve(ctx, ln, true, c.handleSOCKS)
}

// ServeTransparent serves redirected connections on ln until ctx ends.
func (c *Client) ServeTransparent(ctx context.Context, ln net.Listener) error {
	return c.serve(ctx, ln, false, func(conn *net.TCPConn, rt *runtimeState, _ func()) {
		c.handleTransparent(conn, rt)
	})
}

// serve runs h for every connection ln accepts, within max_conns. With
// handshake, the connection also holds a handshake place (ServeSOCKS) until
// h calls its last argument. The place is taken here, not in h's goroutine:
// an evicted connection must give its max_conns place back at once.
func (c *Client) serve(ctx context.Context, ln net.Listener, handshake bool, h func(*net.TCPConn, *runtimeState, func())) error {
	return acceptloop.Run(ctx, ln, c.log, func(conn net.Conn) {
		rt := c.rt.Load()
		slot := c.conns.Admit(rt.cfg.MaxConns)
		if slot == nil {
			c.metrics.Counter("conns_rejected_limit").Add(1)
			conn.Close()
			return
		}
		tc := conn.(*net.TCPConn)
		done := func() {}
		if handshake {
			share := rt.cfg.MaxConns / 4
			done = c.handshakes.Admit(preauth.AddrOf(conn.RemoteAddr()), share, share,
				func() { slot.Free(); conn.Close() }, func() bool { return preauth.HasInput(tc) })
		}
		go func() {
			defer slot.Done()
			defer conn.Close()
			defer done()
			h(tc, rt, done)
		}()
	})
}

// Active is the number of connections the client relays now.
func (c *Client) Active() int64 { return c.conns.Active() }

// Shutdown waits up to grace for relays to finish, then cuts the rest.
// Connections accepted from then on are closed at once.
func (c *Client) Shutdown(grace time.Duration) {
	c.conns.Drain(grace, func() {
		c.log.Info("shutdown grace over; closing remaining relays", "active", c.conns.Active())
		c.cancelConn()
	})
	c.cancelConn()
}

func (c *Client) socksError(conn *net.TCPConn, kind string, err error, reply byte) {
	c.metrics.Counter("socks_errors").Add(1)
	c.metrics.Counter("socks_errors_" + kind).Add(1)
	c.log.Info("SOCKS request rejected", "remote", conn.RemoteAddr().String(), "kind", kind, "err", err)
	if reply != 0xff {
		socks5.WriteReply(conn, reply, netip.AddrPort{})
	}
}

// handleSOCKS serves one SOCKS5 connection; requested is called once the
// request is read.
func (c *Client) handleSOCKS(conn *net.TCPConn, rt *runtimeState, requested func()) {
	c.metrics.Counter("socks_conns_total").Add(1)
	conn.SetDeadline(time.Now().Add(time.Duration(rt.cfg.HandshakeTimeout)))
	// One read per SOCKS message, not one per field; bytes the application
	// sent behind its request (without waiting for the answer) are relayed
	// first.
	br := socksReaders.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() {
		br.Reset(nil)
		socksReaders.Put(br)
	}()
	methods, err := socks5.ReadGreeting(br)
	if err != nil {
		c.socksError(conn, "malformed", err, 0xff)
		return
	}
	// Only a valid greeting from a client that may use this proxy opens a
	// connection to the server (overlapping with the rest of the SOCKS
	// exchange): a port scan, a stray connection or a client that never
	// authenticates costs the server nothing. With a users file that is
	// after authentication, else at once.
	var pre *pendingDial
	defer func() {
		if pre != nil {
			pre.discard()
		}
	}()
	want := byte(socks5.MethodNoAuth)
	if rt.users != nil {
		want = socks5.MethodUserPass
	}
	offered := false
	for _, m := range methods {
		offered = offered || m == want
	}
	if !offered {
		c.socksError(conn, "no_method", fmt.Errorf("client does not offer method %#x", want), 0xff)
		socks5.WriteMethod(conn, socks5.MethodNone)
		return
	}
	if err := socks5.WriteMethod(conn, want); err != nil {
		return
	}
	if rt.users != nil {
		user, pass, err := socks5.ReadUserPass(br)
		if err != nil {
			c.socksError(conn, "malformed", err, 0xff)
			return
		}
		ok := rt.users.Check(user, pass)
		if !ok {
			// Counted and logged before the refusal is sent, so that
			// whoever has seen the refusal also sees it counted.
			c.metrics.Counter("socks_auth_failures").Add(1)
			c.socksError(conn, "auth", errors.New("bad user name or password"), 0xff)
			socks5.WriteUserPassStatus(conn, false)
			return
		}
		socks5.WriteUserPassStatus(conn, true)
	}
	// Unless the relay depends on the destination (sticky), which is
	// only known from the request.
	if !rt.relays.needsDest() {
		pre = c.startDial(rt, rt.relays.pick(dest.Addr{}, nil))
	}
	req, err := socks5.ReadRequest(br)
	if err != nil {
		var pe *socks5.Error
		if errors.As(err, &pe) {
			kind := "malformed"
			if pe.Reply == socks5.ReplyCmdNotSupported {
				kind = "command"
			} else if pe.Reply == socks5.ReplyAddrTypeNotSupport {
				kind = "address"
			}
			c.socksError(conn, kind, err, pe.Reply)
		} else {
			c.socksError(conn, "malformed", err, 0xff)
		}
		return
	}
	requested()
	if pre == nil {
		pre = c.startDial(rt, rt.relays.pick(req.Dest, nil))
	}
	// The upstream exchange has its own time limits (dial and handshake).
	conn.SetDeadline(time.Time{})
	early := c.early.allowed(time.Now()) && (rt.cfg.SOCKSReply == config.SOCKSReplyEarly ||
		rt.cfg.SOCKSReply == config.SOCKSReplyAuto && c.reached.recent(req.Dest.String(), time.Now()))
	replied := false
	if _, _, err := pre.wait(); err == nil && early {
		// The server connection is up (usually a spare): answer before
		// sending the hello, so the application's first bytes are on their
		// way while the hello goes out.
		if err := socks5.WriteReply(conn, socks5.ReplySucceeded, netip.AddrPort{}); err != nil {
			return
		}
		replied = true
		c.metrics.Counter("socks_early_replies").Add(1)
	}
	up, status, err := c.open(rt, req.Dest, pre, early)
	if err != nil || status != wire.StatusOK {
		if status == wire.StatusOK {
			status = wire.StatusGeneralFailure
		}
		c.upstreamFailed(status, err)
		if replied {
			conn.SetLinger(0) // told it is connected: a reset, as from the far end
		} else {
			socks5.WriteReply(conn, byte(status), netip.AddrPort{})
		}
		return
	}
	defer up.conn.Close()
	if !replied {
		if err := socks5.WriteReply(conn, socks5.ReplySucceeded, netip.AddrPort{}); err != nil {
			return
		}
	}
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.conn.Write(b); err != nil {
			return
		}
		c.counters(up).Add(true, int64(n))
	}
	c.relay(conn, up, rt)
}

// socksReaders buffer the SOCKS exchange: its messages are at most a few
// hundred bytes (a 255-byte name or password).
var socksReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1024) }}

func (c *Client) handleTransparent(conn *net.TCPConn, rt *runtimeState) {
	c.metrics.Counter("transparent_conns_total").Add(1)
	od, err := origdst.Get(conn)
	if err != nil {
		c.metrics.Counter("transparent_errors").Add(1)
		c.log.Warn("transparent connection without original destination", "remote", conn.RemoteAddr().String(), "err", err)
		return
	}
	if local, _ := netip.ParseAddrPort(conn.LocalAddr().String()); local == od {
		c.metrics.Counter("transparent_errors").Add(1)
		c.log.Warn("connection was not redirected (addressed to the listener itself); closing")
		return
	}
	// Nothing to answer: the application believes it is connected already,
	// so its data goes out with the hello (early), unless the server refused
	// early data lately; then it waits in the socket for the answer.
	up, status, err := c.open(rt, dest.FromIP(od), nil, c.early.allowed(time.Now()))
	if err != nil || status != wire.StatusOK {
		c.upstreamFailed(status, err)
		conn.SetLinger(0) // the application sees a reset, as it would from the far end
		return
	}
	defer up.conn.Close()
	c.relay(conn, up, rt)
}

func (c *Client) relay(local *net.TCPConn, up *upstream, rt *runtimeState) {
	c.metrics.Counter("relays_total").Add(1)
	sampler := &metrics.SubflowSampler{Conn: up.raw}
	var far relay.Conn = up.conn
	if up.await != nil {
		// The application was told it is connected: a refusal now, or the
		// upload failing first against a server that hung up, fails the
		// relay, which resets the application's connection.
		far = &relay.Deferred{Conn: up.conn, Await: up.await}
	}
	// Tracked on its relay, which closes it if the relay is found dead:
	// the relay then fails, which resets the application's connection.
	f := &inflight{raw: up.raw}
	up.relay.h.add(f)
	res := relay.Relay(c.connCtx, local, far, time.Duration(rt.cfg.IdleTimeout), c.counters(up), sampler.Sample)
	up.relay.h.remove(f)
	sampler.Record(c.metrics, true)
	c.log.Debug("relay finished", "gateway", up.gwID, "up", res.Up, "down", res.Down, "reason", res.Reason, "err", res.Err)
}

// counters count bytes relayed over up: per gateway and in total.
func (c *Client) counters(up *upstream) relay.Counters {
	return both{up.gateway, total{c.metrics}}
}

type total struct{ m *metrics.Registry }

func (t total) Add(up bool, n int64) {
	if up {
		t.m.Counter("bytes_up").Add(n)
	} else {
		t.m.Counter("bytes_down").Add(n)
	}
}

type both struct{ a, b relay.Counters }

func (x both) Add(up bool, n int64) { x.a.Add(up, n); x.b.Add(up, n) }

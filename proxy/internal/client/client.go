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
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"braid/proxy/internal/acceptloop"
	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/gwstatus"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/origdst"
	"braid/proxy/internal/relay"
	"braid/proxy/internal/sockopt"
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
	pool       *preconnect
}

type runtimeState struct {
	cfg      *config.Client
	id       string
	key      []byte      // auth psk
	tls      *tls.Config // auth tls
	users    Users
	gateways *gwstatus.Watcher
}

// New builds a client from a validated configuration.
func New(cfg *config.Client, log *slog.Logger, m *metrics.Registry) (*Client, error) {
	c := &Client{log: log, metrics: m}
	c.connCtx, c.cancelConn = context.WithCancel(context.Background())
	if err := c.Reload(cfg); err != nil {
		return nil, err
	}
	m.Gauge("conns_active", c.conns.Active)
	c.pool = newPreconnect(c)
	go c.pool.run(c.connCtx)
	return c, nil
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
	c.rt.Store(&runtimeState{cfg: cfg, id: id, key: key, tls: tlsCfg, users: users, gateways: gw})
	return nil
}

// ListenLocal opens a plain TCP listener for local applications.
func ListenLocal(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}

// ServeSOCKS serves SOCKS5 on ln until ctx ends.
func (c *Client) ServeSOCKS(ctx context.Context, ln net.Listener) error {
	return c.serve(ctx, ln, c.handleSOCKS)
}

// ServeTransparent serves redirected connections on ln until ctx ends.
func (c *Client) ServeTransparent(ctx context.Context, ln net.Listener) error {
	return c.serve(ctx, ln, c.handleTransparent)
}

func (c *Client) serve(ctx context.Context, ln net.Listener, h func(*net.TCPConn, *runtimeState)) error {
	return acceptloop.Run(ctx, ln, c.log, func(conn net.Conn) {
		rt := c.rt.Load()
		if !c.conns.Admit(rt.cfg.MaxConns) {
			c.metrics.Counter("conns_rejected_limit").Add(1)
			conn.Close()
			return
		}
		go func() {
			defer c.conns.Done()
			defer conn.Close()
			h(conn.(*net.TCPConn), rt)
		}()
	})
}

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

// pendingDial is a connection to the server being opened while the SOCKS
// exchange with the application is still going on, so the two overlap.
type pendingDial struct {
	done  chan struct{}
	conn  *net.TCPConn
	gwID  string
	err   error
	taken bool
}

func (c *Client) startDial(rt *runtimeState) *pendingDial {
	p := &pendingDial{done: make(chan struct{})}
	if p.conn, p.gwID = c.pool.take(rt); p.conn != nil {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		ctx, cancel := context.WithTimeout(c.connCtx, time.Duration(rt.cfg.DialTimeout))
		defer cancel()
		p.conn, p.gwID, p.err = c.dial(ctx, rt)
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

func (c *Client) handleSOCKS(conn *net.TCPConn, rt *runtimeState) {
	c.metrics.Counter("socks_conns_total").Add(1)
	pre := c.startDial(rt)
	defer pre.discard()
	conn.SetDeadline(time.Now().Add(time.Duration(rt.cfg.HandshakeTimeout)))
	methods, err := socks5.ReadGreeting(conn)
	if err != nil {
		c.socksError(conn, "malformed", err, 0xff)
		return
	}
	want := byte(socks5.MethodNoAuth)
	if rt.users != nil {
		want = socks5.MethodUserPass
	}
	offered := false
	for _, m := range methods {
		offered = offered || m == want
	}
	if !offered {
		socks5.WriteMethod(conn, socks5.MethodNone)
		c.socksError(conn, "no_method", fmt.Errorf("client does not offer method %#x", want), 0xff)
		return
	}
	if err := socks5.WriteMethod(conn, want); err != nil {
		return
	}
	if rt.users != nil {
		user, pass, err := socks5.ReadUserPass(conn)
		if err != nil {
			c.socksError(conn, "malformed", err, 0xff)
			return
		}
		ok := rt.users.Check(user, pass)
		socks5.WriteUserPassStatus(conn, ok)
		if !ok {
			c.metrics.Counter("socks_auth_failures").Add(1)
			c.socksError(conn, "auth", errors.New("bad user name or password"), 0xff)
			return
		}
	}
	req, err := socks5.ReadRequest(conn)
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
	// The upstream exchange has its own time limits (dial and handshake).
	conn.SetDeadline(time.Time{})
	up, status, err := c.open(rt, req.Dest, pre, rt.cfg.SOCKSReply == config.SOCKSReplyEarly)
	if err != nil || status != wire.StatusOK {
		if status == wire.StatusOK {
			status = wire.StatusGeneralFailure
		}
		c.upstreamFailed(status, err)
		socks5.WriteReply(conn, byte(status), netip.AddrPort{})
		return
	}
	defer up.conn.Close()
	if err := socks5.WriteReply(conn, socks5.ReplySucceeded, netip.AddrPort{}); err != nil {
		return
	}
	conn.SetDeadline(time.Time{})
	c.relay(conn, up, rt)
}

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
	// so its data goes out with the hello (early).
	up, status, err := c.open(rt, dest.FromIP(od), nil, true)
	if err != nil || status != wire.StatusOK {
		c.upstreamFailed(status, err)
		conn.SetLinger(0) // the application sees a reset, as it would from the far end
		return
	}
	defer up.conn.Close()
	c.relay(conn, up, rt)
}

type upstream struct {
	conn    relay.Conn
	raw     *net.TCPConn
	gateway *metrics.Gateway
	gwID    string
	// await, if set, reads and checks the server's answer, which has not
	// arrived yet (early data); nothing is relayed back before it.
	await func() error
}

func (c *Client) relay(local *net.TCPConn, up *upstream, rt *runtimeState) {
	c.metrics.Counter("relays_total").Add(1)
	sampler := &metrics.SubflowSampler{Conn: up.raw}
	var far relay.Conn = up.conn
	if up.await != nil {
		far = &relay.Deferred{Conn: up.conn, Await: func() error {
			err := up.await()
			if err != nil {
				// The application was told it is connected: a reset,
				// not a clean end of stream, tells it otherwise.
				local.SetLinger(0)
			}
			return err
		}}
	}
	res := relay.Relay(c.connCtx, local, far, time.Duration(rt.cfg.IdleTimeout), both{up.gateway, total{c.metrics}}, sampler.Sample)
	sampler.Record(c.metrics, true)
	c.log.Debug("relay finished", "gateway", up.gwID, "up", res.Up, "down", res.Down, "reason", res.Reason, "err", res.Err)
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
func (c *Client) open(rt *runtimeState, d dest.Addr, pre *pendingDial, early bool) (*upstream, wire.Status, error) {
	cfg := rt.cfg
	var (
		ch          *auth.ClientHello
		earlySealer *wire.Sealer
		first       []byte
		err         error
	)
	if rt.tls == nil {
		var flags byte
		if !cfg.Encrypt {
			flags |= auth.FlagPlaintext
		}
		if early {
			flags |= auth.FlagEarlyData
		}
		if ch, err = auth.NewClientHello(rt.id, rt.key, flags, time.Now()); err != nil {
			return nil, wire.StatusGeneralFailure, err
		}
		key, err := auth.EarlyKey(rt.key, ch)
		if err != nil {
			return nil, wire.StatusGeneralFailure, err
		}
		earlyAEAD, _ := wire.NewAEAD(key)
		earlySealer = wire.NewSealer(earlyAEAD)
		first = earlySealer.Append(append([]byte(nil), ch.Raw...), 0, wire.AppendRequest(nil, d))
	}

	t0 := time.Now()
	if pre == nil {
		pre = c.startDial(rt)
	}
	raw, gwID, err := pre.wait()
	t1 := time.Now()
	if err != nil {
		c.metrics.Counter("upstream_dial_failures").Add(1)
		return nil, wire.StatusNetUnreachable, fmt.Errorf("connecting to server %s: %w", cfg.Server, err)
	}
	gw := c.metrics.Gateway(gwID)
	gw.Conns.Add(1)
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
		up     = &upstream{raw: raw, gateway: gw, gwID: gwID}
		answer func() (wire.Status, error)
	)
	if rt.tls != nil {
		tc, err := c.openTLS(rt, raw, d)
		if err != nil {
			return nil, wire.StatusGeneralFailure, err
		}
		up.conn = tc
		answer = func() (wire.Status, error) {
			var rep [2]byte
			if _, err := io.ReadFull(tc, rep[:]); err != nil {
				return wire.StatusGeneralFailure, fmt.Errorf("reading reply: %w", err)
			}
			return wire.ParseReply(rep[:])
		}
	} else {
		if _, err := raw.Write(first); err != nil {
			c.metrics.Counter("upstream_dial_failures").Add(1)
			return nil, wire.StatusNetUnreachable, fmt.Errorf("sending hello to %s: %w", cfg.Server, err)
		}
		var wc *wire.Conn
		up.conn = raw
		if cfg.Encrypt {
			wc = wire.NewConn(raw, nil, earlySealer)
			up.conn = wc
		}
		answer = func() (wire.Status, error) {
			ns, status, err := c.serverHello(rt, raw, ch)
			if err != nil {
				return status, err
			}
			c2s, s2c, err := auth.SessionKeys(rt.key, ch, ns)
			if err != nil {
				return wire.StatusGeneralFailure, err
			}
			s2cAEAD, _ := wire.NewAEAD(s2c)
			opener := wire.NewOpener(s2cAEAD)
			_, reply, err := opener.ReadFrame(raw, nil)
			if err != nil {
				return wire.StatusGeneralFailure, fmt.Errorf("reading reply: %w", err)
			}
			switch {
			case wc == nil: // plaintext relay
			case early:
				wc.SetOpener(opener)
			default:
				// The data waited for the answer: both directions use keys
				// that include the server's nonce.
				c2sAEAD, _ := wire.NewAEAD(c2s)
				up.conn = wire.NewConn(raw, opener, wire.NewSealer(c2sAEAD))
			}
			return wire.ParseReply(reply)
		}
	}
	if early {
		ok = true
		raw.SetWriteDeadline(time.Time{})
		up.await = func() error {
			status, err := answer()
			if err == nil && status != wire.StatusOK {
				err = fmt.Errorf("server answered %s", status)
			}
			if err != nil {
				c.upstreamFailed(status, err)
				return err
			}
			setUp()
			return nil
		}
		return up, wire.StatusOK, nil
	}
	status, err := answer()
	if err != nil || status != wire.StatusOK {
		return nil, status, err
	}
	ok = true
	raw.SetWriteDeadline(time.Time{})
	setUp()
	return up, wire.StatusOK, nil
}

// serverHello reads and checks the server's hello and returns its nonce.
func (c *Client) serverHello(rt *runtimeState, raw *net.TCPConn, ch *auth.ClientHello) ([auth.NonceLen]byte, wire.Status, error) {
	sh := make([]byte, auth.ServerHelloLen)
	if _, err := io.ReadFull(raw, sh); err != nil {
		if isConnectError(err) { // with Fast Open, connect errors surface here
			c.metrics.Counter("upstream_dial_failures").Add(1)
			return [auth.NonceLen]byte{}, wire.StatusNetUnreachable, fmt.Errorf("connecting to server %s: %w", rt.cfg.Server, err)
		}
		c.metrics.Counter("upstream_auth_failures").Add(1)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			err = errors.New("server closed the connection during the handshake (wrong key, unknown client id or clock skew?)")
		}
		c.log.Error("server handshake failed", "err", err)
		return [auth.NonceLen]byte{}, wire.StatusGeneralFailure, err
	}
	ns, err := auth.CheckServerHello(rt.key, ch, sh)
	if err != nil {
		c.metrics.Counter("upstream_auth_failures").Add(1)
		c.log.Error("server handshake failed", "err", err)
		return ns, wire.StatusGeneralFailure, err
	}
	return ns, wire.StatusOK, nil
}

// upstreamFailed counts and logs a connection the server refused or could
// not set up.
func (c *Client) upstreamFailed(status wire.Status, err error) {
	c.metrics.Counter("upstream_refused").Add(1)
	c.log.Info("upstream refused or failed", "status", status.String(), "err", err)
}

// openTLS authenticates with mutual TLS 1.3 (pinned certificates) over raw
// and names d: one length byte, then the wire request. The answer is the
// 2-byte wire reply that follows.
func (c *Client) openTLS(rt *runtimeState, raw *net.TCPConn, d dest.Addr) (*tls.Conn, error) {
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

// dial opens the MPTCP connection, binding the first subflow to the best
// gateway's source address, or racing the two best.
func (c *Client) dial(ctx context.Context, rt *runtimeState) (*net.TCPConn, string, error) {
	n := 1
	if rt.cfg.Race {
		n = 2
	}
	gws := rt.gateways.Best(n)
	if len(gws) == 0 {
		conn, err := c.dialFrom(ctx, rt, netip.Addr{})
		return conn, "default", err
	}
	if len(gws) == 1 {
		conn, err := c.dialFrom(ctx, rt, gws[0].Source)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("dial through best gateway failed; using the kernel's choice", "gateway", gws[0].ID, "err", err)
			conn, err = c.dialFrom(ctx, rt, netip.Addr{})
			return conn, "default", err
		}
		return conn, gws[0].ID, err
	}
	return c.race(ctx, rt, gws)
}

type dialResult struct {
	conn *net.TCPConn
	gw   gwstatus.Gateway
	err  error
}

func (c *Client) race(ctx context.Context, rt *runtimeState, gws []gwstatus.Gateway) (*net.TCPConn, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan dialResult, len(gws))
	start := func(g gwstatus.Gateway) {
		go func() {
			conn, err := c.dialFrom(ctx, rt, g.Source)
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
		case r := <-results:
			pending--
			if r.err == nil {
				// Close late winners in the background.
				left := pending
				go func() {
					for ; left > 0; left-- {
						if l := <-results; l.conn != nil {
							l.conn.Close()
						}
					}
				}()
				c.metrics.Gateway(r.gw.ID).RaceWins.Add(1)
				return r.conn, r.gw.ID, nil
			}
			errs = append(errs, fmt.Errorf("gateway %s: %w", r.gw.ID, r.err))
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

func (c *Client) dialFrom(ctx context.Context, rt *runtimeState, src netip.Addr) (*net.TCPConn, error) {
	d := net.Dialer{}
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
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	conn, err := d.DialContext(ctx, "tcp", rt.cfg.Server)
	if err != nil {
		return nil, err
	}
	return conn.(*net.TCPConn), nil
}

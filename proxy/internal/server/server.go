// Package server is the relay end of braid-proxy: it accepts MPTCP
// connections from client boxes, authenticates them (pre-shared key, mutual,
// replay-protected), applies the destination policy, resolves names,
// connects, and relays with encryption.
//
// Nothing unauthenticated gets an answer: a connection whose hello does not
// verify is closed without a byte sent back, so the server cannot be probed
// or used as an open proxy. Every failure is counted and logged (rate
// limited, without key material or destinations at info level).
package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"braid/proxy/internal/acceptloop"
	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/padding"
	"braid/proxy/internal/policy"
	"braid/proxy/internal/preauth"
	"braid/proxy/internal/relay"
	"braid/proxy/internal/sockopt"
	"braid/proxy/internal/tlsauth"
	"braid/proxy/internal/wire"
)

// replayPerClient bounds each client id's share of the replay cache: this
// many of its hellos per 2·max_clock_skew window (about 1,100 per second at
// the default skew). Past it, its hellos with early data are answered
// "retry without" and those without are accepted, its oldest nonce
// forgotten (auth.ReplayCache). Other ids keep their shares.
const replayPerClient = 1 << 16

// Server is a running relay.
type Server struct {
	log     *slog.Logger
	metrics *metrics.Registry
	replay  *auth.ReplayCache
	rt      atomic.Pointer[runtimeState]

	connCtx     context.Context // cancelled to cut live relays
	cancelConn  context.CancelFunc
	quietCtx    context.Context // cancelled at shutdown: closes connections yet to speak
	cancelQuiet context.CancelFunc
	conns       acceptloop.Conns
	preauth     *preauth.Limiter
	self        policy.HostAddrs // this host's addresses, refused as destinations

	mu        sync.Mutex
	perClient map[string]int

	// Target, if set, is the only destination: every request connects
	// there, whatever it names, and the policy is not consulted (a Tor
	// pluggable transport's server forwards to its bridge's ORPort, usually
	// on loopback). Set it before Serve.
	Target netip.AddrPort
	// DialTarget, if set, opens the connection to Target in place of the
	// server's own dial; it gets the client's address (the remote address
	// of its connection). The Tor transport's server uses it to name the
	// client to the bridge's Extended ORPort. Set it before Serve.
	DialTarget func(ctx context.Context, client netip.AddrPort) (*net.TCPConn, error)

	failLog rateLimiter
	padCtrs wire.PadCounters
	unauth  unauthClose // this server's pre-auth deadlines and failed-hello close

	// Resolver and Dial are replaceable for tests.
	Resolver *net.Resolver
}

// runtimeState is what a reload replaces atomically.
type runtimeState struct {
	cfg      *config.Server
	verifier *auth.Verifier    // auth psk
	tls      *tls.Config       // auth tls
	peers    map[string]string // auth tls: pin -> client id
	policy   *policy.Policy
	pad      *wire.Padder // adaptive padding of the download; nil = off
}

// SetReplayShare sets each client id's share of the replay cache
// (replayPerClient by default): tests use a small one to reach it.
func (s *Server) SetReplayShare(n int) { s.replay.SetPerID(n) }

// New builds a server from a validated configuration.
func New(cfg *config.Server, log *slog.Logger, m *metrics.Registry) (*Server, error) {
	s := &Server{
		log:       log,
		metrics:   m,
		replay:    auth.NewReplayCache(2*time.Duration(cfg.MaxClockSkew), replayPerClient),
		perClient: map[string]int{},
		Resolver:  net.DefaultResolver,
		failLog:   rateLimiter{perSecond: 10},
		padCtrs:   wire.NewPadCounters(m.Counter),
		unauth:    newUnauthClose(),
	}
	s.preauth = preauth.New(func(reason string) {
		m.Counter("conns_evicted_preauth_" + reason).Add(1)
	})
	s.connCtx, s.cancelConn = context.WithCancel(context.Background())
	s.quietCtx, s.cancelQuiet = context.WithCancel(context.Background())
	if err := s.Reload(cfg); err != nil {
		return nil, err
	}
	m.Gauge("conns_active", s.conns.Active)
	m.Gauge("conns_preauth", s.preauth.Active)
	m.Gauge("replay_cache_entries", func() int64 { return int64(s.replay.Len()) })
	m.CounterFunc("replay_cache_forgotten", s.replay.Forgotten)
	m.Gauge("padding_groups", func() int64 {
		if rt := s.rt.Load(); rt != nil && rt.pad != nil {
			return int64(rt.pad.Groups())
		}
		return 0
	})
	return s, nil
}

// Check loads everything a server with cfg would run on (keys or
// certificates, destination policy, padding histograms) and starts
// nothing: what "braid-proxy check server" reports.
func Check(cfg *config.Server) error {
	s, err := New(cfg, slog.New(slog.DiscardHandler), metrics.New())
	if err != nil {
		return err
	}
	s.cancelConn()
	s.cancelQuiet()
	return nil
}

// Reload applies a new configuration (keys, policy, limits, timeouts). The
// listen address is only read at start.
func (s *Server) Reload(cfg *config.Server) error {
	pol, err := policy.New(cfg.AllowCIDRs, cfg.AllowList, cfg.RefuseCIDRs)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	pol.Self = s.self.Get
	rt := &runtimeState{cfg: cfg, policy: pol}
	if cfg.PaddingBudget > 0 {
		h, err := padding.ForConfig(cfg.PaddingHistograms)
		if err != nil {
			return fmt.Errorf("server.padding_histograms: %w", err)
		}
		pc := wire.PadConfig{Budget: cfg.PaddingBudget, Idle: time.Duration(cfg.PaddingIdle), Hist: &h.In}
		if rt.pad, err = wire.NewPadder(pc, cfg.PaddingScope == config.PaddingScopeClient); err != nil {
			return fmt.Errorf("server.padding_budget: %w", err)
		}
	}
	switch cfg.Auth {
	case "tls":
		cert, err := tlsauth.LoadCert(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("server.tls_key_file: %w", err)
		}
		if rt.peers, err = tlsauth.LoadPeers(cfg.TLSPeersFile); err != nil {
			return fmt.Errorf("server.tls_peers_file: %w", err)
		}
		rt.tls = tlsauth.ServerConfig(cert, rt.peers)
	default:
		keys, err := auth.LoadKeys(cfg.KeyFile)
		if err != nil {
			return fmt.Errorf("server.key_file: %w", err)
		}
		var static *auth.DHKey
		if cfg.StaticKeyFile != "" {
			k, err := auth.LoadStaticKey(cfg.StaticKeyFile)
			if err != nil {
				return fmt.Errorf("server.static_key_file: %w", err)
			}
			static = &k
		}
		s.replay.SetTTL(2 * time.Duration(cfg.MaxClockSkew))
		rt.verifier = &auth.Verifier{PSKs: auth.PSKs(keys), Static: static, MaxSkew: time.Duration(cfg.MaxClockSkew), Replay: s.replay}
	}
	s.rt.Store(rt)
	return nil
}

// Listen opens the MPTCP listener, with TCP Fast Open when the kernel
// allows it (logged otherwise). Accepted connections get TCP keepalive only
// when relays have no idle timeout (see config.Common.RelayKeepAlive).
func Listen(ctx context.Context, addr string, log *slog.Logger) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1, Control: func(_, _ string, c syscall.RawConn) error {
		if err := sockopt.Listener(c); err != nil {
			log.Warn("TCP Fast Open unavailable on the listener", "err", err)
		}
		return nil
	}}
	if v := sockopt.FastOpenSysctl(); v >= 0 && v&2 == 0 {
		log.Info("server-side TCP Fast Open is off (sysctl net.ipv4.tcp_fastopen lacks bit 2); connection setup costs one more round trip", "tcp_fastopen", v)
	}
	lc.SetMultipathTCP(true)
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve accepts connections until ctx is cancelled or ln fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return acceptloop.Run(ctx, ln, s.log, func(c net.Conn) {
		rt := s.rt.Load()
		slot := s.conns.Admit(rt.cfg.MaxConns)
		if slot == nil {
			s.metrics.Counter("conns_rejected_limit").Add(1)
			c.Close()
			return
		}
		// Unauthenticated connections get a bounded share of max_conns,
		// and one source a bounded share of that; a new one takes the
		// oldest one's slot when a share is full (see package preauth).
		// After the max_conns check: a connection refused there must not
		// have evicted one. An evicted connection gives its max_conns
		// place back at once, not when its goroutine gets to run.
		tc := c.(*net.TCPConn)
		release := s.preauth.Admit(preauth.AddrOf(c.RemoteAddr()), rt.cfg.PreauthLimit(),
			rt.cfg.MaxPreauthPerSource, func() { slot.Free(); c.Close() },
			func() bool { return preauth.HasInput(tc) })
		go func() {
			defer slot.Done()
			defer release()
			s.handle(tc, rt, release)
		}()
	})
}

// Shutdown waits up to grace for relays to finish, then cuts the rest.
// Connections accepted from then on are closed at once.
func (s *Server) Shutdown(grace time.Duration) {
	s.cancelQuiet()
	s.conns.Drain(grace, func() {
		s.log.Info("shutdown grace over; closing remaining relays", "active", s.conns.Active())
		s.cancelConn()
	})
	s.cancelConn()
}

func (s *Server) authFailure(remote net.Addr, reason string, err error, id string) {
	s.metrics.Counter("auth_failures").Add(1)
	s.metrics.Counter("auth_failures_" + reason).Add(1)
	if s.failLog.allow() {
		args := []any{"remote", remote.String(), "reason", reason, "err", err}
		if id != "" {
			args = append(args, "client_id", id)
		}
		s.log.Warn("authentication failed; connection closed", args...)
	} else {
		s.metrics.Counter("log_suppressed").Add(1)
	}
}

// session is an authenticated connection whose request has been read.
type session struct {
	id        string
	req       []byte
	plaintext bool                    // PSK client asked for a plaintext relay
	reply     func(wire.Status) error // sends the server's answer
	data      func() relay.Conn       // the stream to relay after a positive answer
	// okWithData, if set, returns the stream with a positive answer held
	// back (wire.Conn.Hold) to leave with the destination's first bytes:
	// the client sent early data and relays nothing back before those
	// bytes, so the answer costs no write and no wake-up of the client of
	// its own, and the destination starts on the request first.
	okWithData func() *wire.Conn
	// leftover is the plaintext relay data read with the handshake, to go
	// to the destination before the rest.
	leftover []byte
	// release returns the handshake's read buffer unless data or
	// okWithData handed it on.
	release func()
	// rt is the configuration the hello was checked against: the one
	// current when it arrived, not when the connection was accepted.
	rt *runtimeState
}

// answerHold bounds how long a positive answer waits for the destination's
// first bytes: long enough for a nearby destination to answer, short enough
// that the client's setup-time metrics stay meaningful when it does not.
const answerHold = 10 * time.Millisecond

// handle serves one connection; authenticated is called once the peer has
// authenticated (it gives back the pre-authentication slot).
func (s *Server) handle(c *net.TCPConn, rt *runtimeState, authenticated func()) {
	var data relay.Conn
	defer func() {
		// A relay's end may leave the socket lingering for padding
		// (wire's linger.go): it then closes itself.
		if wc, ok := data.(*wire.Conn); !ok || !wc.ClosesInBackground() {
			c.Close()
		}
	}()
	cfg := rt.cfg
	s.metrics.Counter("conns_total").Add(1)
	// Silent for at most first_byte_timeout (a client's spare waits for
	// its next connection), then handshake_timeout for the rest.
	c.SetDeadline(time.Now().Add(s.unauth.deadline(cfg.FirstByteTimeout)))

	// A connection that has not spoken yet (a client's spare, kept ready
	// for its next connection) carries nothing: at shutdown it is closed at
	// once instead of holding the drain until its handshake timeout.
	spoke := context.AfterFunc(s.quietCtx, func() { c.Close() })
	var sess *session
	if rt.tls != nil {
		sess = s.acceptTLS(c, rt, spoke)
	} else {
		sess = s.acceptPSK(c, rt, spoke)
	}
	if sess == nil {
		return
	}
	if sess.rt != nil {
		rt, cfg = sess.rt, sess.rt.cfg
	}
	authenticated()
	// The pre-authentication deadline ends here: resolving and connecting
	// the destination have dial_timeout, and the answer gets its own
	// deadline once it is ready.
	c.SetDeadline(time.Time{})
	if sess.release != nil {
		defer sess.release()
	}
	log := &connLog{base: s.log, id: sess.id, remote: c.RemoteAddr()}

	status := wire.StatusOK
	var destConn *net.TCPConn
	d, perr := wire.ParseRequest(sess.req)
	switch {
	case perr != nil:
		s.metrics.Counter("bad_requests").Add(1)
		log.Warn("malformed request", "err", perr)
		status = wire.StatusGeneralFailure
	case d.IP.IsValid() && d.IP.IsUnspecified():
		// A client's health check (no server connects there): the
		// authenticated answer is all it wants; not logged, not a
		// refused destination.
		s.metrics.Counter("health_probes").Add(1)
		status = wire.StatusNotAllowed
	case sess.plaintext && !cfg.AllowPlaintext:
		s.metrics.Counter("refused_plaintext").Add(1)
		log.Warn("client asked for a plaintext relay; refused (allow_plaintext is false)")
		status = wire.StatusNotAllowed
	case !s.acquire(sess.id, cfg.MaxConnsPerClient):
		s.metrics.Counter("refused_client_limit").Add(1)
		log.Warn("per-client connection limit reached", "limit", cfg.MaxConnsPerClient)
		status = wire.StatusNotAllowed
	default: // acquire succeeded
		defer s.release(sess.id)
		ctx, cancel := context.WithTimeout(s.connCtx, time.Duration(cfg.DialTimeout))
		destConn, status = s.connect(ctx, rt, d, log)
		cancel()
	}
	if destConn != nil {
		defer destConn.Close()
	}
	var ctrs relay.Counters = byteCounter{s.metrics}
	c.SetWriteDeadline(time.Now().Add(time.Duration(cfg.HandshakeTimeout)))
	if status == wire.StatusOK && sess.okWithData != nil {
		wc := sess.okWithData()
		if wc == nil {
			log.Error("writing server hello failed")
			return
		}
		data = wc
	} else {
		if err := sess.reply(status); err != nil {
			log.Debug("writing reply", "err", err)
			return
		}
		if status != wire.StatusOK {
			discardEarlyData(c)
			return
		}
		data = sess.data()
	}
	c.SetDeadline(time.Time{})
	if len(sess.leftover) > 0 {
		if _, err := destConn.Write(sess.leftover); err != nil {
			log.Debug("forwarding early data", "err", err)
			return
		}
		ctrs.Add(true, int64(len(sess.leftover)))
	}
	if cfg.RelayKeepAlive() >= 0 {
		c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true})
	}

	s.metrics.Counter("relays_total").Add(1)
	sampler := &metrics.SubflowSampler{Conn: c}
	res := relay.Relay(s.connCtx, data, destConn, time.Duration(cfg.IdleTimeout), ctrs, sampler.Sample)
	sampler.Record(s.metrics, false)
	log.Debug("relay finished", "up", res.Up, "down", res.Down, "reason", res.Reason, "err", res.Err)
	if res.Err != nil && errors.Is(res.Err, wire.ErrAuth) {
		s.metrics.Counter("frame_auth_failures").Add(1)
		log.Warn("relay frame failed authentication; connection closed")
	}
}

// acceptPSK runs the pre-shared-key handshake (see package auth): it
// verifies the client's first message, which carries the request, and
// prepares the answer and the relay's keys.
//
// It reads through a buffer that the relay then keeps reading from, so the
// hello and early data that arrive together take one system call.
func (s *Server) acceptPSK(c *net.TCPConn, rt *runtimeState, spoke func() bool) *session {
	br := wire.NewReader(c)
	handedOn := false
	defer func() {
		if !handedOn {
			wire.PutReader(br)
		}
	}()
	_, err := br.Peek(1)
	spokeFirst := err == nil
	if spokeFirst {
		c.SetDeadline(time.Now().Add(s.unauth.deadline(rt.cfg.HandshakeTimeout)))
	}
	var hello [auth.ClientHelloLen]byte
	if err == nil {
		_, err = io.ReadFull(br, hello[:])
	}
	if !spoke() || errors.Is(err, io.EOF) {
		// Closed before sending a byte (port scan, health check, a
		// client's unused spare), or closed by us at shutdown.
		s.metrics.Counter("conns_empty").Add(1)
		return nil
	}
	if err != nil {
		reason := "malformed" // closed within the hello
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout() && !spokeFirst:
			reason = "first_byte_timeout" // a client that never spoke
		case errors.As(err, &ne) && ne.Timeout():
			reason = "handshake_timeout" // slowloris
		}
		s.authFailure(c.RemoteAddr(), reason, err, "")
		return nil
	}
	// The keys current now: a client's spare, accepted before a reload that
	// revoked its key, must not open with the old key set.
	if cur := s.rt.Load(); cur.verifier != nil {
		rt = cur
	}
	acc, err := rt.verifier.Verify(hello[:])
	if errors.Is(err, auth.ErrEarlyDataRefused) {
		// Authentic and fresh, but its early data cannot be vouched for:
		// say so (under the handshake, so only the key holder reads it) and
		// let the client come back without; nothing was acted on.
		s.metrics.Counter("hellos_early_data_refused").Add(1)
		if s.failLog.allow() {
			s.log.Warn("early data refused: client id over its replay share; answered retry without",
				"remote", c.RemoteAddr().String(), "client_id", acc.ID)
		} else {
			s.metrics.Counter("log_suppressed").Add(1)
		}
		if sh, _, err := acc.ServerHello(wire.AppendReply(nil, wire.StatusRetryWithoutEarlyData)); err == nil {
			c.Write(sh)
		}
		discardEarlyData(c)
		return nil
	}
	if err != nil {
		reason, id := "bad_hello", ""
		if acc != nil {
			id = acc.ID // authenticated, but stale or replayed
		}
		switch {
		case errors.Is(err, auth.ErrReplay):
			reason = "replay"
		case errors.Is(err, auth.ErrClockSkew):
			reason = "clock_skew"
		case errors.Is(err, auth.ErrMalformed):
			reason = "malformed"
		}
		s.authFailure(c.RemoteAddr(), reason, err, id)
		s.unauth.drain(s.quietCtx, c, br) // until the handshake deadline (unauthclose.go)
		return nil
	}
	// The hello's random tail (auth.MaxHelloPad at most), under the
	// handshake deadline.
	if _, err := io.CopyN(io.Discard, br, int64(acc.Pad)); err != nil {
		s.authFailure(c.RemoteAddr(), "malformed", fmt.Errorf("hello's padding: %w", err), acc.ID)
		return nil
	}
	var keys auth.SessionKeys
	// A client that drops padding frames learns that this server does too
	// (older clients refuse the reply flag, so only those that asked).
	peerPads := acc.Flags&auth.FlagPadding != 0
	// This server pads after a connection's end only towards a client
	// that drains, and drains only a client that may pad after its end
	// (wire's linger.go).
	linger := peerPads && rt.pad != nil && acc.Flags&auth.FlagDrain != 0
	drain := peerPads && acc.Flags&auth.FlagLinger != 0
	var rflags byte
	if peerPads {
		rflags = wire.ReplyFlagPadding
	}
	if linger {
		rflags |= wire.ReplyFlagLinger
	}
	if drain {
		rflags |= wire.ReplyFlagDrain
	}
	answer := func(st wire.Status) ([]byte, error) {
		sh, k, err := acc.ServerHello(wire.AppendReplyFlags(nil, st, rflags))
		keys = k
		if err == nil {
			s.metrics.Counter("handshake_padding_bytes_sent").Add(int64(len(sh) - acc.AnswerLen()))
		}
		return sh, err
	}
	plaintext := acc.Flags&auth.FlagPlaintext != 0
	sess := &session{
		id:        acc.ID,
		req:       acc.Request,
		plaintext: plaintext,
		rt:        rt,
		reply: func(st wire.Status) error {
			sh, err := answer(st)
			if err != nil {
				return err
			}
			_, err = c.Write(sh)
			return err
		},
	}
	if plaintext {
		// The relay splices the raw socket; what the buffer already holds
		// goes first.
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			sess.leftover = append([]byte(nil), b...)
		}
		sess.data = func() relay.Conn { return c }
		return sess
	}
	handedOn = true
	pending := br
	take := func() *bufio.Reader { b := pending; pending = nil; return b }
	sess.release = func() {
		if b := take(); b != nil {
			wire.PutReader(b)
		}
	}
	early := acc.Flags&auth.FlagEarlyData != 0
	conn := func() *wire.Conn {
		s2c, _ := wire.NewAEAD(keys.S2C)
		c2s, _ := wire.NewAEAD(keys.C2S)
		opener := wire.NewOpener(c2s)
		if early {
			// The client's data up to its key update is under the early
			// key; then the session key.
			ek, _ := wire.NewAEAD(acc.EarlyKey())
			opener = wire.NewOpener(ek)
			opener.SetNext(c2s)
		}
		wc := wire.NewConnReader(c, take(), opener, wire.NewSealer(s2c))
		wc.SetPadCounters(s.padCtrs)
		if linger {
			wc.LingerForPadding()
		}
		if drain {
			wc.DrainOnClose()
		}
		if rt.pad != nil {
			if !peerPads {
				s.metrics.Counter("padding_peer_unsupported").Add(1)
			} else if err := rt.pad.Start(wc, acc.ID); err != nil { // grouped per client id
				s.log.Warn("adaptive padding not started", "err", err)
			} else {
				s.metrics.Counter("padding_conns").Add(1)
				s.log.Debug("adaptive padding on", "client_id", acc.ID, "budget", rt.pad.Config.Budget)
			}
		}
		return wc
	}
	sess.data = func() relay.Conn { return conn() }
	if early {
		// The client relays nothing back before the answer: it can wait
		// for the destination's first bytes.
		sess.okWithData = func() *wire.Conn {
			sh, err := answer(wire.StatusOK)
			if err != nil {
				return nil
			}
			wc := conn()
			wc.Hold(sh, answerHold)
			return wc
		}
	}
	return sess
}

// Bounds on what discardEarlyData reads after a negative answer.
const (
	discardLimit = 256 * 1024
	discardTime  = 2 * time.Second
)

// discardEarlyData half-closes c after a negative answer and reads what the
// client sent before it saw the answer (its early data) until the client
// closes too. Closing with unread data would send a reset, which can destroy
// the answer before the client reads it.
func discardEarlyData(c *net.TCPConn) {
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(discardTime))
	io.Copy(io.Discard, io.LimitReader(c, discardLimit))
}

// acceptTLS runs mutual TLS 1.3 with pinned certificates, then reads the
// request (one length byte, then the wire request).
func (s *Server) acceptTLS(c *net.TCPConn, rt *runtimeState, spoke func() bool) *session {
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		var ne net.Error
		if !spoke() || errors.Is(err, io.EOF) || !errors.As(err, &ne) || !ne.Timeout() {
			s.metrics.Counter("conns_empty").Add(1)
		} else {
			s.authFailure(c.RemoteAddr(), "first_byte_timeout", err, "")
		}
		return nil
	}
	// The peers and policy current now, as in acceptPSK: a connection
	// accepted before a reload that revoked its peer must not pass with the
	// old pins.
	if cur := s.rt.Load(); cur.tls != nil {
		rt = cur
	}
	c.SetDeadline(time.Now().Add(s.unauth.deadline(rt.cfg.HandshakeTimeout)))
	tc := tls.Server(&prefixConn{TCPConn: c, prefix: first[:]}, rt.tls)
	err := tc.Handshake()
	if !spoke() {
		s.metrics.Counter("conns_empty").Add(1)
		return nil
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			s.metrics.Counter("conns_empty").Add(1)
			return nil
		}
		s.authFailure(c.RemoteAddr(), "tls", err, "")
		return nil
	}
	id := tlsauth.PeerID(tc.ConnectionState(), rt.peers)
	var n [1]byte
	if _, err := io.ReadFull(tc, n[:]); err != nil {
		s.metrics.Counter("bad_requests").Add(1)
		return nil
	}
	req := make([]byte, n[0])
	if _, err := io.ReadFull(tc, req); err != nil {
		s.metrics.Counter("bad_requests").Add(1)
		return nil
	}
	return &session{
		id:  id,
		rt:  rt,
		req: req,
		reply: func(st wire.Status) error {
			_, err := tc.Write(wire.AppendReply(nil, st))
			return err
		},
		data: func() relay.Conn { return tc },
	}
}

// prefixConn returns prefix before what the connection reads.
type prefixConn struct {
	*net.TCPConn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.TCPConn.Read(b)
}

type byteCounter struct{ m *metrics.Registry }

func (b byteCounter) Add(up bool, n int64) {
	if up {
		b.m.Counter("bytes_up").Add(n)
	} else {
		b.m.Counter("bytes_down").Add(n)
	}
}

func (s *Server) acquire(id string, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient[id] >= limit {
		return false
	}
	s.perClient[id]++
	return true
}

func (s *Server) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient[id]--; s.perClient[id] <= 0 {
		delete(s.perClient, id)
	}
}

// connect applies the policy, resolves and dials; it returns the status to
// send back.
func (s *Server) connect(ctx context.Context, rt *runtimeState, d dest.Addr, log *connLog) (*net.TCPConn, wire.Status) {
	var candidates []netip.Addr
	if s.Target.IsValid() && s.DialTarget != nil {
		var client netip.AddrPort
		if ta, ok := log.remote.(*net.TCPAddr); ok {
			client = ta.AddrPort()
			client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
		}
		c, err := s.DialTarget(ctx, client)
		if err != nil {
			s.metrics.Counter("connect_failures").Add(1)
			log.Debug("connect failed", "err", err)
			return nil, statusFor(err)
		}
		return c, wire.StatusOK
	}
	if s.Target.IsValid() {
		candidates, d = []netip.Addr{s.Target.Addr()}, dest.FromIP(s.Target)
	} else if d.IsName() {
		if err := rt.policy.CheckName(d.Name); err != nil {
			s.refused(log, err)
			return nil, wire.StatusNotAllowed
		}
		rctx, cancel := context.WithTimeout(ctx, time.Duration(rt.cfg.ResolveTimeout))
		ips, err := s.Resolver.LookupNetIP(rctx, "ip", d.Name)
		cancel()
		if err != nil || len(ips) == 0 {
			s.metrics.Counter("resolve_failures").Add(1)
			// The resolver's error names the destination: only at debug
			// level, as every destination is.
			log.Info("name resolution failed", "reason", resolveFailure(err))
			log.Debug("name resolution failed", "err", err)
			return nil, wire.StatusHostUnreachable
		}
		var lastErr error
		for _, ip := range ips {
			if err := rt.policy.CheckIP(ip, true); err != nil {
				lastErr = err
				continue
			}
			candidates = append(candidates, ip.Unmap())
		}
		if len(candidates) == 0 {
			s.refused(log, lastErr)
			return nil, wire.StatusNotAllowed
		}
	} else {
		if err := rt.policy.CheckIP(d.IP, false); err != nil {
			s.refused(log, err)
			return nil, wire.StatusNotAllowed
		}
		candidates = []netip.Addr{d.IP}
	}
	if len(candidates) > 4 {
		candidates = candidates[:4]
	}
	dialer := net.Dialer{KeepAlive: rt.cfg.RelayKeepAlive()}
	status := wire.StatusHostUnreachable
	for _, ip := range candidates {
		c, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(ip, d.Port).String())
		if err == nil {
			return c.(*net.TCPConn), wire.StatusOK
		}
		status = statusFor(err)
		log.Debug("connect failed", "err", err)
		if ctx.Err() != nil {
			break
		}
	}
	s.metrics.Counter("connect_failures").Add(1)
	return nil, status
}

func (s *Server) refused(log *connLog, err error) {
	s.metrics.Counter("refused_destinations").Add(1)
	// The reason names the range (e.g. "loopback"); the address is only
	// logged at debug level.
	log.Info("destination refused by policy")
	log.Debug("destination refused", "err", err)
}

// resolveFailure says why a lookup failed without naming what was looked up.
func resolveFailure(err error) string {
	var de *net.DNSError
	switch {
	case err == nil:
		return "no addresses"
	case errors.As(err, &de) && de.IsNotFound:
		return "no such name"
	case errors.As(err, &de) && de.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "resolver error"
	}
}

func statusFor(err error) wire.Status {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return wire.StatusConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return wire.StatusNetUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH):
		return wire.StatusHostUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return wire.StatusTTLExpired
	}
	return wire.StatusGeneralFailure
}

// rateLimiter allows perSecond events per second (for log lines).
type rateLimiter struct {
	perSecond int
	mu        sync.Mutex
	second    int64
	count     int
}

func (r *rateLimiter) allow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().Unix()
	if now != r.second {
		r.second, r.count = now, 0
	}
	r.count++
	return r.count <= r.perSecond
}

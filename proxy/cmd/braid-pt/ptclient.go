package main

// The client role: a SOCKS5 listener for tor, one braid client per bridge.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/client"
	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/pt"
	"braid/proxy/internal/socks5"
	"braid/proxy/internal/wire"
)

// bridgeArgs are the per-bridge arguments of a braid bridge line.
type bridgeArgs struct {
	pub []byte // the bridge's static public key
	id  string
	key []byte
	pad padArgs
}

// padArgs are the adaptive padding settings a bridge line (client) or
// ServerTransportOptions (bridge) may give: padding=<budget> (padding
// bytes per data byte, e.g. 0.4; 0 = off) and padding-idle=<duration>.
type padArgs struct {
	budget float64
	idle   time.Duration
}

// parsePadArg reads one padding argument into p; ok is false for keys that
// are not padding's.
func parsePadArg(p *padArgs, kv pt.KV) (ok bool, err error) {
	switch kv.Key {
	case "padding":
		v, err := strconv.ParseFloat(kv.Value, 64)
		if err != nil || !(v >= 0 && v <= config.MaxPaddingBudget) {
			return true, fmt.Errorf("argument padding=%q: a budget between 0 (off) and %d", kv.Value, config.MaxPaddingBudget)
		}
		p.budget = v
	case "padding-idle":
		d, err := time.ParseDuration(kv.Value)
		if err != nil || d <= 0 {
			return true, fmt.Errorf("argument padding-idle=%q: a positive duration like 1s", kv.Value)
		}
		p.idle = d
	default:
		return false, nil
	}
	return true, nil
}

// apply sets the padding keys of a role's configuration.
func (p padArgs) apply(c *config.Common) {
	c.PaddingBudget = p.budget
	if p.idle > 0 {
		c.PaddingIdle = config.Duration(p.idle)
	}
}

// parseBridgeArgs checks the bridge line's arguments: pub (the bridge's
// public key, required), id and key (a user's own credential, both or
// neither); anything else is refused so that a typo is not silently
// ignored.
func parseBridgeArgs(args pt.Args) (bridgeArgs, error) {
	var b bridgeArgs
	for _, kv := range args {
		switch kv.Key {
		case "pub":
			pub, err := auth.ParsePublicKey(kv.Value)
			if err != nil {
				return b, fmt.Errorf("bridge argument pub: %w", err)
			}
			b.pub = pub
		case "key":
			k, err := auth.ParseKeys([]byte("x " + kv.Value))
			if err != nil {
				return b, fmt.Errorf("bridge argument key: %w", stripLine(err))
			}
			b.key = k["x"]
		case "id":
			if err := auth.CheckID(kv.Value); err != nil {
				return b, fmt.Errorf("bridge argument id: %w", err)
			}
			b.id = kv.Value
		default:
			ok, err := parsePadArg(&b.pad, kv)
			if err != nil {
				return b, fmt.Errorf("bridge %w", err)
			}
			if !ok {
				return b, fmt.Errorf("unknown bridge argument %q (braid takes pub=, id=, key=, padding= and padding-idle=)", kv.Key)
			}
		}
	}
	if b.pub == nil {
		if b.key != nil {
			return b, errors.New("bridge line has key= but no pub= argument: it is from an older braid-pt; copy the bridge's new line from its braid_bridgeline.txt")
		}
		return b, errors.New("bridge line has no pub= argument (copy it from the bridge's braid_bridgeline.txt)")
	}
	if (b.id == "") != (b.key == nil) {
		return b, errors.New("bridge arguments id= and key= go together (a user's own credential from the bridge's key file)")
	}
	if b.key == nil {
		b.id, b.key = publicID, auth.BridgePSK(b.pub)
	}
	return b, nil
}

// stripLine drops ParseKeys' "line 1: " prefix, meaningless here.
func stripLine(err error) error {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "line 1: "); ok {
		return errors.New(rest)
	}
	return err
}

// maxBridgeClients bounds the braid clients (and key files) one transport
// keeps: one per distinct bridge line, made when a SOCKS request names it.
// tor uses a handful; anything that can reach the loopback SOCKS port
// could otherwise make the transport hold one per line it invents.
const maxBridgeClients = 64

// bridgeIdle is how long a bridge's client must have relayed nothing
// before a new bridge line may take its place.
const bridgeIdle = time.Minute

// bridges holds one braid client per (bridge address, pub, id, key,
// padding), at most maxBridgeClients.
type bridges struct {
	mu       sync.Mutex
	stateDir string
	log      *slog.Logger
	m        *metrics.Registry
	clients  map[string]*bridgeClient
	socks    string
	out      *pt.Out // tor's log gets the errors a user must act on
	outbound pt.Common
}

type bridgeClient struct {
	*client.Client
	server  netip.AddrPort
	keyFile string
	used    time.Time // last handed out
}

// makeRoom drops the least recently used bridge client that relays
// nothing and has been idle for bridgeIdle, if the table is full; it
// fails if every client is busy or recent. b.mu is held.
func (b *bridges) makeRoom(now time.Time) error {
	if len(b.clients) < maxBridgeClients {
		return nil
	}
	var oldest string
	for tag, bc := range b.clients {
		if bc.Active() == 0 && now.Sub(bc.used) >= bridgeIdle && (oldest == "" || bc.used.Before(b.clients[oldest].used)) {
			oldest = tag
		}
	}
	if oldest == "" {
		return fmt.Errorf("%d bridges in use, none idle for %v: refusing another bridge line", maxBridgeClients, bridgeIdle)
	}
	bc := b.clients[oldest]
	delete(b.clients, oldest)
	go bc.Shutdown(0)
	os.Remove(bc.keyFile)
	b.m.Counter("bridge_clients_evicted").Add(1)
	return nil
}

func (b *bridges) get(server netip.AddrPort, a bridgeArgs) (*client.Client, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%g\x00%s\x00", server, a.id, a.pad.budget, a.pad.idle)
	h.Write(a.pub)
	h.Write(a.key)
	tag := hex.EncodeToString(h.Sum(nil)[:8])
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if bc, ok := b.clients[tag]; ok {
		bc.used = now
		return bc.Client, nil
	}
	if err := b.makeRoom(now); err != nil {
		return nil, err
	}
	// braid-proxy's client reads its key from a file: a private one per
	// bridge in the state directory.
	keyFile := filepath.Join(b.stateDir, "braid-bridge-"+tag+".keys")
	if err := writeSecret(keyFile, fmt.Sprintf("%s %s\n", a.id, hex.EncodeToString(a.key))); err != nil {
		return nil, err
	}
	cfg := config.DefaultClient()
	cfg.Server = server.String()
	cfg.ClientID = a.id
	cfg.KeyFile = keyFile
	cfg.ServerPublicKey = auth.EncodePublicKey(a.pub)
	cfg.SOCKSListen = b.socks // the transport's own listener
	cfg.MetricsListen = ""
	// tor holds its bridge connection for hours, idle between pages: no idle
	// timeout (keepalive probes find a vanished server instead).
	cfg.IdleTimeout = 0
	// One long-lived connection per bridge: spares would only redial.
	cfg.Preconnect = 0
	a.pad.apply(&cfg.Common)
	if gw := os.Getenv("BRAID_GATEWAY_STATUS"); gw != "" {
		cfg.GatewayStatusFile = gw
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, b.log.With("bridge", server.String()), b.m)
	if err != nil {
		return nil, err
	}
	bindSource(c, b.outbound, server, b.log)
	b.clients[tag] = &bridgeClient{Client: c, server: server, keyFile: keyFile, used: now}
	return c, nil
}

func (b *bridges) shutdown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.clients {
		c.Shutdown(shutdownGrace)
	}
}

func runClient(out *pt.Out) error {
	env, err := pt.ParseClient(os.Getenv)
	if err != nil {
		return report(out, err)
	}
	out.Version()
	if env.Proxy != "" {
		out.ProxyError("braid does not support an upstream proxy (TOR_PT_PROXY)")
		return errors.New("TOR_PT_PROXY is set; braid cannot use an upstream proxy")
	}
	if !pt.Wants(env.Transports, transport) {
		for _, t := range env.Transports {
			out.CMethodError(t, "no such transport here (braid-pt only provides braid)")
		}
		out.CMethodsDone()
		return nil
	}
	if err := os.MkdirAll(env.StateDir, 0o700); err != nil {
		out.CMethodError(transport, "cannot create the state directory")
		out.CMethodsDone()
		return fmt.Errorf("state directory: %w", err)
	}
	log, closeLog := newLogger(env.StateDir)
	defer closeLog()
	ctx, cancel := stop(env.ExitOnStdinClose)
	defer cancel()
	ln, err := client.ListenLocal(ctx, "127.0.0.1:0")
	if err != nil {
		out.CMethodError(transport, err.Error())
		out.CMethodsDone()
		return err
	}
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	for _, t := range env.Transports {
		if t != transport && t != "*" {
			out.CMethodError(t, "no such transport here (braid-pt only provides braid)")
		}
	}
	out.CMethod(transport, addr)
	out.CMethodsDone()
	log.Info("client transport listening", "socks", addr.String())

	b := &bridges{stateDir: env.StateDir, log: log, m: metrics.New(), clients: map[string]*bridgeClient{}, socks: addr.String(), out: out, outbound: env.Common}
	var wg sync.WaitGroup
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			log.Warn("accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			handleSOCKS(conn.(*net.TCPConn), b, log)
		}()
	}
	log.Info("client transport stopping")
	b.shutdown()
	wg.Wait()
	return nil
}

// handleSOCKS answers tor's SOCKS5 request: the user name and password carry
// the bridge line's arguments, the destination is the bridge's address
// (the braid pt server).
func handleSOCKS(conn *net.TCPConn, b *bridges, log *slog.Logger) {
	// Long enough for the upstream exchange to fail on its own limits
	// (dial, then the handshake) and tor to hear why: a server that no key
	// opens answers nothing and closes only at its handshake deadline.
	conn.SetDeadline(time.Now().Add(config.DefaultDialTimeout + config.DefaultHandshakeTimeout))
	br := bufio.NewReaderSize(conn, 1024)
	methods, err := socks5.ReadGreeting(br)
	if err != nil {
		log.Warn("SOCKS greeting from tor", "err", err)
		return
	}
	offered := false
	for _, m := range methods {
		offered = offered || m == socks5.MethodUserPass
	}
	if !offered {
		// No arguments means no key: tor's bridge line lacks pub=.
		socks5.WriteMethod(conn, socks5.MethodNone)
		log.Error("bridge line has no arguments; braid needs pub=")
		b.out.Log("error", "braid: the bridge line has no arguments; it needs pub=")
		return
	}
	if err := socks5.WriteMethod(conn, socks5.MethodUserPass); err != nil {
		return
	}
	user, pass, err := socks5.ReadUserPass(br)
	if err != nil {
		log.Warn("SOCKS user/password from tor", "err", err)
		return
	}
	args, err := pt.ParseSOCKSArgs(user, pass)
	var ba bridgeArgs
	if err == nil {
		ba, err = parseBridgeArgs(args)
	}
	if err != nil {
		socks5.WriteUserPassStatus(conn, false)
		log.Error("bad bridge line arguments", "err", err)
		b.out.Log("error", "braid: "+err.Error())
		return
	}
	if err := socks5.WriteUserPassStatus(conn, true); err != nil {
		return
	}
	req, err := socks5.ReadRequest(br)
	if err != nil {
		socks5.WriteReply(conn, socks5.ReplyFor(err), netip.AddrPort{})
		log.Warn("SOCKS request from tor", "err", err)
		return
	}
	if req.Dest.IsName() {
		socks5.WriteReply(conn, socks5.ReplyAddrTypeNotSupport, netip.AddrPort{})
		log.Error("bridge address must be an IP address", "name", req.Dest.Name)
		return
	}
	server := netip.AddrPortFrom(req.Dest.IP, req.Dest.Port)
	c, err := b.get(server, ba)
	if err != nil {
		socks5.WriteReply(conn, socks5.ReplyGeneralFailure, netip.AddrPort{})
		log.Error("setting up the braid client for a bridge", "bridge", server.String(), "err", err)
		return
	}
	conn.SetDeadline(time.Time{})
	// The request names the ORPort side only symbolically: the server
	// forwards to its bridge's ORPort whatever the request says.
	status, err := c.Connect(conn, dest.Addr{Name: "orport.braid", Port: 1}, func() error {
		if err := socks5.WriteReply(conn, socks5.ReplySucceeded, netip.AddrPort{}); err != nil {
			return err
		}
		if n := br.Buffered(); n > 0 {
			return errors.New("tor sent data before the SOCKS reply")
		}
		return nil
	})
	if err != nil && status != wire.StatusOK {
		socks5.WriteReply(conn, byte(status), netip.AddrPort{})
		log.Warn("bridge connection failed", "bridge", server.String(), "err", err)
		b.out.Log("warning", fmt.Sprintf("braid: connection to %s failed: %v", server, err))
	}
}

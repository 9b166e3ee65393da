// Command braid-pt is the Tor pluggable transport "braid": tor starts it as
// a managed proxy (ClientTransportPlugin / ServerTransportPlugin) and it
// carries tor's connection to a bridge over braid's authenticated,
// encrypted MPTCP relay, so the kernel's schedulers split the bridge
// connection over every network.
//
// The role comes from the environment tor sets: TOR_PT_CLIENT_TRANSPORTS
// makes a client (a SOCKS5 listener for tor, one braid client per bridge
// line), TOR_PT_SERVER_TRANSPORTS a server (a braid relay whose only
// destination is the bridge's ORPort).
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/client"
	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/pt"
	"braid/proxy/internal/server"
	"braid/proxy/internal/socks5"
	"braid/proxy/internal/wire"
)

const (
	transport = "braid"
	// serverID is the client id tor's clients use unless the bridge line
	// names another (one key per bridge, shared by its users, like obfs4's
	// cert).
	serverID       = "tor"
	serverKeyFile  = "braid_server.keys"
	bridgeLineFile = "braid_bridgeline.txt"
	shutdownGrace  = 2 * time.Second
)

const usage = `braid-pt: the "braid" Tor pluggable transport (pt-spec version 1).

tor runs it; it is not meant to be started by hand. Client torrc:

  UseBridges 1
  ClientTransportPlugin braid exec /usr/local/bin/braid-pt
  Bridge braid <pt-server addr:port> <bridge fingerprint> key=<hex> [id=<client id>]

Bridge torrc:

  BridgeRelay 1
  ORPort 127.0.0.1:9001
  ServerTransportPlugin braid exec /usr/local/bin/braid-pt
  ServerTransportListenAddr braid 0.0.0.0:4433

The server keeps its key in TOR_PT_STATE_LOCATION/braid_server.keys
(created 0600 on first start; replace it with your own "id key" lines to
give clients their own ids) and writes the bridge line for clients to
TOR_PT_STATE_LOCATION/braid_bridgeline.txt. It forwards every
authenticated connection to the bridge's ORPort and nowhere else.

Environment besides tor's: BRAID_PT_LOG_LEVEL (debug|info|warn|error,
default info; logs go to stderr and TOR_PT_STATE_LOCATION/braid-pt.log),
BRAID_GATEWAY_STATUS (the path manager's status file, default
/run/braid/gateways.json): the first subflow leaves through the best
gateway, as with braid-proxy client.
`

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "tunnel-client" || os.Args[1] == "tunnel-server") {
		if err := runTunnel(os.Args[1], os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "braid-pt:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 {
		fmt.Fprint(os.Stderr, usage+"\n"+tunnelUsage)
		if a := os.Args[1]; a == "-h" || a == "--help" || a == "help" {
			return
		}
		os.Exit(2)
	}
	out := pt.NewOut(os.Stdout)
	var err error
	switch {
	case os.Getenv("TOR_PT_CLIENT_TRANSPORTS") != "":
		err = runClient(out)
	case os.Getenv("TOR_PT_SERVER_TRANSPORTS") != "":
		err = runServer(out)
	default:
		out.Line("ENV-ERROR neither TOR_PT_CLIENT_TRANSPORTS nor TOR_PT_SERVER_TRANSPORTS is set")
		fmt.Fprint(os.Stderr, "\n"+usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "braid-pt:", err)
		os.Exit(1)
	}
}

// report prints the protocol line for an environment error.
func report(out *pt.Out, err error) error {
	var ee *pt.EnvError
	if errors.As(err, &ee) {
		out.Line("%s", ee.Line)
	} else {
		out.Line("ENV-ERROR %s", err)
	}
	return err
}

func newLogger(stateDir string) (*slog.Logger, func()) {
	level := slog.LevelInfo
	switch os.Getenv("BRAID_PT_LOG_LEVEL") {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	var w io.Writer = os.Stderr
	closer := func() {}
	if f, err := os.OpenFile(filepath.Join(stateDir, "braid-pt.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		w = io.MultiWriter(os.Stderr, f)
		closer = func() { f.Close() }
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), closer
}

// stop returns a context ended by SIGINT/SIGTERM, or by stdin closing when
// tor asked for that (TOR_PT_EXIT_ON_STDIN_CLOSE: tor is gone).
func stop(exitOnStdinClose bool) (context.Context, context.CancelFunc) {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	if exitOnStdinClose {
		go func() {
			io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	return ctx, cancel
}

// ---- client ---------------------------------------------------------------

// bridgeArgs are the per-bridge arguments of a braid bridge line.
type bridgeArgs struct {
	id  string
	key []byte
}

// parseBridgeArgs checks the bridge line's arguments: key (hex or base64,
// required) and id (optional); anything else is refused so that a typo is
// not silently ignored.
func parseBridgeArgs(args pt.Args) (bridgeArgs, error) {
	b := bridgeArgs{id: serverID}
	var haveKey bool
	for _, kv := range args {
		switch kv.Key {
		case "key":
			k, err := auth.ParseKeys([]byte("x " + kv.Value))
			if err != nil {
				return b, fmt.Errorf("bridge argument key: %w", stripLine(err))
			}
			b.key, haveKey = k["x"], true
		case "id":
			if err := auth.CheckID(kv.Value); err != nil {
				return b, fmt.Errorf("bridge argument id: %w", err)
			}
			b.id = kv.Value
		default:
			return b, fmt.Errorf("unknown bridge argument %q (braid takes key= and id=)", kv.Key)
		}
	}
	if !haveKey {
		return b, errors.New("bridge line has no key= argument (copy it from the bridge's braid_bridgeline.txt)")
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

// bridges holds one braid client per (bridge address, id, key).
type bridges struct {
	mu       sync.Mutex
	stateDir string
	log      *slog.Logger
	m        *metrics.Registry
	clients  map[string]*client.Client
	socks    string
	out      *pt.Out // tor's log gets the errors a user must act on
}

func (b *bridges) get(server netip.AddrPort, a bridgeArgs) (*client.Client, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", server, a.id)
	h.Write(a.key)
	tag := hex.EncodeToString(h.Sum(nil)[:8])
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.clients[tag]; ok {
		return c, nil
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
	cfg.SOCKSListen = b.socks // the transport's own listener
	cfg.MetricsListen = ""
	// tor holds its bridge connection for hours, idle between pages: no idle
	// timeout (keepalive probes find a vanished server instead).
	cfg.IdleTimeout = 0
	// One long-lived connection per bridge: spares would only redial.
	cfg.Preconnect = 0
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
	b.clients[tag] = c
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

	b := &bridges{stateDir: env.StateDir, log: log, m: metrics.New(), clients: map[string]*client.Client{}, socks: addr.String(), out: out}
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
	conn.SetDeadline(time.Now().Add(config.DefaultHandshakeTimeout))
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
		// No arguments means no key: tor's bridge line lacks key=.
		socks5.WriteMethod(conn, socks5.MethodNone)
		log.Error("bridge line has no arguments; braid needs key=")
		b.out.Log("error", "braid: the bridge line has no arguments; it needs key=")
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

// ---- server ---------------------------------------------------------------

func runServer(out *pt.Out) error {
	env, err := pt.ParseServer(os.Getenv)
	if err != nil {
		return report(out, err)
	}
	out.Version()
	if !pt.Wants(env.Transports, transport) {
		for _, t := range env.Transports {
			out.SMethodError(t, "no such transport here (braid-pt only provides braid)")
		}
		out.SMethodsDone()
		return nil
	}
	for _, t := range env.Transports {
		if t != transport && t != "*" {
			out.SMethodError(t, "no such transport here (braid-pt only provides braid)")
		}
	}
	fail := func(err error) error {
		out.SMethodError(transport, err.Error())
		out.SMethodsDone()
		return err
	}
	if !env.ORPort.IsValid() {
		// The Extended ORPort would need its cookie authentication; braid
		// forwards to the plain ORPort, which tor always has on a bridge.
		return fail(errors.New("TOR_PT_ORPORT is not set (braid forwards to the plain ORPort, not the Extended ORPort)"))
	}
	if err := os.MkdirAll(env.StateDir, 0o700); err != nil {
		return fail(fmt.Errorf("state directory: %w", err))
	}
	bind, ok := env.BindFor(transport)
	if !ok {
		bind = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	keyFile := filepath.Join(env.StateDir, serverKeyFile)
	key, err := serverKey(keyFile)
	if err != nil {
		return fail(err)
	}
	log, closeLog := newLogger(env.StateDir)
	defer closeLog()

	cfg := config.DefaultServer()
	cfg.Listen = bind.String()
	cfg.KeyFile = keyFile
	cfg.MetricsListen = ""
	cfg.IdleTimeout = 0 // tor's own keepalives (and TCP's) manage its connections
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	srv, err := server.New(cfg, log, metrics.New())
	if err != nil {
		return fail(err)
	}
	srv.Target = env.ORPort
	ctx, cancel := stop(env.ExitOnStdinClose)
	defer cancel()
	ln, err := server.Listen(ctx, cfg.Listen, log)
	if err != nil {
		return fail(err)
	}
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	args := pt.Args{{Key: "key", Value: key}}
	if err := writeBridgeLine(env.StateDir, addr, args); err != nil {
		ln.Close()
		return fail(err)
	}
	if err := out.SMethod(transport, addr, args); err != nil {
		ln.Close()
		return fail(err)
	}
	out.SMethodsDone()
	log.Info("server transport listening (MPTCP)", "addr", addr.String(), "orport", env.ORPort.String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	log.Info("server transport stopping")
	srv.Shutdown(shutdownGrace)
	return err
}

// serverKey returns the hex key of serverID from path, creating the file
// with a fresh 32-byte key on first start.
func serverKey(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		k := make([]byte, 32)
		rand.Read(k)
		if err := writeSecret(path, fmt.Sprintf("%s %s\n", serverID, hex.EncodeToString(k))); err != nil {
			return "", err
		}
	}
	keys, err := auth.LoadKeys(path)
	if err != nil {
		return "", err
	}
	k, ok := keys[serverID]
	if !ok {
		return "", fmt.Errorf("%s: no key for id %q (the one the bridge line advertises)", path, serverID)
	}
	return hex.EncodeToString(k), nil
}

func writeBridgeLine(dir string, addr netip.AddrPort, args pt.Args) error {
	enc, err := pt.EncodeArgs(args, ' ')
	if err != nil {
		return err
	}
	text := "# braid bridge line for clients' torrc; replace <FINGERPRINT> with the bridge's\n" +
		"# (its DataDirectory/fingerprint file) and the address with a public one if it is 0.0.0.0.\n" +
		fmt.Sprintf("Bridge %s %s <FINGERPRINT> %s\n", transport, addr, enc)
	return writeSecret(filepath.Join(dir, bridgeLineFile), text)
}

// writeSecret writes a file only its owner can read (atomically, so a
// reader never sees half a key).
func writeSecret(path, text string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // an older tmp file may have had other bits
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Command braid-pt is the Tor pluggable transport "braid": tor starts it as
// a managed proxy (ClientTransportPlugin / ServerTransportPlugin) and it
// carries tor's connection to a bridge over braid's authenticated,
// encrypted MPTCP relay, so the kernel's schedulers split the bridge
// connection over every network.
//
// The role comes from the environment tor sets: TOR_PT_CLIENT_TRANSPORTS
// makes a client (a SOCKS5 listener for tor, one braid client per bridge
// line), TOR_PT_SERVER_TRANSPORTS a server (a braid relay whose only
// destination is the bridge's Extended ORPort or ORPort).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"braid/proxy/internal/buildinfo"
	"braid/proxy/internal/pt"
)

const (
	transport = "braid"
	// publicID is the client id of every user of the public bridge line
	// (pub= only): its pre-shared key is derived from the bridge's public
	// key, so the line holds no secret. A bridge line may instead carry a
	// user's own id= and key=, from the bridge's key file.
	publicID       = "bridge"
	serverKeyFile  = "braid_server.keys"
	staticKeyFile  = "braid_static.key"
	bridgeLineFile = "braid_bridgeline.txt"
	shutdownGrace  = 2 * time.Second
)

const usage = `braid-pt: the "braid" Tor pluggable transport (pt-spec version 1).

tor runs it; it is not meant to be started by hand ("braid-pt --version"
names its build). Client torrc:

  UseBridges 1
  ClientTransportPlugin braid exec /usr/local/bin/braid-pt
  Bridge braid <pt-server addr:port> <bridge fingerprint> pub=<bridge public key> [id=<user> key=<user key>] [padding=<budget>] [padding-idle=<duration>]

Bridge torrc:

  BridgeRelay 1
  ORPort 127.0.0.1:9001
  ExtORPort auto
  ServerTransportPlugin braid exec /usr/local/bin/braid-pt
  ServerTransportListenAddr braid 0.0.0.0:4433
  # optional: adaptive padding of what the bridge sends
  ServerTransportOptions braid padding=0.4

padding=<budget> turns on braid's adaptive padding of what that end sends
(padding bytes at most budget x data bytes per connection; off by default;
padding-idle, default 1s, stops it once the connection is idle). Each end
pads only towards a peer that announced support.

The server keeps its key in TOR_PT_STATE_LOCATION/braid_server.keys
(created 0600 on first start; replace it with your own "id key" lines to
give clients their own ids) and writes the bridge line for clients to
TOR_PT_STATE_LOCATION/braid_bridgeline.txt. It forwards every
authenticated connection to the bridge's Extended ORPort (naming the
client's address and the transport; tor gives it with ExtORPort) or, without
one, to its ORPort, and nowhere else.

Outbound bind addresses (torrc OutboundBindAddressPT) are honoured: the
client's first subflow to a bridge leaves from the address of its family,
and the server's connection to a non-loopback ORPort too.

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
	if len(os.Args) == 2 && (os.Args[1] == "version" || os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println(buildinfo.Version("braid-pt"))
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

package main

// The server role: a braid relay whose only destination is the ORPort.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/pt"
	"braid/proxy/internal/server"
)

// serverConfigHook, when set, adjusts the server's configuration before it
// is validated. Only the tests set it, in the test binary that doubles as
// braid-pt: a wrong key waits for the server's handshake deadline, which
// they shorten from its 10 s default.
var serverConfigHook func(*config.Server)

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
	if err := os.MkdirAll(env.StateDir, 0o700); err != nil {
		return fail(fmt.Errorf("state directory: %w", err))
	}
	bind, ok := env.BindFor(transport)
	if !ok {
		bind = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	keyFile := filepath.Join(env.StateDir, serverKeyFile)
	staticFile := filepath.Join(env.StateDir, staticKeyFile)
	pub, err := bridgeKeys(staticFile, keyFile)
	if err != nil {
		return fail(err)
	}
	log, closeLog := newLogger(env.StateDir)
	defer closeLog()

	cfg := config.DefaultServer()
	cfg.Listen = bind.String()
	cfg.KeyFile = keyFile
	cfg.StaticKeyFile = staticFile
	cfg.MetricsListen = ""
	cfg.IdleTimeout = 0 // tor's own keepalives (and TCP's) manage its connections
	// ServerTransportOptions braid padding=<budget> [padding-idle=<d>]
	var pad padArgs
	for _, kv := range env.Options[transport] {
		ok, err := parsePadArg(&pad, kv)
		if err != nil {
			return fail(fmt.Errorf("ServerTransportOptions %w", err))
		}
		if !ok {
			return fail(fmt.Errorf("unknown ServerTransportOptions key %q (braid takes padding= and padding-idle=)", kv.Key))
		}
	}
	pad.apply(&cfg.Common)
	// One padding budget per connection, not per client id: every user of
	// the public line has the id publicID, and each tor client holds one
	// connection to its bridge, so a connection is a user.
	cfg.PaddingScope = config.PaddingScopeConnection
	if serverConfigHook != nil {
		serverConfigHook(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	// The Extended ORPort when tor has one (it learns each client's
	// address), else the plain ORPort.
	ord, err := newORDialer(env, cfg.RelayKeepAlive(), log)
	if err != nil {
		return fail(err)
	}
	srv, err := server.New(cfg, log, metrics.New())
	if err != nil {
		return fail(err)
	}
	srv.Target, srv.DialTarget = ord.target, ord.dial
	ctx, cancel := stop(env.ExitOnStdinClose)
	defer cancel()
	ln, err := server.Listen(ctx, cfg.Listen, log)
	if err != nil {
		return fail(err)
	}
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	args := pt.Args{{Key: "pub", Value: auth.EncodePublicKey(pub)}}
	if err := writeBridgeLine(env.StateDir, addr, args); err != nil {
		ln.Close()
		return fail(err)
	}
	if err := out.SMethod(transport, addr, args); err != nil {
		ln.Close()
		return fail(err)
	}
	out.SMethodsDone()
	log.Info("server transport listening (MPTCP)", "addr", addr.String(), "to", ord.describe(), "padding_budget", cfg.PaddingBudget)
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

// bridgeKeys returns the bridge's static public key, creating its static
// key file on first start, and writes the public bridge line's entry
// (publicID, its key derived from the public key) into the key file,
// keeping every other line: users' own credentials an operator added.
func bridgeKeys(staticPath, keysPath string) ([]byte, error) {
	k, err := auth.LoadStaticKey(staticPath)
	if errors.Is(err, os.ErrNotExist) {
		k, err = auth.NewStaticKeyFile(staticPath)
	}
	if err != nil {
		return nil, err
	}
	text := fmt.Sprintf("# %s: the public bridge line's key (derived from the bridge's public key, not a secret);\n"+
		"# add \"<id> <key>\" lines for users' own credentials (bridge line id=<id> key=<key>)\n%s %s\n",
		publicID, publicID, hex.EncodeToString(auth.BridgePSK(k.Public)))
	if old, err := os.ReadFile(keysPath); err == nil {
		for _, line := range strings.SplitAfter(string(old), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(f[0], "#") || f[0] == publicID {
				continue
			}
			text += line
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := writeSecret(keysPath, text); err != nil {
		return nil, err
	}
	if _, err := auth.LoadKeys(keysPath); err != nil {
		return nil, err
	}
	return k.Public, nil
}

func writeBridgeLine(dir string, addr netip.AddrPort, args pt.Args) error {
	enc, err := pt.EncodeArgs(args, ' ')
	if err != nil {
		return err
	}
	text := "# braid bridge line for clients' torrc; replace <FINGERPRINT> with the bridge's\n" +
		"# (its DataDirectory/fingerprint file) and the address with a public one if it is\n" +
		"# unspecified (0.0.0.0 or [::]: every address).\n" +
		fmt.Sprintf("Bridge %s %s <FINGERPRINT> %s\n", transport, addr, enc)
	return writeSecret(filepath.Join(dir, bridgeLineFile), text)
}

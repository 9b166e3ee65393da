package main

// The server role: a braid relay whose only destination is the ORPort.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

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

package main

// The second mode (the thesis's topology): tor runs on the proxy, and the
// client box only tunnels applications' SOCKS connections to tor's
// SocksPort there, through braid's authenticated MPTCP relay. Weaker than
// the pluggable transport: the proxy sees every destination (tor's SOCKS
// requests) and could read or change unencrypted traffic; see tor/README.md.

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"braid/proxy/internal/client"
	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/server"
)

const tunnelUsage = `braid-pt tunnel-client | tunnel-server: the second Tor mode.

tor runs on the proxy; the client box forwards every local connection,
unread, through braid's relay to one fixed target there (tor's SocksPort):

  proxy:      tor (SocksPort 127.0.0.1:9050)
              braid-pt tunnel-server -listen 0.0.0.0:4434 -target 127.0.0.1:9050 -key-file server.keys
  client box: braid-pt tunnel-client -listen 127.0.0.1:9050 -server PROXY:4434 -key-file client.keys
              curl --socks5-hostname 127.0.0.1:9050 http://example.org/

Keys: braid-proxy genkey (one "id key" line; the client file holds its own
line). The proxy sees every destination: prefer the pluggable transport
(tor on the client box) unless the client box cannot run tor.
`

func runTunnel(role string, args []string) error {
	fs := flag.NewFlagSet("braid-pt "+role, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), tunnelUsage+"\nFlags:\n"); fs.PrintDefaults() }
	listen := fs.String("listen", "", "address to listen on (client: 127.0.0.1:9050; server: the public address, MPTCP)")
	keyFile := fs.String("key-file", "", "braid key file (\"id key\" lines, mode 0600)")
	id := fs.String("id", "", "client id (tunnel-client; default: the key file's only id)")
	serverAddr := fs.String("server", "", "tunnel-server address (tunnel-client)")
	target := fs.String("target", "127.0.0.1:9050", "the only destination: tor's SocksPort (tunnel-server)")
	padBudget := fs.Float64("padding-budget", 0, "adaptive padding of what this end sends: padding bytes at most this many times the data bytes; 0 = off")
	padIdle := fs.Duration("padding-idle", config.DefaultPaddingIdle, "adaptive padding stops this long after the last data")
	if err := fs.Parse(args); err == flag.ErrHelp {
		return nil
	} else if err != nil {
		return err
	}
	if *listen == "" || *keyFile == "" {
		return fmt.Errorf("%s: -listen and -key-file are required (see -h)", role)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if role == "tunnel-server" {
		t, err := netip.ParseAddrPort(*target)
		if err != nil {
			return fmt.Errorf("-target: %q is not address:port", *target)
		}
		cfg := config.DefaultServer()
		cfg.Listen, cfg.KeyFile, cfg.MetricsListen, cfg.IdleTimeout = *listen, *keyFile, "", 0
		padArgs{*padBudget, *padIdle}.apply(&cfg.Common)
		if err := cfg.Validate(); err != nil {
			return err
		}
		srv, err := server.New(cfg, log, metrics.New())
		if err != nil {
			return err
		}
		srv.Target = t
		ln, err := server.Listen(ctx, cfg.Listen, log)
		if err != nil {
			return err
		}
		fmt.Printf("tunnel-server listening on %s (MPTCP), target %s\n", ln.Addr(), t)
		err = srv.Serve(ctx, ln)
		srv.Shutdown(shutdownGrace)
		return err
	}
	if *serverAddr == "" {
		return fmt.Errorf("tunnel-client: -server is required")
	}
	cfg := config.DefaultClient()
	cfg.SOCKSListen, cfg.Server, cfg.ClientID, cfg.KeyFile = *listen, *serverAddr, *id, *keyFile
	cfg.MetricsListen, cfg.IdleTimeout = "", 0
	padArgs{*padBudget, *padIdle}.apply(&cfg.Common)
	if gw := os.Getenv("BRAID_GATEWAY_STATUS"); gw != "" {
		cfg.GatewayStatusFile = gw
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	c, err := client.New(cfg, log, metrics.New())
	if err != nil {
		return err
	}
	ln, err := client.ListenLocal(ctx, *listen)
	if err != nil {
		return err
	}
	fmt.Printf("tunnel-client listening on %s, server %s\n", ln.Addr(), *serverAddr)
	go func() { <-ctx.Done(); ln.Close() }()
	var wg sync.WaitGroup
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			// The application's bytes (its SOCKS request to tor included)
			// go through unread; the server ignores the named destination.
			if _, err := c.Connect(conn.(*net.TCPConn), dest.Addr{Name: "tor.braid", Port: 1}, func() error { return nil }); err != nil {
				log.Warn("tunnel failed", "err", err)
			}
		}()
	}
	c.Shutdown(shutdownGrace)
	wg.Wait()
	return nil
}

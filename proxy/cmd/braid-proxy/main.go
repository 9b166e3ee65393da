// Command braid-proxy carries users' TCP connections over one MPTCP
// connection per flow between a client box and a relay on the Internet.
//
//	braid-proxy client -config /etc/braid/client.json
//	braid-proxy server -config /etc/braid/server.json
//	braid-proxy genkey -id box1 -out /etc/braid/keys
//	braid-proxy check server -config /etc/braid/server.json
//
// Run "braid-proxy help" or "braid-proxy <command> -h" for details.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/buildinfo"
	"braid/proxy/internal/client"
	"braid/proxy/internal/config"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/server"
	"braid/proxy/internal/tlsauth"
)

const usage = `braid-proxy: SOCKS5 / transparent proxy over MPTCP, and its relay server.

Usage:
  braid-proxy client [-config FILE] [flags]   run on the client box
  braid-proxy server [-config FILE] [flags]   run on the relay (Internet side)
  braid-proxy genkey -id ID [-out FILE]       create a pre-shared key line
  braid-proxy genkey -static -out FILE        create the server's static key; prints its public key
  braid-proxy gencert -name N -cert F -key F  create a self-signed certificate
                                              for auth tls; prints its pin
  braid-proxy check client|server [-config FILE] [flags]
                                              validate a configuration and the
                                              files it names; start nothing
  braid-proxy version                         the build this binary came from
  braid-proxy help                            this text

Exit status: 0 done; 2 bad input (arguments, configuration or the files it
names); 1 any other failure (e.g. the listen address in use).

client: listens for SOCKS5 (RFC 1928 CONNECT, names resolved by the server,
  optional RFC 1929 user/password) and, if transparent_listen is set, for
  connections redirected by iptables/nftables, e.g.
      iptables -t nat -A OUTPUT -p tcp -d 198.51.100.0/24 -j REDIRECT --to-ports 1081
  (exclude the server's own address from such rules). Each connection
  becomes one MPTCP connection to the server whose first subflow leaves
  through the gateway the path manager rates best (-gateway-status-file);
  -race tries the two best gateways at once and keeps the first. SOCKS is
  answered as soon as the server connection is up, and the application's
  first bytes travel with the request (-socks-reply connected waits for the
  destination instead: real SOCKS error codes, one round trip slower).

server: MPTCP listener. Clients authenticate with a pre-shared key (protocol
  v3: a Noise NNpsk0 handshake, mutual, replay-protected, forward-secret
  session keys, nothing in clear but keys encoded to look random; with
  -static-key-file NKpsk0, and clients given the server's public key accept
  no other server; data encrypted with AES-256-GCM unless both sides opt
  out) or, with -auth tls, with mutual TLS 1.3 and pinned
  certificates. Unauthenticated connections are capped in total and per
  source (-max-preauth-conns, -max-preauth-per-source) and closed after
  -first-byte-timeout of silence. Loopback, private, link-local, CGNAT,
  cloud-metadata and the host's own addresses (also inside NAT64/6to4
  addresses) are refused as destinations unless re-allowed with
  -allow-cidr; -refuse-cidr refuses more (behind 1:1 NAT: the relay's
  public address); -allow restricts destinations to a list.

Both: JSON config file (flags override it; unknown keys are errors),
  structured logs on stderr (-log-format json for journald/collectors),
  a status endpoint on localhost (/status JSON, /metrics Prometheus),
  SIGTERM = graceful shutdown, SIGHUP = reload keys/policy/limits.
  Secret files (keys, SOCKS users) must not be group/world accessible.

Run "braid-proxy client -h" or "braid-proxy server -h" for every flag.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "client":
		err = runClient(args)
	case "server":
		err = runServer(args)
	case "genkey":
		err = runGenkey(args)
	case "gencert":
		err = runGencert(args)
	case "check":
		err = runCheck(args)
	case "version", "-version", "--version":
		fmt.Println(buildinfo.Version("braid-proxy"))
		return
	case "help", "-h", "--help", "-help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "braid-proxy: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "braid-proxy: %v\n", err)
		if errors.As(err, new(badInput)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// badInput marks an error in what the operator gave (arguments, the
// configuration, the files it names): exit status 2, as with every braid
// tool; other failures exit 1.
type badInput struct{ error }

func (e badInput) Unwrap() error { return e.error }

// inputErr marks err (nil stays nil) as bad input.
func inputErr(err error) error {
	if err == nil {
		return nil
	}
	return badInput{err}
}

func newLogger(level, format string) (*slog.Logger, *slog.LevelVar) {
	lv := new(slog.LevelVar)
	setLevel(lv, level)
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if format == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(h), lv
}

// setMaxProcs applies max_procs. 0 leaves the runtime's choice (the
// GOMAXPROCS environment variable, else one per CPU); going back to 0 on a
// reload restores one per CPU.
func setMaxProcs(n, prev int) {
	switch {
	case n > 0:
		runtime.GOMAXPROCS(n)
	case prev > 0:
		runtime.SetDefaultGOMAXPROCS()
	}
}

func setLevel(lv *slog.LevelVar, level string) {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	lv.Set(l)
}

// sdNotify tells systemd (Type=notify) about state changes; a no-op
// without NOTIFY_SOCKET.
func sdNotify(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}

type role interface {
	Shutdown(grace time.Duration)
}

// run waits for signals: SIGHUP reloads, SIGTERM/SIGINT stop.
func run(log *slog.Logger, stopServing context.CancelFunc, r role, grace func() time.Duration, reload func() error, errc <-chan error) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	sdNotify("READY=1")
	for {
		select {
		case err := <-errc:
			stopServing()
			r.Shutdown(0)
			return err
		case s := <-sigs:
			if s == syscall.SIGHUP {
				sdNotify("RELOADING=1")
				if err := reload(); err != nil {
					log.Error("reload failed; keeping the previous configuration", "err", err)
				} else {
					log.Info("configuration reloaded")
				}
				sdNotify("READY=1")
				continue
			}
			sdNotify("STOPPING=1")
			log.Info("shutting down", "signal", s.String(), "grace", grace())
			stopServing()
			r.Shutdown(grace())
			log.Info("stopped")
			return nil
		}
	}
}

// roleUsage prints the role's summary before its flags.
func roleUsage(fs *flag.FlagSet, summary string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nFlags (also JSON keys of -config: the flag name with _ for -, except\n-allow-cidr, -refuse-cidr and -allow, which are the lists allow_cidrs, refuse_cidrs and allow_list):\n", summary)
		fs.PrintDefaults()
	}
}

func runServer(args []string) error {
	fs := flag.NewFlagSet("braid-proxy server", flag.ContinueOnError)
	roleUsage(fs, `braid-proxy server: MPTCP relay for braid client boxes.

Authenticates every connection (pre-shared key from -key-file, or -auth tls),
refuses loopback/private/link-local/metadata destinations unless re-allowed
with -allow-cidr, optionally restricts destinations with -allow, resolves
names itself, and relays with encryption. SIGHUP reloads keys, policy and
limits; SIGTERM drains relays for -shutdown-grace, then exits.`)
	cfg, path, err := config.ParseArgs(fs, args, config.DefaultServer, config.BindServer)
	if err != nil {
		return inputErr(err)
	}
	if err := cfg.Validate(); err != nil {
		return inputErr(err)
	}
	log, lv := newLogger(cfg.LogLevel, cfg.LogFormat)
	setMaxProcs(cfg.MaxProcs, 0)
	m := metrics.New()
	m.SetBuildInfo("server", strings.TrimPrefix(buildinfo.Version("braid-proxy"), "braid-proxy "))
	srv, err := server.New(cfg, log, m)
	if err != nil {
		return inputErr(err) // the files the configuration names
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := server.Listen(ctx, cfg.Listen, log)
	if err != nil {
		return err
	}
	if cfg.MetricsListen != "" {
		if err := metrics.Serve(ctx, cfg.MetricsListen, m, log); err != nil {
			return err
		}
	}
	log.Info("server listening (MPTCP)", "addr", ln.Addr().String(), "config", path)
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	errc := make(chan error, 1)
	go func() {
		if err := srv.Serve(serveCtx, ln); err != nil {
			errc <- err
		}
	}()
	current := cfg
	return run(log, stopServing, srv, func() time.Duration { return time.Duration(current.ShutdownGrace) }, func() error {
		next, _, err := config.ParseArgs(flag.NewFlagSet("reload", flag.ContinueOnError), args, config.DefaultServer, config.BindServer)
		if err != nil {
			return err
		}
		if err := next.Validate(); err != nil {
			return err
		}
		if next.Listen != current.Listen || next.MetricsListen != current.MetricsListen {
			log.Warn("listen addresses changed; they take effect after a restart")
		}
		if err := srv.Reload(next); err != nil {
			return err
		}
		setLevel(lv, next.LogLevel)
		setMaxProcs(next.MaxProcs, current.MaxProcs)
		current = next
		return nil
	}, errc)
}

func runClient(args []string) error {
	fs := flag.NewFlagSet("braid-proxy client", flag.ContinueOnError)
	roleUsage(fs, `braid-proxy client: SOCKS5 and transparent proxy on the client box.

Each local connection becomes one MPTCP connection to -server, whose first
subflow leaves through the best gateway in -gateway-status-file (written by
the gwsteer path manager; absent file = kernel's choice). -race tries the two
best gateways at once. Transparent mode takes connections redirected by e.g.
  iptables -t nat -A OUTPUT -p tcp -d 198.51.100.0/24 -j REDIRECT --to-ports 1081
(never redirect the server's own address). SIGHUP reloads keys, users and
gateway settings; SIGTERM drains relays, then exits.`)
	cfg, path, err := config.ParseArgs(fs, args, config.DefaultClient, config.BindClient)
	if err != nil {
		return inputErr(err)
	}
	if err := cfg.Validate(); err != nil {
		return inputErr(err)
	}
	log, lv := newLogger(cfg.LogLevel, cfg.LogFormat)
	setMaxProcs(cfg.MaxProcs, 0)
	m := metrics.New()
	m.SetBuildInfo("client", strings.TrimPrefix(buildinfo.Version("braid-proxy"), "braid-proxy "))
	cl, err := client.New(cfg, log, m)
	if err != nil {
		return inputErr(err) // the files the configuration names
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	errc := make(chan error, 2)
	if cfg.SOCKSListen != "" {
		ln, err := client.ListenLocal(ctx, cfg.SOCKSListen)
		if err != nil {
			return err
		}
		log.Info("SOCKS5 listening", "addr", ln.Addr().String(), "servers", relayAddrs(cfg), "policy", cfg.ServerPolicy, "config", path)
		go func() {
			if err := cl.ServeSOCKS(serveCtx, ln); err != nil {
				errc <- err
			}
		}()
	}
	if cfg.TransparentListen != "" {
		ln, err := client.ListenLocal(ctx, cfg.TransparentListen)
		if err != nil {
			return err
		}
		log.Info("transparent listener up", "addr", ln.Addr().String(), "servers", relayAddrs(cfg))
		go func() {
			if err := cl.ServeTransparent(serveCtx, ln); err != nil {
				errc <- err
			}
		}()
	}
	if cfg.MetricsListen != "" {
		if err := metrics.Serve(ctx, cfg.MetricsListen, m, log); err != nil {
			return err
		}
	}
	current := cfg
	return run(log, stopServing, cl, func() time.Duration { return time.Duration(current.ShutdownGrace) }, func() error {
		next, _, err := config.ParseArgs(flag.NewFlagSet("reload", flag.ContinueOnError), args, config.DefaultClient, config.BindClient)
		if err != nil {
			return err
		}
		if err := next.Validate(); err != nil {
			return err
		}
		if err := cl.Reload(next); err != nil {
			return err
		}
		setLevel(lv, next.LogLevel)
		setMaxProcs(next.MaxProcs, current.MaxProcs)
		current = next
		return nil
	}, errc)
}

// runCheck validates a role's configuration as the role would at start
// (flags over the file, then every file the configuration names) without
// listening, dialling or writing anything: for an operator before a
// restart, and for provisioning before it installs a configuration.
func runCheck(args []string) error {
	if len(args) == 0 || (args[0] != "client" && args[0] != "server") {
		return inputErr(errors.New("check: say which role: braid-proxy check client|server [-config FILE] [flags]"))
	}
	role, args := args[0], args[1:]
	fs := flag.NewFlagSet("braid-proxy check "+role, flag.ContinueOnError)
	roleUsage(fs, "braid-proxy check "+role+": validate a "+role+` configuration and the files it
names (keys, certificates, users, histograms) as "braid-proxy `+role+`" would at
start, and exit: 0 if it would start, 2 with the reason if not. -files=false
checks the settings alone (where the files are not, e.g. on a provisioning
controller).`)
	files := fs.Bool("files", true, "also load the files the configuration names")
	var (
		path string
		err  error
	)
	if role == "server" {
		var cfg *config.Server
		if cfg, path, err = config.ParseArgs(fs, args, config.DefaultServer, config.BindServer); err == nil {
			if err = cfg.Validate(); err == nil && *files {
				err = server.Check(cfg)
			}
		}
	} else {
		var cfg *config.Client
		if cfg, path, err = config.ParseArgs(fs, args, config.DefaultClient, config.BindClient); err == nil {
			if err = cfg.Validate(); err == nil && *files {
				err = client.Check(cfg)
			}
		}
	}
	if err != nil {
		return inputErr(err)
	}
	if path == "" {
		path = "(flags and defaults only)"
	}
	fmt.Printf("braid-proxy check: %s configuration %s is valid\n", role, path)
	return nil
}

func runGenkey(args []string) error {
	fs := flag.NewFlagSet("braid-proxy genkey", flag.ContinueOnError)
	id := fs.String("id", "", "client id (A-Z a-z 0-9 . _ -)")
	out := fs.String("out", "", "append the line to this file (created mode 0600); default stdout")
	static := fs.Bool("static", false, "make the server's static key instead: -out names the new file (server.static_key_file), and the public key clients need (client.server_public_key) is printed")
	if err := fs.Parse(args); err != nil {
		return inputErr(err)
	}
	if *static {
		if *out == "" {
			return inputErr(errors.New("-static needs -out FILE (the static key file to create)"))
		}
		k, err := auth.NewStaticKeyFile(*out)
		if err != nil {
			return inputErr(fmt.Errorf("-out: %w", err))
		}
		fmt.Println(auth.EncodePublicKey(k.Public))
		return nil
	}
	if err := auth.CheckID(*id); err != nil {
		return inputErr(fmt.Errorf("-id: %w", err))
	}
	key := make([]byte, auth.MinKeyLen)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	line := *id + " " + hex.EncodeToString(key) + "\n"
	var w io.Writer = os.Stdout
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := auth.CheckSecretFileMode(*out); err != nil {
			return err
		}
		w = f
	}
	_, err := io.WriteString(w, line)
	return err
}

func runGencert(args []string) error {
	fs := flag.NewFlagSet("braid-proxy gencert", flag.ContinueOnError)
	name := fs.String("name", "", "certificate name (e.g. the client id or the server's host name)")
	certFile := fs.String("cert", "", "certificate output file (PEM, 0644)")
	keyFile := fs.String("key", "", "private key output file (PEM, 0600)")
	if err := fs.Parse(args); err != nil {
		return inputErr(err)
	}
	if *name == "" || *certFile == "" || *keyFile == "" {
		return inputErr(errors.New("-name, -cert and -key are required"))
	}
	for _, f := range []string{*certFile, *keyFile} {
		if _, err := os.Stat(f); err == nil {
			return inputErr(fmt.Errorf("%s exists; refusing to overwrite", f))
		}
	}
	cert, key, pin, err := tlsauth.Generate(*name)
	if err != nil {
		return err
	}
	if err := tlsauth.WriteFiles(*certFile, *keyFile, cert, key); err != nil {
		return err
	}
	fmt.Printf("%s %s\n", *name, pin)
	return nil
}

// relayAddrs lists the relays a client configuration names, for the log.
func relayAddrs(cfg *config.Client) string {
	var a []string
	for _, r := range cfg.Relays() {
		a = append(a, r.Address)
	}
	return strings.Join(a, ",")
}

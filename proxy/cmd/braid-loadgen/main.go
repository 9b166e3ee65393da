// Command braid-loadgen is the traffic source/sink for braid-proxy's
// end-to-end tests and benchmark: it moves verified bytes through a proxy
// (or directly) and prints a JSON summary of throughput and setup latency.
//
//	braid-loadgen serve -listen 10.9.0.2:9000 [-mptcp]
//	braid-loadgen run -target 10.9.0.2:9000 [-socks 127.0.0.1:1080] [-mptcp]
//	              [-n 1] [-c 1] [-down 1G] [-up 0] [-verify] [-timeout 5m]
//
// and the relay-capacity benchmark's loads (proxy/bench/capacity.py), each
// connection spread over the SOCKS proxies in turn (-socks A,B,...):
//
//	braid-loadgen rate -target ADDR -socks A,B -rate 500 -duration 5s
//	              [-max-inflight 2000] [-down 512] [-up 64]
//	braid-loadgen hold -target ADDR -socks A,B -n 10000 [-open-rate 2000]
//	              [-interval 5s] [-hold 10s]
//
// rate prints one JSON summary; hold prints JSON lines with an "event":
// "progress" while opening, "held" once every connection was tried,
// "release" when the hold ends, and "done" with the summary.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"braid/proxy/internal/loadgen"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: braid-loadgen serve|run|rate|hold [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	case "rate":
		err = rateCmd(os.Args[2:])
	case "hold":
		err = holdCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "braid-loadgen:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "listen address")
	mptcp := fs.Bool("mptcp", false, "accept MPTCP")
	fs.Parse(args)
	var lc net.ListenConfig
	lc.SetMultipathTCP(*mptcp)
	ln, err := lc.Listen(context.Background(), "tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "listening on", ln.Addr())
	return loadgen.Serve(ln)
}

type size uint64

func (s *size) String() string { return strconv.FormatUint(uint64(*s), 10) }
func (s *size) Set(v string) error {
	mult := uint64(1)
	switch {
	case strings.HasSuffix(v, "K"):
		mult, v = 1<<10, strings.TrimSuffix(v, "K")
	case strings.HasSuffix(v, "M"):
		mult, v = 1<<20, strings.TrimSuffix(v, "M")
	case strings.HasSuffix(v, "G"):
		mult, v = 1<<30, strings.TrimSuffix(v, "G")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	*s = size(n * mult)
	return err
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	target := fs.String("target", "", "loadgen server host:port (required)")
	socks := fs.String("socks", "", "SOCKS5 proxy address (several: comma-separated, used in turn); empty connects directly")
	user := fs.String("user", "", "SOCKS5 user")
	pass := fs.String("pass", "", "SOCKS5 password")
	mptcp := fs.Bool("mptcp", false, "direct connections use MPTCP")
	src := fs.String("src", "", "direct connections: source address")
	n := fs.Int("n", 1, "connections in total")
	c := fs.Int("c", 1, "concurrent connections")
	verify := fs.Bool("verify", true, "check every byte (false: fast fixed pattern)")
	timeout := fs.Duration("timeout", 5*time.Minute, "overall time limit")
	halfClose := fs.Bool("halfclose", true, "shut the write side after the upload and require the server to see EOF")
	var down, up size = 1 << 20, 0
	fs.Var(&down, "down", "bytes downloaded per connection (K/M/G suffixes)")
	fs.Var(&up, "up", "bytes uploaded per connection")
	fs.Parse(args)
	if *target == "" {
		return fmt.Errorf("-target is required")
	}
	dial, err := dialer(*target, *socks, *user, *pass, *mptcp, *src)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	s := loadgen.RunOpts(ctx, dial, *n, *c, uint64(down), uint64(up), loadgen.Options{Verify: *verify, NoHalfClose: !*halfClose})
	json.NewEncoder(os.Stdout).Encode(s)
	if s.Failed > 0 {
		return fmt.Errorf("%d of %d connections failed: %s", s.Failed, s.Conns, s.FirstError)
	}
	return nil
}

// dialer connects directly, or through the SOCKS proxies in socks
// (comma-separated) in turn.
func dialer(target, socks, user, pass string, mptcp bool, src string) (loadgen.Dialer, error) {
	if target == "" {
		return nil, fmt.Errorf("-target is required")
	}
	if socks == "" {
		return loadgen.DirectDialer(target, mptcp, src), nil
	}
	var dials []loadgen.Dialer
	for _, p := range strings.Split(socks, ",") {
		d, err := loadgen.SOCKSDialer(p, target, user, pass)
		if err != nil {
			return nil, err
		}
		dials = append(dials, d)
	}
	return loadgen.RoundRobin(dials), nil
}

func rateCmd(args []string) error {
	fs := flag.NewFlagSet("rate", flag.ExitOnError)
	target := fs.String("target", "", "loadgen server host:port (required)")
	socks := fs.String("socks", "", "SOCKS5 proxies, comma-separated, used in turn; empty connects directly")
	rate := fs.Float64("rate", 100, "connections started per second (open loop)")
	duration := fs.Duration("duration", 5*time.Second, "how long connections are started")
	maxInflight := fs.Int("max-inflight", 2000, "connections in flight at most; one due beyond is skipped and counted")
	perConn := fs.Duration("conn-timeout", 10*time.Second, "limit of one connection's exchange")
	var down, up size = 512, 64
	fs.Var(&down, "down", "bytes downloaded per connection (the response)")
	fs.Var(&up, "up", "bytes uploaded per connection (the request)")
	fs.Parse(args)
	dial, err := dialer(*target, *socks, "", "", false, "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration+*perConn+5*time.Second)
	defer cancel()
	s := loadgen.Rate(ctx, dial, *rate, *duration, *maxInflight, *perConn, uint64(down), uint64(up),
		loadgen.Options{Verify: true})
	return json.NewEncoder(os.Stdout).Encode(s)
}

func holdCmd(args []string) error {
	fs := flag.NewFlagSet("hold", flag.ExitOnError)
	target := fs.String("target", "", "loadgen server host:port (required)")
	socks := fs.String("socks", "", "SOCKS5 proxies, comma-separated, used in turn; empty connects directly")
	n := fs.Int("n", 1000, "connections to hold")
	openRate := fs.Float64("open-rate", 2000, "connections opened per second (0: as fast as -open-inflight allows)")
	openInflight := fs.Int("open-inflight", 256, "connections being opened at once, at most")
	interval := fs.Duration("interval", 5*time.Second, "time between one connection's echoes")
	echoBytes := fs.Int("echo-bytes", 16, "bytes per echo (at least 8)")
	hold := fs.Duration("hold", 10*time.Second, "how long all connections are held once opened")
	timeout := fs.Duration("timeout", 5*time.Minute, "overall time limit")
	fs.Parse(args)
	dial, err := dialer(*target, *socks, "", "", false, "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	out := json.NewEncoder(os.Stdout)
	event := func(name string, v map[string]any) {
		v["event"] = name
		out.Encode(v)
	}
	s := loadgen.Hold(ctx, dial, loadgen.HoldOptions{
		N: *n, OpenRate: *openRate, OpenInflight: *openInflight, Interval: *interval, EchoBytes: *echoBytes,
		Hold: *hold,
		Progress: func(opened, failed int) {
			event("progress", map[string]any{"opened": opened, "failed": failed, "n": *n})
		},
		Held:    func(open int) { event("held", map[string]any{"open": open}) },
		Release: func(open int) { event("release", map[string]any{"open": open}) },
	})
	b, _ := json.Marshal(s)
	var m map[string]any
	json.Unmarshal(b, &m)
	event("done", m)
	return nil
}

// Command braid-loadgen is the traffic source/sink for braid-proxy's
// end-to-end tests and benchmark: it moves verified bytes through a proxy
// (or directly) and prints a JSON summary of throughput and setup latency.
//
//	braid-loadgen serve -listen 10.9.0.2:9000 [-mptcp]
//	braid-loadgen run -target 10.9.0.2:9000 [-socks 127.0.0.1:1080] [-mptcp]
//	              [-n 1] [-c 1] [-down 1G] [-up 0] [-verify] [-timeout 5m]
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
		fmt.Fprintln(os.Stderr, "usage: braid-loadgen serve|run [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
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
	socks := fs.String("socks", "", "SOCKS5 proxy address; empty connects directly")
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
	dial := loadgen.DirectDialer(*target, *mptcp, *src)
	if *socks != "" {
		var err error
		if dial, err = loadgen.SOCKSDialer(*socks, *target, *user, *pass); err != nil {
			return err
		}
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

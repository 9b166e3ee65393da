package e2e

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"braid/proxy/internal/client"
	"braid/proxy/internal/config"
	"braid/proxy/internal/loadgen"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/server"
)

// relayNode is one braid-proxy server of a client's servers list.
type relayNode struct {
	t      testing.TB
	addr   string
	srv    *server.Server
	m      *metrics.Registry
	log    *syncBuf
	cancel context.CancelFunc
	once   sync.Once
}

// startRelayNode starts a server on addr ("127.0.0.1:0" for any port)
// that knows box1's key and may reach every loopback address.
// muts adjust its configuration.
func startRelayNode(t testing.TB, addr string, muts ...func(*config.Server)) *relayNode {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "server.keys")
	writeSecret(t, keys, "box1 "+keyHex+"\n")
	cfg := config.DefaultServer()
	cfg.Listen, cfg.KeyFile, cfg.AllowCIDRs = addr, keys, []string{"127.0.0.0/8"}
	for _, m := range muts {
		m(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	n := &relayNode{t: t, m: metrics.New(), log: &syncBuf{}}
	log := slog.New(slog.NewTextHandler(n.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	if n.srv, err = server.New(cfg, log, n.m); err != nil {
		t.Fatal(err)
	}
	n.srv.Resolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("DNS disabled in tests")
	}}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	ln, err := server.Listen(ctx, addr, log)
	if err != nil {
		t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	go n.srv.Serve(ctx, ln)
	t.Cleanup(n.stop)
	return n
}

// stop closes the listener and every connection (a relay process that
// exits: its peers see the close at once).
func (n *relayNode) stop() {
	n.once.Do(func() {
		n.cancel()
		n.srv.Shutdown(0)
	})
}

// relays is how many connections the node has relayed (health checks
// and spares are not relays).
func (n *relayNode) relays() int64 { return n.m.Counter("relays_total").Load() }

// multiClient is a client with a servers list.
type multiClient struct {
	t     testing.TB
	socks string
	cl    *client.Client
	m     *metrics.Registry
	log   *syncBuf
}

// startMultiClient starts a client whose servers are addrs, with the given
// weights (nil: all 1), policy and fast health checks.
func startMultiClient(t testing.TB, addrs []string, weights []int, policy string, mut func(*config.Client)) *multiClient {
	t.Helper()
	var relays []config.Relay
	for i, a := range addrs {
		r := config.Relay{Address: a}
		if weights != nil {
			r.Weight = weights[i]
		}
		relays = append(relays, r)
	}
	return startRelaysClient(t, relays, policy, mut)
}

// startRelaysClient starts a client with the given servers list.
func startRelaysClient(t testing.TB, relays []config.Relay, policy string, mut func(*config.Client)) *multiClient {
	t.Helper()
	dir := t.TempDir()
	keys := filepath.Join(dir, "client.keys")
	writeSecret(t, keys, "box1 "+keyHex+"\n")
	cfg := config.DefaultClient()
	cfg.Servers = relays
	cfg.ServerPolicy = policy
	cfg.KeyFile = keys
	cfg.SOCKSListen = "127.0.0.1:0"
	cfg.GatewayStatusFile = filepath.Join(dir, "absent.json")
	cfg.HealthInterval = config.Duration(100 * time.Millisecond)
	cfg.HealthTimeout = config.Duration(time.Second)
	if mut != nil {
		mut(cfg)
	}
	mc := &multiClient{t: t, m: metrics.New(), log: &syncBuf{}}
	// Registered first, so it runs after serveClient's shutdown: the log
	// then holds the shutdown too.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("client log (tail):\n%s", tail(mc.log.String()))
		}
	})
	mc.cl, mc.socks = serveClient(t, cfg, slog.New(slog.NewTextHandler(mc.log, &slog.HandlerOptions{Level: slog.LevelDebug})), mc.m)
	return mc
}

// fetch runs one small verified transfer to target through the client.
func (mc *multiClient) fetch(target string) error {
	dial, err := loadgen.SOCKSDialer(mc.socks, target, "", "")
	if err != nil {
		mc.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return loadgen.Transfer(ctx, dial, 7, 2000, 500, true).Err
}

// servedBy fetches target and returns the index of the node that relayed
// it (-1 if none did) and the fetch's error.
func servedBy(mc *multiClient, nodes []*relayNode, target string) (int, error) {
	before := make([]int64, len(nodes))
	for i, n := range nodes {
		before[i] = n.relays()
	}
	err := mc.fetch(target)
	who := -1
	for i, n := range nodes {
		if d := n.relays() - before[i]; d == 1 && who == -1 {
			who = i
		} else if d != 0 {
			mc.t.Fatalf("one fetch relayed %d times by node %d (and maybe by %d)", d, i, who)
		}
	}
	return who, err
}

// startSinks starts a traffic sink on each of n loopback addresses
// (127.0.0.1, 127.0.0.2, ...): n destination hosts.
func startSinks(t testing.TB, n int) []string {
	var out []string
	for i := range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(net.IPv4(127, 0, 0, byte(1+i)).String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go loadgen.Serve(ln)
		out = append(out, ln.Addr().String())
	}
	return out
}

// freezer forwards TCP connections to a relay until frozen; then it
// forwards nothing more and answers nothing, without closing anything: a
// relay whose host or network vanished, as its peers see it.
type freezer struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
	done   chan struct{}
}

func startFreezer(t testing.TB, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target, done: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	hold := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hold(c)
			if f.frozen.Load() {
				continue // accepted by the kernel, never answered
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			hold(u)
			go f.pipe(u, c)
			go f.pipe(c, u)
		}
	}()
	t.Cleanup(func() {
		close(f.done)
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return f
}

func (f *freezer) addr() string { return f.ln.Addr().String() }

// pipe copies src to dst until frozen, then stalls until the test ends.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if f.frozen.Load() {
			<-f.done
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				dst.(*net.TCPConn).CloseWrite()
			}
			return
		}
	}
}

func mcDialer(mc *multiClient, target string) (loadgen.Dialer, error) {
	return loadgen.SOCKSDialer(mc.socks, target, "", "")
}

// transferLong downloads far more than the test lasts and returns how the
// download ended.
func transferLong(dial loadgen.Dialer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return loadgen.Transfer(ctx, dial, 9, 1<<40, 0, false).Err
}

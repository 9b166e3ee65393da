package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/proxy/internal/config"
	"braid/proxy/internal/dest"
	"braid/proxy/internal/socks5"
	"braid/proxy/internal/testserve"
)

// The test binary doubles as braid-pt: the end-to-end tests below start it
// as tor would, with the managed-proxy environment, and speak the protocol
// to it over real sockets.
func TestMain(m *testing.M) {
	if os.Getenv("BRAID_PT_TEST_MAIN") == "1" {
		if v := os.Getenv(handshakeTimeoutEnv); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				panic(handshakeTimeoutEnv + ": " + err.Error())
			}
			serverConfigHook = func(c *config.Server) { c.HandshakeTimeout = config.Duration(d) }
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// handshakeTimeoutEnv sets the server transport's handshake timeout in the
// test binary (TestMain): a wrong key is answered only at that deadline.
const handshakeTimeoutEnv = "BRAID_PT_TEST_HANDSHAKE_TIMEOUT"

type ptProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines []string // up to "…METHODS DONE"
	mu    sync.Mutex
	later []string // after it (LOG lines), read until the process exits
}

func (p *ptProc) laterLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.later...)
}

// startPT runs the transport with env and reads its stdout up to the
// "…METHODS DONE" line (or EOF).
func startPT(t *testing.T, env map[string]string) *ptProc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"BRAID_PT_TEST_MAIN=1", "BRAID_PT_LOG_LEVEL=debug", "BRAID_GATEWAY_STATUS=/nonexistent"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &ptProc{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	done := make(chan struct{})
	ready := done
	go func() {
		for sc.Scan() {
			if done == nil {
				p.mu.Lock()
				p.later = append(p.later, sc.Text())
				p.mu.Unlock()
				continue
			}
			p.lines = append(p.lines, sc.Text())
			if strings.HasSuffix(sc.Text(), "METHODS DONE") {
				close(done)
				done = nil
			}
		}
		if done != nil {
			close(done)
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("transport printed no METHODS DONE")
	}
	return p
}

func (p *ptProc) line(prefix string) (string, bool) {
	for _, l := range p.lines {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

type pair struct {
	server, client *ptProc
	serverAddr     netip.AddrPort
	socks          string
	pub            string // the bridge line's pub=
	userKey        string // user alice's own key in the bridge's key file
}

// startPair starts a server and a client transport; serverEnv adds to the
// server's environment.
func startPair(t *testing.T, serverEnv map[string]string) pair {
	orport := testserve.Loopback(t, testserve.Echo) // the bridge's ORPort
	dir := t.TempDir()
	// An operator's line for a user's own credential, kept when the bridge
	// writes the public line's entry.
	userKey := make([]byte, 32)
	rand.Read(userKey)
	if err := os.MkdirAll(filepath.Join(dir, "server"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server", serverKeyFile), []byte("alice "+hex.EncodeToString(userKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"TOR_PT_MANAGED_TRANSPORT_VER": "1",
		"TOR_PT_STATE_LOCATION":        filepath.Join(dir, "server"),
		"TOR_PT_SERVER_TRANSPORTS":     "braid",
		"TOR_PT_SERVER_BINDADDR":       "braid-127.0.0.1:0",
		"TOR_PT_ORPORT":                orport,
		"TOR_PT_EXIT_ON_STDIN_CLOSE":   "1",
	}
	maps.Copy(env, serverEnv)
	srv := startPT(t, env)
	sm, ok := srv.line("SMETHOD braid ")
	if !ok || srv.lines[0] != "VERSION 1" {
		t.Fatalf("server said %q", srv.lines)
	}
	f := strings.Fields(sm)
	if len(f) != 4 || !strings.HasPrefix(f[3], "ARGS:pub=") {
		t.Fatalf("SMETHOD line %q", sm)
	}
	p := pair{server: srv, serverAddr: netip.MustParseAddrPort(f[2]), pub: strings.TrimPrefix(f[3], "ARGS:pub="), userKey: hex.EncodeToString(userKey)}
	for _, name := range []string{serverKeyFile, staticKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, "server", name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("server's %s: %v %v", name, fi, err)
		}
	}
	bl, err := os.ReadFile(filepath.Join(dir, "server", bridgeLineFile))
	if err != nil || !strings.Contains(string(bl), "Bridge braid "+f[2]+" <FINGERPRINT> pub="+p.pub+"\n") {
		t.Fatalf("bridge line file %q %v", bl, err)
	}
	keys, err := os.ReadFile(filepath.Join(dir, "server", serverKeyFile))
	if err != nil || !strings.Contains(string(keys), "alice "+p.userKey+"\n") {
		t.Fatalf("the bridge dropped the operator's line from its key file: %v", err)
	}
	p.client = startPT(t, map[string]string{
		"TOR_PT_MANAGED_TRANSPORT_VER": "1",
		"TOR_PT_STATE_LOCATION":        filepath.Join(dir, "client"),
		"TOR_PT_CLIENT_TRANSPORTS":     "braid,obfs4",
		"TOR_PT_EXIT_ON_STDIN_CLOSE":   "1",
	})
	want := []string{"VERSION 1", "CMETHOD-ERROR obfs4 no such transport here (braid-pt only provides braid)"}
	if len(p.client.lines) != 4 || p.client.lines[0] != want[0] || p.client.lines[1] != want[1] || p.client.lines[3] != "CMETHODS DONE" {
		t.Fatalf("client said %q", p.client.lines)
	}
	cm := strings.Fields(p.client.lines[2])
	if len(cm) != 4 || cm[0] != "CMETHOD" || cm[1] != "braid" || cm[2] != "socks5" {
		t.Fatalf("CMETHOD line %q", p.client.lines[2])
	}
	p.socks = cm[3]
	return p
}

// socksConnect does tor's side of the SOCKS5 exchange with args in the user
// name (NUL password); it returns the connection and the reply code, or
// 0xff when the argument check itself failed.
func socksConnect(t *testing.T, socks, args string, to netip.AddrPort) (net.Conn, byte) {
	t.Helper()
	c, err := net.Dial("tcp", socks)
	if err != nil {
		t.Fatal(err)
	}
	// A wrong key is answered at the server's handshake deadline (10-15 s
	// by default, 1-1.5 s where a test sets handshakeTimeoutEnv).
	c.SetDeadline(time.Now().Add(20 * time.Second))
	msg := []byte{5, 1, socks5.MethodUserPass}
	msg = append(msg, 1, byte(len(args)))
	msg = append(msg, args...)
	msg = append(msg, 1, 0)
	msg = socks5.AppendRequest(msg, socks5.CmdConnect, dest.FromIP(to))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	var resp [4]byte
	if _, err := io.ReadFull(c, resp[:]); err != nil {
		t.Fatalf("method and auth answer: %v", err)
	}
	if resp[1] != socks5.MethodUserPass || resp[3] != 0 {
		return c, 0xff
	}
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("SOCKS reply: %v", err)
	}
	c.SetDeadline(time.Time{})
	return c, rep[1]
}

// mustEcho sends n random bytes through c to an echoing ORPort and checks
// that the same bytes come back.
func mustEcho(t *testing.T, c net.Conn, n int, what string) {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	go c.Write(data)
	got := make([]byte, n)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%s: echoed bytes differ", what)
	}
}

func TestClientServerRelayToORPort(t *testing.T) {
	p := startPair(t, nil)
	c, rep := socksConnect(t, p.socks, "pub="+p.pub, p.serverAddr)
	defer c.Close()
	if rep != socks5.ReplySucceeded {
		t.Fatalf("SOCKS reply %#x", rep)
	}
	mustEcho(t, c, 1<<20, "relay to the ORPort")
	// A user's own credential from the bridge's key file.
	c2, rep := socksConnect(t, p.socks, "pub="+p.pub+";id=alice;key="+p.userKey, p.serverAddr)
	defer c2.Close()
	if rep != socks5.ReplySucceeded {
		t.Fatalf("with a user's credential: SOCKS reply %#x", rep)
	}
}

func TestClientRefusesBadBridgeArgs(t *testing.T) {
	// The wrong key below waits for the server's handshake deadline: a
	// short one keeps the test short (no valid connection here needs more).
	p := startPair(t, map[string]string{handshakeTimeoutEnv: "1s"})
	for _, args := range []string{"id=alice", "key=" + p.userKey, "pub=00", "pub=" + p.pub + ";cert=x", "pub"} {
		c, rep := socksConnect(t, p.socks, args, p.serverAddr)
		c.Close()
		if rep != 0xff {
			t.Errorf("args %q: accepted (reply %#x)", args, rep)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.ContainsFunc(p.client.laterLines(), func(l string) bool {
		return strings.HasPrefix(l, "LOG SEVERITY=error MESSAGE=\"braid: bridge line has no pub= argument")
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("no LOG line for tor about the missing pub=; got %q", p.client.laterLines())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A wrong user key passes the argument check but the server sends
	// nothing back and closes at its handshake deadline: the SOCKS reply
	// is a failure and no relay starts.
	wrong := make([]byte, 32)
	rand.Read(wrong)
	c, rep := socksConnect(t, p.socks, "pub="+p.pub+";id=alice;key="+hex.EncodeToString(wrong), p.serverAddr)
	c.Close()
	if rep == socks5.ReplySucceeded || rep == 0xff {
		t.Fatalf("wrong key: reply %#x", rep)
	}
}

// Whoever holds the bridge line (its pub= and so the public line's key)
// can run a braid-pt server of their own, but cannot pass for the
// bridge: a client given the real line and sent to that forged server
// gets no relay.
func TestForgedBridgeRefused(t *testing.T) {
	real := startPair(t, nil)
	forged := startPair(t, map[string]string{handshakeTimeoutEnv: "1s"})
	c, rep := socksConnect(t, real.socks, "pub="+real.pub, forged.serverAddr)
	c.Close()
	if rep == socks5.ReplySucceeded || rep == 0xff {
		t.Fatalf("client relayed through a forged bridge: reply %#x", rep)
	}
	c, rep = socksConnect(t, real.socks, "pub="+real.pub, real.serverAddr)
	c.Close()
	if rep != socks5.ReplySucceeded {
		t.Fatalf("genuine bridge: reply %#x", rep)
	}
}

func TestExitOnStdinClose(t *testing.T) {
	p := startPair(t, nil)
	for _, proc := range []*ptProc{p.client, p.server} {
		proc.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- proc.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("transport still running 10 s after its stdin closed")
		}
	}
}

func TestEnvironmentErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TOR_PT_MANAGED_TRANSPORT_VER": "2", "TOR_PT_STATE_LOCATION": dir, "TOR_PT_CLIENT_TRANSPORTS": "braid"}, "VERSION-ERROR no-version"},
		{map[string]string{"TOR_PT_MANAGED_TRANSPORT_VER": "1", "TOR_PT_CLIENT_TRANSPORTS": "braid"}, "ENV-ERROR TOR_PT_STATE_LOCATION is not set"},
		{map[string]string{"TOR_PT_MANAGED_TRANSPORT_VER": "1", "TOR_PT_STATE_LOCATION": dir, "TOR_PT_SERVER_TRANSPORTS": "braid", "TOR_PT_EXTENDED_SERVER_PORT": "127.0.0.1:1"}, "SMETHOD-ERROR braid TOR_PT_EXTENDED_SERVER_PORT without TOR_PT_AUTH_COOKIE_FILE, and no TOR_PT_ORPORT"},
		{map[string]string{"TOR_PT_MANAGED_TRANSPORT_VER": "1", "TOR_PT_STATE_LOCATION": dir, "TOR_PT_CLIENT_TRANSPORTS": "braid", "TOR_PT_PROXY": "socks5://127.0.0.1:1"}, "PROXY-ERROR"},
		{map[string]string{"TOR_PT_MANAGED_TRANSPORT_VER": "1", "TOR_PT_STATE_LOCATION": dir, "TOR_PT_CLIENT_TRANSPORTS": "obfs4"}, "CMETHOD-ERROR obfs4"},
		{map[string]string{}, "ENV-ERROR neither TOR_PT_CLIENT_TRANSPORTS nor TOR_PT_SERVER_TRANSPORTS"},
	}
	for _, tc := range tests {
		cmd := exec.Command(os.Args[0])
		// Only stdout counts here (not the exit status, which a race report
		// would set): a race-built binary need not linger 1 s at exit for
		// late reports.
		cmd.Env = []string{"BRAID_PT_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0"}
		for k, v := range tc.env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, _ := cmd.Output()
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("env %v: stdout %q, want a line with %q", tc.env, out, tc.want)
		}
	}
}

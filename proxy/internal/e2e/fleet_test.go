package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"braid/proxy/internal/client"
	"braid/proxy/internal/config"
	"braid/proxy/internal/loadgen"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/testserve"
)

// fleetClient is one client box of a fleet: its own id and key file.
type fleetClient struct {
	socks string
	cfg   *config.Client
	cl    *client.Client
}

func startFleetClient(t *testing.T, server, id, key string) *fleetClient {
	t.Helper()
	cfg := clientConfig(t, server, id, key)
	cfg.SOCKSReply = config.SOCKSReplyConnected // a refusal is a SOCKS reply, not a reset
	cfg.HandshakeTimeout = config.Duration(2 * time.Second)
	cl, socks := serveClient(t, cfg, slog.New(slog.DiscardHandler), metrics.New())
	return &fleetClient{socks: socks, cfg: cfg, cl: cl}
}

// echoConn is a relayed connection to an echo server, checked by round
// trips: it stays open across the server's reloads.
type echoConn struct {
	t *testing.T
	c net.Conn
}

func openEcho(t *testing.T, socks, echo string) (*echoConn, error) {
	dial, err := loadgen.SOCKSDialer(socks, echo, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	e := &echoConn{t: t, c: c}
	return e, e.roundTrip("hello")
}

func (e *echoConn) roundTrip(msg string) error {
	e.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := e.c.Write([]byte(msg)); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(e.c, got); err != nil {
		return err
	}
	if string(got) != msg {
		e.t.Fatalf("echo %q, want %q", got, msg)
	}
	return nil
}

func newKeyHex() string {
	k := make([]byte, 32)
	rand.Read(k)
	return hex.EncodeToString(k)
}

// A relay serves a fleet of client boxes, each with its own key. An
// operator rotates one box's key and revokes another's by editing the key
// file and reloading (SIGHUP): the revoked box is refused from the reload
// on, a rotated box works with its new key and not its old one, and no
// other box's connection in flight is dropped.
func TestFleetKeysRotateAndRevokeWithoutDroppingOthers(t *testing.T) {
	p := startPair(t, fastTimeouts)
	echo := testserve.Loopback(t, testserve.Echo)
	box2Key, box3Key := newKeyHex(), newKeyHex()
	scfg := config.DefaultServer()
	scfg.Listen, scfg.KeyFile, scfg.AllowCIDRs = "127.0.0.1:0", p.keyFile, []string{"127.0.0.1/32"}
	scfg.HandshakeTimeout, scfg.FirstByteTimeout = config.Duration(time.Second), config.Duration(time.Second)
	reload := func(lines string) time.Time {
		writeSecret(t, p.keyFile, lines)
		if err := p.srv.Reload(scfg); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	reload("box1 " + keyHex + "\nbox2 " + box2Key + "\nbox3 " + box3Key + "\n")
	box2 := startFleetClient(t, p.serverAddr, "box2", box2Key)
	box3 := startFleetClient(t, p.serverAddr, "box3", box3Key)

	held := map[string]*echoConn{}
	for name, socks := range map[string]string{"box1": p.socks, "box2": box2.socks, "box3": box3.socks} {
		e, err := openEcho(t, socks, echo)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		held[name] = e
	}

	// Rotate box2's key on the relay, then on the box.
	rotated := newKeyHex()
	reload("box1 " + keyHex + "\nbox2 " + rotated + "\nbox3 " + box3Key + "\n")
	if _, err := openEcho(t, box2.socks, echo); err == nil {
		t.Fatal("box2's old key still opens connections after the rotation")
	}
	writeSecret(t, box2.cfg.KeyFile, "box2 "+rotated+"\n")
	if err := box2.cl.Reload(box2.cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := openEcho(t, box2.socks, echo); err != nil {
		t.Fatalf("box2's rotated key: %v", err)
	}

	// Revoke box1.
	revoked := reload("box2 " + rotated + "\nbox3 " + box3Key + "\n")
	_, err := openEcho(t, p.socks, echo)
	if err == nil {
		t.Fatalf("box1 still opens connections after its key was revoked\n%s", p.srvLog.String())
	}
	if d := time.Since(revoked); d > time.Second+scfgHandshake(scfg) {
		t.Fatalf("box1 refused only %v after the reload", d)
	}
	if _, err := openEcho(t, box3.socks, echo); err != nil {
		t.Fatalf("box3 after box1's revocation: %v", err)
	}

	// The connections opened before either change still carry data, box1's
	// included: a reload refuses new hellos, it cuts nothing.
	for name, e := range held {
		if err := e.roundTrip("after the reloads"); err != nil {
			t.Errorf("%s: a connection in flight was dropped by a reload: %v", name, err)
		}
	}
}

// scfgHandshake is how long a refused hello may take to be answered: the
// server closes it at its handshake deadline, stretched by up to half.
func scfgHandshake(s *config.Server) time.Duration {
	return time.Duration(s.HandshakeTimeout) * 3 / 2
}

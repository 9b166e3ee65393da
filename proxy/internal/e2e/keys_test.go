package e2e

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/client"
	"braid/proxy/internal/config"
	"braid/proxy/internal/metrics"
	"braid/proxy/internal/wire"
)

// clientConfig is a client of server with its own key file holding id's
// key, no spare connections and no metrics listener.
func clientConfig(t testing.TB, server, id, key string) *config.Client {
	t.Helper()
	dir := t.TempDir()
	kf := filepath.Join(dir, "client.keys")
	writeSecret(t, kf, id+" "+key+"\n")
	cfg := config.DefaultClient()
	cfg.Server, cfg.KeyFile, cfg.SOCKSListen, cfg.Preconnect = server, kf, "127.0.0.1:0", 0
	cfg.GatewayStatusFile = filepath.Join(dir, "absent.json")
	cfg.MetricsListen = ""
	return cfg
}

// serveClient validates cfg, starts the client and its SOCKS listener, and
// shuts both down when the test ends; it returns the client and the
// listener's address.
func serveClient(t testing.TB, cfg *config.Client, log *slog.Logger, m *metrics.Registry) (*client.Client, string) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, log, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := client.ListenLocal(ctx, cfg.SOCKSListen)
	if err != nil {
		t.Fatal(err)
	}
	go cl.ServeSOCKS(ctx, ln)
	t.Cleanup(func() { cancel(); cl.Shutdown(time.Second) })
	return cl, ln.Addr().String()
}

// startClientTo runs a client whose server is addr (a test's fake server).
func startClientTo(t *testing.T, addr string) string {
	t.Helper()
	cfg := clientConfig(t, addr, "box1", keyHex)
	cfg.SOCKSReply = config.SOCKSReplyEarly // these tests are of early mode's mechanics; auto's own below
	_, socks := serveClient(t, cfg, slog.New(slog.DiscardHandler), metrics.New())
	return socks
}

// The early key protects only what the client sends before the server's
// answer: once the answer is in, the client sends a key update and the rest
// of the upload is under the forward-secret session key. A fake server
// built on the real handshake checks where the key changes.
func TestClientMovesToSessionKeyAfterAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		early, late string
		updated     bool
		err         error
	}
	res := make(chan result, 1)
	go func() {
		var r result
		defer func() { res <- r }()
		c, err := ln.Accept()
		if err != nil {
			r.err = err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		key, _ := hex.DecodeString(keyHex)
		v := &auth.Verifier{PSKs: auth.PSKs(auth.Keys{"box1": key}), MaxSkew: time.Minute, Replay: auth.NewReplayCache(time.Minute, 10)}
		v.Replay.Start = time.Time{}
		hello := make([]byte, auth.ClientHelloLen)
		if _, r.err = io.ReadFull(c, hello); r.err != nil {
			return
		}
		acc, err := v.Verify(hello)
		if r.err = err; err != nil {
			return
		}
		if _, r.err = io.CopyN(io.Discard, c, int64(acc.Pad)); r.err != nil { // the hello's random tail
			return
		}
		ek, _ := wire.NewAEAD(acc.EarlyKey())
		o := wire.NewOpener(ek)
		_, p, err := o.ReadFrame(c, nil)
		if r.err = err; err != nil {
			return
		}
		r.early = string(p)
		sh, keys, _ := acc.ServerHello(wire.AppendReply(nil, wire.StatusOK))
		s2c, _ := wire.NewAEAD(keys.S2C)
		c2s, _ := wire.NewAEAD(keys.C2S)
		o.SetNext(c2s)
		c.Write(wire.NewSealer(s2c).Append(sh, 0, []byte("pong")))
		for {
			f, p, err := o.ReadFrame(c, nil)
			if r.err = err; err != nil {
				return
			}
			if f&wire.FlagKeyUpdate != 0 {
				r.updated = true
				continue
			}
			r.late = string(p)
			return
		}
	}()

	socks := startClientTo(t, ln.Addr().String())
	app, err := net.Dial("tcp", socks)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.SetDeadline(time.Now().Add(10 * time.Second))
	app.Write([]byte("\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50"))
	if _, err := io.ReadFull(app, make([]byte, 12)); err != nil {
		t.Fatalf("SOCKS answers: %v", err)
	}
	app.Write([]byte("early"))
	pong := make([]byte, 4)
	if _, err := io.ReadFull(app, pong); err != nil || string(pong) != "pong" {
		t.Fatalf("relayed answer %q, %v", pong, err)
	}
	app.Write([]byte("late"))
	r := <-res
	if r.err != nil {
		t.Fatalf("fake server: %v", r.err)
	}
	if r.early != "early" || r.late != "late" || !r.updated {
		t.Fatalf("early %q, late %q, key update seen %v: want the late data after a key update (under the session key)", r.early, r.late, r.updated)
	}
}

package tlsauth

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMutualPinning(t *testing.T) {
	scert, skey, spin, err := Generate("server")
	if err != nil {
		t.Fatal(err)
	}
	ccert, ckey, cpin, _ := Generate("box1")
	other, okey, _, _ := Generate("stranger")
	s, _ := tls.X509KeyPair(scert, skey)
	c, _ := tls.X509KeyPair(ccert, ckey)
	o, _ := tls.X509KeyPair(other, okey)
	peers, err := ParsePeers([]byte("# clients\nbox1 " + cpin + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	try := func(clientCert tls.Certificate, pin string) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		b, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		a, _ := ln.Accept()
		defer a.Close()
		defer b.Close()
		deadline := time.Now().Add(5 * time.Second)
		a.SetDeadline(deadline)
		b.SetDeadline(deadline)
		srv := tls.Server(a, ServerConfig(s, peers))
		errc := make(chan error, 1)
		go func() { errc <- srv.Handshake(); a.Close() }()
		cl := tls.Client(b, ClientConfig(clientCert, pin))
		cerr := cl.Handshake()
		serr := <-errc
		if serr != nil {
			return "", serr
		}
		if cerr != nil {
			return "", cerr
		}
		return PeerID(srv.ConnectionState(), peers), nil
	}
	if id, err := try(c, spin); err != nil || id != "box1" {
		t.Fatalf("good pair: id %q err %v", id, err)
	}
	if _, err := try(o, spin); err == nil {
		t.Fatal("unpinned client accepted")
	}
	if _, err := try(c, strings.Repeat("0", 64)); err == nil {
		t.Fatal("client accepted a server with another pin")
	}
}

func TestParsePeers(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	for _, bad := range []string{"", "box1", "box1 abc", "box1 " + pin + "\nbox2 " + pin, "b/x " + pin} {
		if _, err := ParsePeers([]byte(bad)); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
}

func FuzzParsePeers(f *testing.F) {
	f.Add([]byte("box1 " + strings.Repeat("ab", 32)))
	f.Fuzz(func(t *testing.T, in []byte) {
		peers, err := ParsePeers(in)
		if err != nil {
			return
		}
		for pin := range peers {
			if CheckPin(pin) != nil {
				t.Fatalf("bad pin accepted %q", pin)
			}
		}
	})
}

// The peers file decides who may use the relay: group/world access refused.
func TestLoadPeersChecksMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peers")
	line := "box1 " + strings.Repeat("ab", 32) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPeers(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("peers file with mode 0644 accepted: %v", err)
	}
	os.Chmod(path, 0o600)
	if peers, err := LoadPeers(path); err != nil || len(peers) != 1 {
		t.Fatalf("mode 0600: %v %v", peers, err)
	}
}

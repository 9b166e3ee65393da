package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestClientFileAndFlags(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, []byte(`{"server":"proxy.example:7443","key_file":"/k","idle_timeout":"1m","race":true}`), 0o644)
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	c, path, err := ParseArgs(fs, []string{"-config", p, "-idle-timeout", "2m", "-client-id", "box1"}, DefaultClient, BindClient)
	if err != nil {
		t.Fatal(err)
	}
	if path != p || c.Server != "proxy.example:7443" || !c.Race || c.ClientID != "box1" || time.Duration(c.IdleTimeout) != 2*time.Minute || !c.Encrypt {
		t.Fatalf("config %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidationNamesField(t *testing.T) {
	for _, tc := range []struct {
		mut   func(*Server)
		field string
	}{
		{func(s *Server) { s.KeyFile = "" }, "server.key_file"},
		{func(s *Server) { s.Listen = "nope" }, "server.listen"},
		{func(s *Server) { s.MaxConnsPerClient = 0 }, "server.max_conns_per_client"},
		{func(s *Server) { s.MetricsListen = "0.0.0.0:9" }, "server.metrics_listen"},
		{func(s *Server) { s.LogLevel = "loud" }, "server.log_level"},
		{func(s *Server) { s.DialTimeout = 0 }, "server.dial_timeout"},
		{func(s *Server) { s.MaxConns = 0 }, "server.max_conns"},
		{func(s *Server) { s.MaxPreauthConns = s.MaxConns }, "server.max_preauth_conns"},
		{func(s *Server) { s.MaxPreauthPerSource = 0 }, "server.max_preauth_per_source"},
		{func(s *Server) { s.FirstByteTimeout = 0 }, "server.first_byte_timeout"},
		{func(s *Server) { s.PaddingScope = "page" }, "server.padding_scope"},
		{func(s *Server) { s.PaddingBudget = -1 }, "server.padding_budget"},
	} {
		s := DefaultServer()
		s.KeyFile = "/k"
		tc.mut(s)
		err := s.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("want error on %s, got %v", tc.field, err)
		}
	}
}

// A SOCKS listener reachable from other hosts without user/password would
// be an open proxy: refused unless a users file or allow_public_socks.
func TestPublicSOCKSNeedsUsers(t *testing.T) {
	for _, tc := range []struct {
		listen, users string
		allow, ok     bool
	}{
		{"127.0.0.1:1080", "", false, true},
		{"[::1]:1080", "", false, true},
		{"localhost:1080", "", false, true},
		{"0.0.0.0:1080", "", false, false},
		{":1080", "", false, false},
		{"192.168.1.1:1080", "", false, false},
		{"192.168.1.1:1080", "/etc/braid/users", false, true},
		{"0.0.0.0:1080", "", true, true},
	} {
		c := DefaultClient()
		c.Server, c.KeyFile = "relay:7443", "/k"
		c.SOCKSListen, c.SOCKSUsersFile, c.AllowPublicSOCKS = tc.listen, tc.users, tc.allow
		err := c.Validate()
		var fe *FieldError
		if tc.ok && err != nil || !tc.ok && (!errors.As(err, &fe) || fe.Field != "client.socks_listen") {
			t.Errorf("listen %q users %q allow %v: %v, want ok=%v", tc.listen, tc.users, tc.allow, err, tc.ok)
		}
	}
}

func TestSOCKSReplyValidated(t *testing.T) {
	c := DefaultClient()
	c.Server, c.KeyFile = "relay:7443", "/k"
	for _, v := range []string{SOCKSReplyAuto, SOCKSReplyEarly, SOCKSReplyConnected} {
		c.SOCKSReply = v
		if err := c.Validate(); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	c.SOCKSReply = "late"
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "client.socks_reply" {
		t.Fatalf("want error on client.socks_reply, got %v", err)
	}
}

func TestUnknownFieldRefused(t *testing.T) {
	err := Decode([]byte(`{"listn":"x"}`), DefaultServer())
	if err == nil || !strings.Contains(err.Error(), "listn") {
		t.Fatalf("got %v", err)
	}
	if err := Decode([]byte(`{"idle_timeout":5}`), DefaultServer()); err == nil {
		t.Fatal("numeric duration accepted")
	}
	if err := Decode([]byte(`{} {}`), DefaultServer()); err == nil {
		t.Fatal("trailing data accepted")
	}
}

func TestRepeatedFieldRefused(t *testing.T) {
	err := Decode([]byte(`{"listen":"127.0.0.1:1","allow_cidrs":["10.0.0.0/8"],"listen":"127.0.0.1:2"}`), DefaultServer())
	if err == nil || !strings.Contains(err.Error(), `"listen" is given twice`) {
		t.Fatalf("got %v", err)
	}
	if err := Decode([]byte(`{"allow_cidrs":["10.0.0.0/8","10.0.0.0/8"]}`), DefaultServer()); err != nil {
		t.Fatalf("a list with equal items refused: %v", err)
	}
}

func TestSyntaxErrorNamesLineAndColumn(t *testing.T) {
	err := Decode([]byte("{\n  \"listen\": \"x\",\n  \"idle_timeout\" \"5s\"\n}"), DefaultServer())
	if err == nil || !strings.Contains(err.Error(), "line 3, column 18") {
		t.Fatalf("got %v", err)
	}
}

func TestFlagsHelpMentionsEveryField(t *testing.T) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindServer(DefaultServer(), fs)
	for _, name := range []string{"listen", "key-file", "allow-cidr", "allow", "max-conns-per-client", "idle-timeout"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag -%s missing", name)
		}
	}
}

func FuzzDecodeServer(f *testing.F) {
	f.Add([]byte(`{"listen":":7443","key_file":"/k","allow_cidrs":["10.0.0.0/8"],"idle_timeout":"1m"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := DefaultServer()
		if Decode(in, s) == nil {
			s.Validate() // must not panic
		}
	})
}

func FuzzDecodeClient(f *testing.F) {
	f.Add([]byte(`{"server":"a:1","key_file":"/k","race":true,"race_delay":"5ms"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := DefaultClient()
		if Decode(in, c) == nil {
			c.Validate()
		}
	})
}

// The shipped examples must stay valid.
func TestExamplesValidate(t *testing.T) {
	for name, check := range map[string]func(string) error{
		"client.json": func(p string) error {
			c, err := LoadFile(p, DefaultClient)
			if err != nil {
				return err
			}
			return c.Validate()
		},
		"client-relays.json": func(p string) error {
			c, err := LoadFile(p, DefaultClient)
			if err != nil {
				return err
			}
			return c.Validate()
		},
		"client-tls.json": func(p string) error {
			c, err := LoadFile(p, DefaultClient)
			if err != nil {
				return err
			}
			return c.Validate()
		},
		"server.json": func(p string) error {
			s, err := LoadFile(p, DefaultServer)
			if err != nil {
				return err
			}
			return s.Validate()
		},
		"server-tls.json": func(p string) error {
			s, err := LoadFile(p, DefaultServer)
			if err != nil {
				return err
			}
			return s.Validate()
		},
	} {
		if err := check(filepath.Join("..", "..", "examples", name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

package pt

import (
	"bytes"
	"errors"
	"maps"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func envOf(m map[string]string) Env { return func(k string) string { return m[k] } }

func TestParseSOCKSArgs(t *testing.T) {
	tests := []struct {
		name, user, pass string
		want             Args
		err              bool
	}{
		{"empty", "", "\x00", nil, false},
		{"one in user, NUL password", "key=abc", "\x00", Args{{"key", "abc"}}, false},
		{"two", "key=abc;id=box1", "\x00", Args{{"key", "abc"}, {"id", "box1"}}, false},
		{"split over user and password", "key=ab", "c;id=x", Args{{"key", "abc"}, {"id", "x"}}, false},
		{"escaped separators", `k=a\;b\=c\\d`, "\x00", Args{{"k", `a;b=c\d`}}, false},
		{"escaped key", `a\=b=c`, "\x00", Args{{"a=b", "c"}}, false},
		{"empty value", "k=", "\x00", Args{{"k", ""}}, false},
		{"equals in value", "k=a=b", "\x00", Args{{"k", "a=b"}}, false},
		{"repeated key kept in order", "k=1;k=2", "\x00", Args{{"k", "1"}, {"k", "2"}}, false},
		{"no equals", "key", "\x00", nil, true},
		{"empty key", "=v", "\x00", nil, true},
		{"trailing separator", "k=v;", "\x00", nil, true},
		{"lone backslash", `k=v\`, "\x00", nil, true},
		{"empty element", "k=v;;j=w", "\x00", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSOCKSArgs(tc.user, tc.pass)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err != nil && !errors.Is(err, ErrArgs) {
				t.Fatalf("error %v does not wrap ErrArgs", err)
			}
			if !tc.err && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestEncodeArgsRoundTrip(t *testing.T) {
	args := Args{{"key", "ab;c=d\\e"}, {"id", "box,1"}}
	for _, sep := range []byte{';', ','} {
		enc, err := EncodeArgs(args, sep)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseKV(enc, sep)
		if err != nil {
			t.Fatalf("sep %q: %v", sep, err)
		}
		if !reflect.DeepEqual(got, args) {
			t.Fatalf("sep %q: %q decodes to %#v", sep, enc, got)
		}
	}
	if _, err := EncodeArgs(Args{{"k", "a b"}}, ' '); err == nil {
		t.Fatal("white space in a value was accepted")
	}
}

func TestParseServerOptions(t *testing.T) {
	got, err := ParseServerOptions(`braid:key=abc;braid:id=x;obfs4:iat-mode=1;braid:v=a\;b`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Args{
		"braid": {{"key", "abc"}, {"id", "x"}, {"v", "a;b"}},
		"obfs4": {{"iat-mode", "1"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	for _, bad := range []string{"key=abc", "braid:=x", ":k=v", "9x:k=v", "braid:k"} {
		if _, err := ParseServerOptions(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseClient(t *testing.T) {
	base := map[string]string{
		"TOR_PT_MANAGED_TRANSPORT_VER": "1",
		"TOR_PT_STATE_LOCATION":        "/var/lib/tor/pt_state",
		"TOR_PT_CLIENT_TRANSPORTS":     "braid,obfs4",
		"TOR_PT_EXIT_ON_STDIN_CLOSE":   "1",
	}
	c, err := ParseClient(envOf(base))
	if err != nil {
		t.Fatal(err)
	}
	if c.StateDir != "/var/lib/tor/pt_state" || !c.ExitOnStdinClose || !reflect.DeepEqual(c.Transports, []string{"braid", "obfs4"}) {
		t.Fatalf("parsed %+v", c)
	}
	tests := []struct {
		name, key, value, line string
	}{
		{"no version", "TOR_PT_MANAGED_TRANSPORT_VER", "", "ENV-ERROR TOR_PT_MANAGED_TRANSPORT_VER is not set"},
		{"unknown version", "TOR_PT_MANAGED_TRANSPORT_VER", "2,3", "VERSION-ERROR no-version"},
		{"no state", "TOR_PT_STATE_LOCATION", "", "ENV-ERROR TOR_PT_STATE_LOCATION is not set"},
		{"no transports", "TOR_PT_CLIENT_TRANSPORTS", "", "ENV-ERROR TOR_PT_CLIENT_TRANSPORTS is not set"},
		{"bad transport name", "TOR_PT_CLIENT_TRANSPORTS", "braid,ob-fs", "ENV-ERROR TOR_PT_CLIENT_TRANSPORTS: invalid transport name"},
		{"bad stdin flag", "TOR_PT_EXIT_ON_STDIN_CLOSE", "yes", "ENV-ERROR TOR_PT_EXIT_ON_STDIN_CLOSE must be 0 or 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			env[tc.key] = tc.value
			_, err := ParseClient(envOf(env))
			var ee *EnvError
			if !errors.As(err, &ee) || !strings.HasPrefix(ee.Line, tc.line) {
				t.Fatalf("err = %v, want a line starting %q", err, tc.line)
			}
		})
	}
	// Several versions offered, ours among them.
	base["TOR_PT_MANAGED_TRANSPORT_VER"] = "2,1"
	if _, err := ParseClient(envOf(base)); err != nil {
		t.Fatal(err)
	}
}

func TestParseServer(t *testing.T) {
	base := map[string]string{
		"TOR_PT_MANAGED_TRANSPORT_VER":    "1",
		"TOR_PT_STATE_LOCATION":           "/s",
		"TOR_PT_SERVER_TRANSPORTS":        "braid",
		"TOR_PT_SERVER_BINDADDR":          "braid-10.0.0.1:4433,obfs4-[::1]:80",
		"TOR_PT_ORPORT":                   "127.0.0.1:9001",
		"TOR_PT_EXTENDED_SERVER_PORT":     "127.0.0.1:9002",
		"TOR_PT_SERVER_TRANSPORT_OPTIONS": "braid:id=x",
	}
	s, err := ParseServer(envOf(base))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := s.BindFor("braid"); !ok || b != netip.MustParseAddrPort("10.0.0.1:4433") {
		t.Fatalf("bind %v %v", b, ok)
	}
	if b, _ := s.BindFor("obfs4"); b != netip.MustParseAddrPort("[::1]:80") {
		t.Fatalf("obfs4 bind %v", b)
	}
	if s.ORPort != netip.MustParseAddrPort("127.0.0.1:9001") || s.ExtORPort.Port() != 9002 {
		t.Fatalf("ports %v %v", s.ORPort, s.ExtORPort)
	}
	if v, _ := s.Options["braid"].Get("id"); v != "x" {
		t.Fatalf("options %#v", s.Options)
	}
	tests := []struct {
		name, key, value, line string
	}{
		{"bad orport", "TOR_PT_ORPORT", "localhost:9001", "ENV-ERROR TOR_PT_ORPORT"},
		{"orport without port", "TOR_PT_ORPORT", "127.0.0.1", "ENV-ERROR TOR_PT_ORPORT"},
		{"bind without transport", "TOR_PT_SERVER_BINDADDR", "10.0.0.1:4433", "ENV-ERROR TOR_PT_SERVER_BINDADDR"},
		{"bind bad address", "TOR_PT_SERVER_BINDADDR", "braid-nowhere:1", "ENV-ERROR TOR_PT_SERVER_BINDADDR"},
		{"bad options", "TOR_PT_SERVER_TRANSPORT_OPTIONS", "braid", "ENV-ERROR TOR_PT_SERVER_TRANSPORT_OPTIONS"},
		{"no transports", "TOR_PT_SERVER_TRANSPORTS", "", "ENV-ERROR TOR_PT_SERVER_TRANSPORTS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			env[tc.key] = tc.value
			_, err := ParseServer(envOf(env))
			var ee *EnvError
			if !errors.As(err, &ee) || !strings.HasPrefix(ee.Line, tc.line) {
				t.Fatalf("err = %v, want a line starting %q", err, tc.line)
			}
		})
	}
	delete(base, "TOR_PT_ORPORT")
	delete(base, "TOR_PT_EXTENDED_SERVER_PORT")
	if _, err := ParseServer(envOf(base)); err == nil || !strings.Contains(err.Error(), "neither TOR_PT_ORPORT") {
		t.Fatalf("no ORPort: %v", err)
	}
}

func TestOutLines(t *testing.T) {
	var buf bytes.Buffer
	o := NewOut(&buf)
	o.Version()
	o.CMethod("braid", netip.MustParseAddrPort("127.0.0.1:5555"))
	o.CMethodError("obfs4", "no such\ntransport")
	o.CMethodsDone()
	if err := o.SMethod("braid", netip.MustParseAddrPort("[::]:4433"), Args{{"key", "a,b"}}); err != nil {
		t.Fatal(err)
	}
	o.SMethodsDone()
	o.Log("notice", "say \"hi\"\n")
	want := "VERSION 1\n" +
		"CMETHOD braid socks5 127.0.0.1:5555\n" +
		"CMETHOD-ERROR obfs4 no such transport\n" +
		"CMETHODS DONE\n" +
		"SMETHOD braid [::]:4433 ARGS:key=a\\,b\n" +
		"SMETHODS DONE\n" +
		"LOG SEVERITY=notice MESSAGE=\"say \\\"hi\\\"\\n\"\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// FuzzParseSOCKSArgs: never panics; whatever parses re-encodes to something
// that parses back to the same arguments.
func FuzzParseSOCKSArgs(f *testing.F) {
	for _, s := range []string{"key=abc;id=x", `k=a\;b`, "=", `\`, "k=v;", "a=b=c;d=\\\\"} {
		f.Add(s, "\x00")
	}
	f.Fuzz(func(t *testing.T, user, pass string) {
		args, err := ParseSOCKSArgs(user, pass)
		if err != nil {
			return
		}
		enc, err := EncodeArgs(args, ';')
		if err != nil {
			return // white space: not representable in a bridge line
		}
		back, err := parseKV(enc, ';')
		if err != nil || !reflect.DeepEqual(back, args) {
			t.Fatalf("%q -> %#v -> %q -> %#v, %v", user+pass, args, enc, back, err)
		}
	})
}

// FuzzParseServer: arbitrary environments never panic, and an accepted
// one has an ORPort or Extended ORPort and valid bind entries.
func FuzzParseServer(f *testing.F) {
	f.Add("1", "braid", "braid-127.0.0.1:1", "127.0.0.1:9001", "braid:k=v")
	f.Add("1,2", "*", "x-[::1]:0", "", `a:b=\`)
	f.Fuzz(func(t *testing.T, ver, transports, bind, orport, opts string) {
		s, err := ParseServer(envOf(map[string]string{
			"TOR_PT_MANAGED_TRANSPORT_VER":    ver,
			"TOR_PT_STATE_LOCATION":           "/s",
			"TOR_PT_SERVER_TRANSPORTS":        transports,
			"TOR_PT_SERVER_BINDADDR":          bind,
			"TOR_PT_ORPORT":                   orport,
			"TOR_PT_SERVER_TRANSPORT_OPTIONS": opts,
		}))
		if err != nil {
			var ee *EnvError
			if !errors.As(err, &ee) || strings.ContainsAny(ee.Line, "\r\n") {
				t.Fatalf("error %q is not a one-line EnvError", err)
			}
			return
		}
		if !s.ORPort.IsValid() {
			t.Fatal("accepted without an ORPort")
		}
		for _, b := range s.Binds {
			if !validName(b.Transport) || !b.Addr.IsValid() {
				t.Fatalf("bad bind %+v", b)
			}
		}
	})
}

func TestOutboundBindAddresses(t *testing.T) {
	for _, role := range []string{"client", "server"} {
		base := map[string]string{
			"TOR_PT_MANAGED_TRANSPORT_VER": "1",
			"TOR_PT_STATE_LOCATION":        "/s",
			"TOR_PT_CLIENT_TRANSPORTS":     "braid",
			"TOR_PT_SERVER_TRANSPORTS":     "braid",
			"TOR_PT_ORPORT":                "127.0.0.1:9001",
		}
		parse := func(env map[string]string) (Common, error) {
			if role == "client" {
				c, err := ParseClient(envOf(env))
				if err != nil {
					return Common{}, err
				}
				return c.Common, nil
			}
			s, err := ParseServer(envOf(env))
			if err != nil {
				return Common{}, err
			}
			return s.Common, nil
		}
		c, err := parse(base)
		if err != nil || c.OutboundV4.IsValid() || c.OutboundV6.IsValid() {
			t.Fatalf("%s, unset: %+v %v", role, c, err)
		}
		if a, ok := c.OutboundFor(netip.MustParseAddr("192.0.2.1")); ok {
			t.Fatalf("%s: unset bind address gave %v", role, a)
		}
		good := []struct{ v4, v6, wantV4, wantV6 string }{
			{"203.0.113.4", "", "203.0.113.4", ""},
			{"", "[2001:db8::4]", "", "2001:db8::4"}, // tor wraps IPv6 in brackets
			{"", "2001:db8::4", "", "2001:db8::4"},   // and without them
			{"203.0.113.4", "[2001:db8::4]", "203.0.113.4", "2001:db8::4"},
		}
		for _, g := range good {
			env := maps.Clone(base)
			env["TOR_PT_OUTBOUND_BIND_ADDRESS_V4"], env["TOR_PT_OUTBOUND_BIND_ADDRESS_V6"] = g.v4, g.v6
			c, err := parse(env)
			if err != nil {
				t.Fatalf("%s %q %q: %v", role, g.v4, g.v6, err)
			}
			if c.OutboundV4.String() != g.wantV4 && !(g.wantV4 == "" && !c.OutboundV4.IsValid()) ||
				c.OutboundV6.String() != g.wantV6 && !(g.wantV6 == "" && !c.OutboundV6.IsValid()) {
				t.Fatalf("%s %q %q: parsed %v %v", role, g.v4, g.v6, c.OutboundV4, c.OutboundV6)
			}
		}
		bad := []struct{ key, value, line string }{
			{"TOR_PT_OUTBOUND_BIND_ADDRESS_V4", "2001:db8::4", `ENV-ERROR TOR_PT_OUTBOUND_BIND_ADDRESS_V4: "2001:db8::4" is not an IPv4 address`},
			{"TOR_PT_OUTBOUND_BIND_ADDRESS_V4", "203.0.113.4:80", `ENV-ERROR TOR_PT_OUTBOUND_BIND_ADDRESS_V4: "203.0.113.4:80" is not an IP address`},
			{"TOR_PT_OUTBOUND_BIND_ADDRESS_V4", "host.example", `ENV-ERROR TOR_PT_OUTBOUND_BIND_ADDRESS_V4: "host.example" is not an IP address`},
			{"TOR_PT_OUTBOUND_BIND_ADDRESS_V6", "203.0.113.4", `ENV-ERROR TOR_PT_OUTBOUND_BIND_ADDRESS_V6: "203.0.113.4" is not an IPv6 address`},
			{"TOR_PT_OUTBOUND_BIND_ADDRESS_V6", "[fe80::1%eth0]", `ENV-ERROR TOR_PT_OUTBOUND_BIND_ADDRESS_V6: "[fe80::1%eth0]" is not an IP address`},
			{"TOR_PT_OUTBOUND_BIND_ADDRESS_V6", "[2001:db8::4", `ENV-ERROR TOR_PT_OUTBOUND_BIND_ADDRESS_V6: "[2001:db8::4" is not an IP address`},
		}
		for _, b := range bad {
			env := maps.Clone(base)
			env[b.key] = b.value
			_, err := parse(env)
			var ee *EnvError
			if !errors.As(err, &ee) || ee.Line != b.line {
				t.Errorf("%s %s=%q: %v, want %q", role, b.key, b.value, err, b.line)
			}
		}
	}
}

func TestOutboundFor(t *testing.T) {
	c := Common{OutboundV4: netip.MustParseAddr("203.0.113.4"), OutboundV6: netip.MustParseAddr("2001:db8::4")}
	for dst, want := range map[string]string{
		"192.0.2.1":        "203.0.113.4",
		"::ffff:192.0.2.1": "203.0.113.4", // an IPv4 destination, however written
		"2001:db8:1::1":    "2001:db8::4",
		"127.0.0.1":        "", // pt-spec: ignored for loopback
		"127.5.6.7":        "",
		"::1":              "",
		"::ffff:127.0.0.1": "",
	} {
		got, ok := c.OutboundFor(netip.MustParseAddr(dst))
		if want == "" && ok || want != "" && (!ok || got.String() != want) {
			t.Errorf("OutboundFor(%s) = %v %v, want %q", dst, got, ok, want)
		}
	}
	only4 := Common{OutboundV4: netip.MustParseAddr("203.0.113.4")}
	if a, ok := only4.OutboundFor(netip.MustParseAddr("2001:db8:1::1")); ok {
		t.Errorf("an IPv6 destination got the IPv4 bind address %v", a)
	}
}

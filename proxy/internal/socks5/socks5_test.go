package socks5

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	"braid/proxy/internal/dest"
)

func TestReadGreeting(t *testing.T) {
	for _, tc := range []struct {
		in      string
		methods string
		ok      bool
	}{
		{"\x05\x01\x00", "\x00", true},
		{"\x05\x02\x00\x02", "\x00\x02", true},
		{"\x04\x01\x00", "", false},
		{"\x05\x00", "", false},
		{"\x05\x03\x00", "", false}, // truncated
		{"", "", false},
	} {
		m, err := ReadGreeting(strings.NewReader(tc.in))
		if (err == nil) != tc.ok || string(m) != tc.methods {
			t.Errorf("ReadGreeting(%q) = %q, %v", tc.in, m, err)
		}
	}
}

func TestReadUserPass(t *testing.T) {
	u, p, err := ReadUserPass(strings.NewReader("\x01\x03bob\x06secret"))
	if err != nil || u != "bob" || p != "secret" {
		t.Fatalf("got %q %q %v", u, p, err)
	}
	for _, in := range []string{"\x02\x03bob\x01x", "\x01\x00\x01x", "\x01\x03bob\x00", "\x01\x03bo"} {
		if _, _, err := ReadUserPass(strings.NewReader(in)); err == nil {
			t.Errorf("ReadUserPass(%q) accepted", in)
		}
	}
}

func TestReadRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		want  dest.Addr
		reply byte // expected reply code on error, 0xff for "no error"
	}{
		{"ipv4", "\x05\x01\x00\x01\xc0\x00\x02\x01\x00\x50", dest.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 80}, 0xff},
		{"ipv6", "\x05\x01\x00\x04" + string(netip.MustParseAddr("2001:db8::1").AsSlice()) + "\x01\xbb", dest.Addr{IP: netip.MustParseAddr("2001:db8::1"), Port: 443}, 0xff},
		{"name", "\x05\x01\x00\x03\x0bexample.com\x00\x50", dest.Addr{Name: "example.com", Port: 80}, 0xff},
		{"literal as name", "\x05\x01\x00\x03\x0810.0.0.1\x00\x50", dest.Addr{}, 0xff},
		{"bind", "\x05\x02\x00\x01\x00\x00\x00\x00\x00\x50", dest.Addr{}, ReplyCmdNotSupported},
		{"udp", "\x05\x03\x00\x01\x00\x00\x00\x00\x00\x50", dest.Addr{}, ReplyCmdNotSupported},
		{"unknown cmd", "\x05\x09\x00\x01\x00\x00\x00\x00\x00\x50", dest.Addr{}, ReplyCmdNotSupported},
		{"bad atyp", "\x05\x01\x00\x07\x00", dest.Addr{}, ReplyAddrTypeNotSupport},
		{"empty name", "\x05\x01\x00\x03\x00\x00\x50", dest.Addr{}, ReplyAddrTypeNotSupport},
		{"bad name", "\x05\x01\x00\x03\x03a b\x00\x50", dest.Addr{}, ReplyAddrTypeNotSupport},
		{"port 0", "\x05\x01\x00\x01\x01\x02\x03\x04\x00\x00", dest.Addr{}, ReplyAddrTypeNotSupport},
		{"bad version", "\x04\x01\x00\x01\x01\x02\x03\x04\x00\x50", dest.Addr{}, ReplyGeneralFailure},
		{"truncated name", "\x05\x01\x00\x03\xffabc", dest.Addr{}, ReplyGeneralFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ReadRequest(strings.NewReader(tc.in))
			if tc.reply == 0xff {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if tc.want.Port != 0 && req.Dest != tc.want {
					t.Fatalf("dest = %+v, want %+v", req.Dest, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", req)
			}
			if got := ReplyFor(err); got != tc.reply {
				t.Fatalf("reply %#x, want %#x (%v)", got, tc.reply, err)
			}
		})
	}
}

func TestLiteralNameBecomesIP(t *testing.T) {
	req, err := ReadRequest(strings.NewReader("\x05\x01\x00\x03\x0810.0.0.1\x00\x50"))
	if err != nil || req.Dest.Name != "" || req.Dest.IP != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("got %+v %v", req, err)
	}
}

func TestRequestLeavesTrailingData(t *testing.T) {
	r := strings.NewReader("\x05\x01\x00\x01\xc0\x00\x02\x01\x00\x50GET /")
	if _, err := ReadRequest(r); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "GET /" {
		t.Fatalf("rest %q", rest)
	}
}

func TestWriteReply(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReply(&b, ReplyNotAllowed, netip.AddrPort{}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("reply %q", got)
	}
}

func TestReplyForPlainError(t *testing.T) {
	if ReplyFor(errors.New("x")) != ReplyGeneralFailure {
		t.Fatal("plain error should map to general failure")
	}
}

// Fuzz targets: no input may panic, and every accepted message must encode
// back to exactly the bytes consumed.

func FuzzReadRequest(f *testing.F) {
	f.Add([]byte("\x05\x01\x00\x03\x0bexample.com\x00\x50"))
	f.Add([]byte("\x05\x01\x00\x01\xc0\x00\x02\x01\x00\x50"))
	f.Add([]byte("\x05\x01\x00\x04\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x01\xbb"))
	f.Add([]byte("\x05\x02\x00\x09"))
	f.Add([]byte("\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x7f\x00\x00\x01\x00\x50"))
	f.Add([]byte("\x05\x01\x00\x03\x07" + "1.2.3.4\x00\x50"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		req, err := ReadRequest(r)
		if err != nil {
			return
		}
		consumed := append([]byte(nil), in[:len(in)-r.Len()]...)
		consumed[2] = 0 // RSV is ignored, as most servers do
		enc := AppendRequest(nil, req.Cmd, req.Dest)
		// A literal address sent as a name, or an IPv4-mapped IPv6
		// address, normalises to the plain address type: then the
		// encoding differs but must parse back to the same destination.
		if enc[3] == consumed[3] && !bytes.Equal(enc, consumed) {
			t.Fatalf("round trip %q != %q", enc, consumed)
		}
		again, err := ReadRequest(bytes.NewReader(enc))
		if err != nil || again.Dest != req.Dest || again.Cmd != req.Cmd {
			t.Fatalf("re-encoded %q parses to %+v, %v; want %+v", enc, again, err, req)
		}
	})
}

func FuzzReadGreeting(f *testing.F) {
	f.Add([]byte("\x05\x01\x00"))
	f.Add([]byte("\x05\x02\x00\x02"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ReadGreeting(bytes.NewReader(in))
		if err == nil && (len(m) == 0 || len(m) != int(in[1])) {
			t.Fatalf("methods %q from %q", m, in)
		}
	})
}

func FuzzReadUserPass(f *testing.F) {
	f.Add([]byte("\x01\x03bob\x06secret"))
	f.Fuzz(func(t *testing.T, in []byte) {
		u, p, err := ReadUserPass(bytes.NewReader(in))
		if err == nil && (len(u) == 0 || len(p) == 0) {
			t.Fatalf("accepted empty credentials from %q", in)
		}
	})
}

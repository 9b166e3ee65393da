package dest

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"example.com", true},
		{"example.com.", true},
		{"a-b_c.d9", true},
		{"localhost", true},
		{"", false},
		{".", false},
		{"a..b", false},
		{".a", false},
		{"a b", false},
		{"a\x00b", false},
		{"fe80::1%eth0", false},
		{strings.Repeat("a", 64) + ".com", false},
		{strings.Repeat("a.", 127) + "a", false},
	} {
		err := CheckName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestValidate(t *testing.T) {
	ip := netip.MustParseAddr("192.0.2.1")
	for _, tc := range []struct {
		a  Addr
		ok bool
	}{
		{Addr{Name: "x.org", Port: 80}, true},
		{Addr{IP: ip, Port: 443}, true},
		{Addr{IP: ip}, false},
		{Addr{Port: 1}, false},
		{Addr{Name: "x.org", IP: ip, Port: 1}, false},
	} {
		if err := tc.a.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok=%v", tc.a, err, tc.ok)
		}
	}
	if s := (Addr{IP: netip.MustParseAddr("2001:db8::1"), Port: 8}).String(); s != "[2001:db8::1]:8" {
		t.Errorf("String = %q", s)
	}
}

func FuzzCheckName(f *testing.F) {
	f.Add("example.com.")
	f.Add("a..b")
	f.Fuzz(func(t *testing.T, name string) {
		if CheckName(name) != nil {
			return
		}
		for _, c := range []byte(name) {
			if c <= ' ' || c >= 0x7f || c == '%' || c == '/' || c == ':' {
				t.Fatalf("accepted %q with byte %q", name, c)
			}
		}
	})
}

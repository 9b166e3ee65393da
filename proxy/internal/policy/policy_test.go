package policy

import (
	"errors"
	"net/netip"
	"testing"
)

func TestDefaultRefusals(t *testing.T) {
	p, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ip string
		ok bool
	}{
		{"8.8.8.8", true},
		{"2a00:1450::1", true},
		{"127.0.0.1", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"10.1.2.3", false},
		{"172.20.0.1", false},
		{"192.168.1.1", false},
		{"100.64.0.1", false},
		{"169.254.169.254", false},
		{"fd00:ec2::254", false},
		{"fe80::1", false},
		{"0.0.0.0", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"fc00::1", false},
	} {
		err := p.CheckIP(netip.MustParseAddr(tc.ip), false)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.ip, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("%s: error does not wrap ErrRefused", tc.ip)
		}
	}
}

func TestAllowCIDRsAndList(t *testing.T) {
	p, err := New([]string{"127.0.0.1/32", "10.9.0.0/24"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.CheckIP(netip.MustParseAddr("127.0.0.1"), false) != nil || p.CheckIP(netip.MustParseAddr("10.9.0.5"), false) != nil {
		t.Fatal("allowed ranges refused")
	}
	if p.CheckIP(netip.MustParseAddr("127.0.0.2"), false) == nil {
		t.Fatal("127.0.0.2 allowed")
	}

	l, err := New(nil, []string{"*.example.com", "exact.org", "198.51.100.0/24", "203.0.113.9"})
	if err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{"a.example.com": true, "example.com": false, "exact.org": true, "EXACT.org.": true, "evil.org": false, "badexample.com": false} {
		if (l.CheckName(name) == nil) != ok {
			t.Errorf("CheckName(%s) ok=%v", name, !ok)
		}
	}
	if l.CheckIP(netip.MustParseAddr("8.8.8.8"), false) == nil {
		t.Error("literal outside allow-list accepted")
	}
	if l.CheckIP(netip.MustParseAddr("8.8.8.8"), true) != nil {
		t.Error("address of an allowed name refused")
	}
	if l.CheckIP(netip.MustParseAddr("127.0.0.1"), true) == nil {
		t.Error("allowed name resolving to loopback accepted")
	}
	if l.CheckIP(netip.MustParseAddr("198.51.100.4"), false) != nil || l.CheckIP(netip.MustParseAddr("203.0.113.9"), false) != nil {
		t.Error("allow-listed networks refused")
	}
	for _, bad := range [][]string{{"300.1.1.1/8"}, {"not a name"}} {
		if _, err := New(bad, nil); err == nil {
			t.Errorf("New(%v) accepted", bad)
		}
		if _, err := New(nil, bad); err == nil && bad[0] != "300.1.1.1/8" {
			t.Errorf("New(nil, %v) accepted", bad)
		}
	}
}

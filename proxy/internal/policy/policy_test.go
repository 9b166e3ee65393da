package policy

import (
	"errors"
	"net/netip"
	"testing"
)

func TestDefaultRefusals(t *testing.T) {
	p, err := New(nil, nil, nil)
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
	p, err := New([]string{"127.0.0.1/32", "10.9.0.0/24"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.CheckIP(netip.MustParseAddr("127.0.0.1"), false) != nil || p.CheckIP(netip.MustParseAddr("10.9.0.5"), false) != nil {
		t.Fatal("allowed ranges refused")
	}
	if p.CheckIP(netip.MustParseAddr("127.0.0.2"), false) == nil {
		t.Fatal("127.0.0.2 allowed")
	}

	l, err := New(nil, []string{"*.example.com", "exact.org", "93.184.216.0/24", "1.1.1.1"}, nil)
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
	if l.CheckIP(netip.MustParseAddr("93.184.216.4"), false) != nil || l.CheckIP(netip.MustParseAddr("1.1.1.1"), false) != nil {
		t.Error("allow-listed networks refused")
	}
	for _, bad := range [][]string{{"300.1.1.1/8"}, {"not a name"}} {
		if _, err := New(bad, nil, nil); err == nil {
			t.Errorf("New(%v, nil, nil) accepted", bad)
		}
		if _, err := New(nil, bad, nil); err == nil && bad[0] != "300.1.1.1/8" {
			t.Errorf("New(nil, %v, nil) accepted", bad)
		}
	}
}

// An allow-list narrows what the relay reaches; it never re-allows what is
// refused. Only allow_cidrs do that, and refuse_cidrs win over both.
func TestAllowListDoesNotReallowRefused(t *testing.T) {
	self := []netip.Addr{netip.MustParseAddr("93.184.216.34")}
	for _, list := range [][]string{{"0.0.0.0/0", "::/0"}, {"93.184.0.0/16", "10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16"}} {
		p, err := New(nil, list, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Self = func() []netip.Addr { return self }
		for _, ip := range []string{"93.184.216.34", "127.0.0.1", "169.254.169.254", "10.0.0.1", "::1"} {
			if p.CheckIP(netip.MustParseAddr(ip), false) == nil {
				t.Errorf("allow_list %v: %s allowed", list, ip)
			}
		}
		if p.CheckIP(netip.MustParseAddr("93.184.216.35"), false) != nil {
			t.Errorf("allow_list %v: a public address in it refused", list)
		}
	}
	p, err := New([]string{"10.0.0.0/8"}, []string{"10.1.0.0/16"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.CheckIP(netip.MustParseAddr("10.1.2.3"), false) != nil {
		t.Error("a range both re-allowed and listed refused")
	}
	if p.CheckIP(netip.MustParseAddr("10.2.0.1"), false) == nil {
		t.Error("a re-allowed range outside the allow-list allowed")
	}
}

// refuse_cidrs: what the relay cannot find on its interfaces (its public
// address behind 1:1 NAT) is refused, also as a NAT64 address and inside
// a re-allowed range.
func TestRefuseCIDRs(t *testing.T) {
	p, err := New([]string{"10.0.0.0/8"}, nil, []string{"93.184.216.7", "10.9.0.0/16", "2a00:1450:1::/48"})
	if err != nil {
		t.Fatal(err)
	}
	for ip, ok := range map[string]bool{
		"93.184.216.7": false, "64:ff9b::93.184.216.7": false, "10.9.1.1": false,
		"2a00:1450:1::5": false, "10.8.0.1": true, "93.184.216.34": true, "2a00:1450:2::5": true,
	} {
		if (p.CheckIP(netip.MustParseAddr(ip), false) == nil) != ok {
			t.Errorf("%s: allowed=%v, want %v", ip, !ok, ok)
		}
	}
	if _, err := New(nil, nil, []string{"not-a-cidr"}); err == nil {
		t.Error("a malformed refuse_cidrs entry accepted")
	}
}

// IPv6 addresses that embed an IPv4 address are checked as that address:
// a NAT64 gateway on the relay's network would turn 64:ff9b::127.0.0.1
// into 127.0.0.1.
func TestEmbeddedIPv4Checked(t *testing.T) {
	p, err := New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ip string
		ok bool
	}{
		{"64:ff9b::8.8.8.8", true},
		{"64:ff9b::127.0.0.1", false},
		{"64:ff9b::10.0.0.1", false},
		{"64:ff9b::169.254.169.254", false},
		{"2002:0808:0808::1", true},
		{"2002:7f00:0001::1", false},
		{"2002:c0a8:0101:5::1", false},
		{"2002:a9fe:a9fe::", false},
		{"::127.0.0.1", false},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false}, // Teredo
	} {
		err := p.CheckIP(netip.MustParseAddr(tc.ip), false)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.ip, err, tc.ok)
		}
	}
	// allow_cidrs re-allows the embedded address too.
	a, _ := New([]string{"127.0.0.1/32"}, nil, nil)
	if err := a.CheckIP(netip.MustParseAddr("64:ff9b::127.0.0.1"), false); err != nil {
		t.Errorf("allow_cidrs 127.0.0.1/32 did not re-allow its NAT64 form: %v", err)
	}
}

// The relay host's own addresses are refused, public ones included.
func TestSelfAddressesRefused(t *testing.T) {
	p, err := New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Self = func() []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("8.8.4.4"), netip.MustParseAddr("2a00:1450::7")}
	}
	for _, ip := range []string{"8.8.4.4", "::ffff:8.8.4.4", "2a00:1450::7", "64:ff9b::8.8.4.4", "2002:0808:0404::1"} {
		if err := p.CheckIP(netip.MustParseAddr(ip), false); err == nil {
			t.Errorf("%s (the relay's own address) allowed", ip)
		}
	}
	if err := p.CheckIP(netip.MustParseAddr("8.8.8.8"), false); err != nil {
		t.Errorf("another public address refused: %v", err)
	}
}

func TestHostAddrsIncludesLoopback(t *testing.T) {
	var h HostAddrs
	found := false
	for _, a := range h.Get() {
		found = found || a == netip.MustParseAddr("127.0.0.1")
	}
	if !found {
		t.Fatalf("host addresses %v lack 127.0.0.1", h.Get())
	}
}

package preauth

import (
	"net/netip"
	"testing"
)

func TestPerSourceAndTotal(t *testing.T) {
	var refused []string
	l := New(func(r string) { refused = append(refused, r) })
	a := netip.MustParseAddr("192.0.2.1")
	b := netip.MustParseAddr("192.0.2.2")
	var rel []func()
	for i := 0; i < 3; i++ {
		r := l.Admit(a, 5, 3)
		if r == nil {
			t.Fatalf("connection %d from a refused under its share", i)
		}
		rel = append(rel, r)
	}
	if l.Admit(a, 5, 3) != nil {
		t.Fatal("fourth connection from one source admitted over per-source limit 3")
	}
	if r := l.Admit(b, 5, 3); r == nil {
		t.Fatal("another source refused while the flooding one is capped")
	} else {
		rel = append(rel, r)
	}
	if r := l.Admit(netip.MustParseAddr("192.0.2.3"), 5, 3); r == nil {
		t.Fatal("fifth connection refused under total 5")
	} else {
		rel = append(rel, r)
	}
	if l.Admit(netip.MustParseAddr("192.0.2.4"), 5, 3) != nil {
		t.Fatal("connection admitted over the total")
	}
	if len(refused) != 2 || refused[0] != "source" || refused[1] != "total" {
		t.Fatalf("refusal reasons %v, want [source total]", refused)
	}
	for _, r := range rel {
		r()
		r() // idempotent
	}
	if l.Active() != 0 || l.Sources() != 0 {
		t.Fatalf("after release: active %d sources %d, want 0 0", l.Active(), l.Sources())
	}
}

func TestIPv6CountedPer64(t *testing.T) {
	l := New(nil)
	if l.Admit(netip.MustParseAddr("2001:db8:1:2::1"), 10, 1) == nil {
		t.Fatal("first IPv6 connection refused")
	}
	if l.Admit(netip.MustParseAddr("2001:db8:1:2:ffff::9"), 10, 1) != nil {
		t.Fatal("another address of the same /64 admitted over per-source limit 1")
	}
	if l.Admit(netip.MustParseAddr("2001:db8:1:3::1"), 10, 1) == nil {
		t.Fatal("a different /64 refused")
	}
	if l.Admit(netip.MustParseAddr("::ffff:192.0.2.1"), 10, 1) == nil {
		t.Fatal("mapped IPv4 refused")
	}
	if l.Admit(netip.MustParseAddr("192.0.2.1"), 10, 1) != nil {
		t.Fatal("mapped and plain IPv4 counted apart")
	}
}

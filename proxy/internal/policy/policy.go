// Package policy decides which destinations the relay server may connect
// to. The server is exposed to the world, so by default it refuses every
// address that is not plain public unicast: loopback, private, carrier-grade
// NAT, link-local, cloud metadata, multicast, reserved and documentation
// ranges, and the relay host's own addresses. Operators may re-allow ranges
// (allow_cidrs), refuse more (refuse_cidrs: above all the relay's public
// address behind a provider's 1:1 NAT, which no interface carries), and
// restrict the server further to an allow-list of networks and host names.
//
// Names are checked twice: against the allow-list before resolution, and
// every resolved address against the ranges after it, so a public name that
// resolves to 127.0.0.1 (DNS rebinding) is still refused.
package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"braid/proxy/internal/dest"
)

// ErrRefused wraps every policy refusal.
var ErrRefused = errors.New("destination refused by policy")

type namedPrefix struct {
	prefix netip.Prefix
	why    string
}

func mustPrefixes(why string, cidrs ...string) []namedPrefix {
	out := make([]namedPrefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = namedPrefix{netip.MustParsePrefix(c), why}
	}
	return out
}

// Metadata endpoints are listed first so logs name them precisely; they
// are also inside the link-local/private ranges below.
var refused = concat(
	mustPrefixes("cloud metadata", "169.254.169.254/32", "169.254.170.2/32", "100.100.100.200/32", "fd00:ec2::254/128", "192.0.0.192/32"),
	mustPrefixes("unspecified", "0.0.0.0/8", "::/128"),
	mustPrefixes("loopback", "127.0.0.0/8", "::1/128"),
	mustPrefixes("private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
	mustPrefixes("carrier-grade NAT", "100.64.0.0/10"),
	mustPrefixes("link-local", "169.254.0.0/16", "fe80::/10"),
	mustPrefixes("multicast", "224.0.0.0/4", "ff00::/8"),
	mustPrefixes("reserved", "240.0.0.0/4", "192.0.0.0/24", "198.18.0.0/15", "64:ff9b:1::/48", "100::/64", "2001:10::/28"),
	mustPrefixes("documentation", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"),
)

func concat(lists ...[]namedPrefix) []namedPrefix {
	var out []namedPrefix
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Prefixes whose addresses carry an IPv4 address that a gateway on the path
// may turn back into IPv4: NAT64's well-known prefix (RFC 6052, the IPv4 in
// the last 32 bits), 6to4 (RFC 3056, bits 16-47) and IPv4-compatible
// addresses (deprecated, the last 32 bits). A destination there is checked
// as the IPv4 it embeds, so 64:ff9b::127.0.0.1 is loopback.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	v4Compat   = netip.MustParsePrefix("::/96")
	teredo     = netip.MustParsePrefix("2001::/32")
	teredoWhy  = "Teredo (embeds an obfuscated IPv4 address)"
	selfWhy    = "an address of the relay host itself"
	refusedWhy = "embeds %s, which is %s"
)

// Policy is an immutable destination filter; build it with New.
type Policy struct {
	allowCIDRs  []netip.Prefix // exceptions to the refused ranges
	refuseCIDRs []netip.Prefix // refused besides them, whatever else says
	listNets    []netip.Prefix // allow-list networks
	listNames   []string       // allow-list names: "host" or ".suffix"
	hasList     bool
	// Self, if set, returns the relay host's own addresses: a service
	// listening on the wildcard address (sshd, a public metrics
	// endpoint) must not be reachable through the relay either.
	Self func() []netip.Addr
}

// New builds a policy. allowCIDRs re-allow refused ranges ("127.0.0.1/32");
// refuseCIDRs are refused as well, even inside allowCIDRs; allowList, if not
// empty, is the only set of destinations permitted: CIDRs, exact host
// names, or "*.example.com" for any subdomain.
func New(allowCIDRs, allowList, refuseCIDRs []string) (*Policy, error) {
	p := &Policy{hasList: len(allowList) > 0}
	var err error
	if p.allowCIDRs, err = parsePrefixes("allow_cidrs", allowCIDRs); err != nil {
		return nil, err
	}
	if p.refuseCIDRs, err = parsePrefixes("refuse_cidrs", refuseCIDRs); err != nil {
		return nil, err
	}
	for _, e := range allowList {
		if pr, err := parsePrefix(e); err == nil {
			p.listNets = append(p.listNets, pr)
			continue
		}
		name := strings.ToLower(strings.TrimSuffix(e, "."))
		if suffix, ok := strings.CutPrefix(name, "*."); ok {
			if err := dest.CheckName(suffix); err != nil {
				return nil, fmt.Errorf("allow_list entry %q: %w", e, err)
			}
			p.listNames = append(p.listNames, "."+suffix)
			continue
		}
		if err := dest.CheckName(name); err != nil {
			return nil, fmt.Errorf("allow_list entry %q: not a CIDR, address or host name", e)
		}
		p.listNames = append(p.listNames, name)
	}
	return p, nil
}

func parsePrefixes(key string, cidrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range cidrs {
		pr, err := parsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out = append(out, pr)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	pr, err := netip.ParsePrefix(s)
	if err != nil {
		return pr, err
	}
	return netip.PrefixFrom(pr.Addr().Unmap(), pr.Bits()).Masked(), nil
}

// CheckName applies the allow-list to a requested host name (before DNS).
func (p *Policy) CheckName(name string) error {
	if !p.hasList {
		return nil
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, e := range p.listNames {
		if e == name || (e[0] == '.' && strings.HasSuffix(name, e)) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s not in allow_list", ErrRefused, name)
}

// CheckIP applies the ranges (and, for literal destinations, the allow-list)
// to an address. viaName says the address came from resolving an
// allow-listed name, so the allow-list networks need not contain it.
func (p *Policy) CheckIP(ip netip.Addr, viaName bool) error {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.Zone() != "" {
		return fmt.Errorf("%w: invalid or scoped address", ErrRefused)
	}
	if p.hasList && !viaName && !containsAny(p.listNets, ip) {
		return fmt.Errorf("%w: %s not in allow_list", ErrRefused, ip)
	}
	if containsAny(p.refuseCIDRs, ip) {
		return fmt.Errorf("%w: %s is in refuse_cidrs", ErrRefused, ip)
	}
	if v4, ok := embeddedIPv4(ip); ok && containsAny(p.refuseCIDRs, v4) {
		return fmt.Errorf("%w: %s "+refusedWhy, ErrRefused, ip, v4, "in refuse_cidrs")
	}
	// Only allow_cidrs re-allow a refused range: an allow-list narrows
	// what may be reached, so a wide entry (0.0.0.0/0, the relay's own
	// /16) must not open loopback, metadata or the relay host itself.
	if containsAny(p.allowCIDRs, ip) {
		return nil
	}
	if why := refusedRange(ip); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrRefused, ip, why)
	}
	if v4, ok := embeddedIPv4(ip); ok {
		if containsAny(p.allowCIDRs, v4) {
			return nil
		}
		if why := refusedRange(v4); why != "" {
			return fmt.Errorf("%w: %s "+refusedWhy, ErrRefused, ip, v4, why)
		}
		if p.isSelf(v4) {
			return fmt.Errorf("%w: %s "+refusedWhy, ErrRefused, ip, v4, selfWhy)
		}
	}
	if teredo.Contains(ip) {
		return fmt.Errorf("%w: %s is %s", ErrRefused, ip, teredoWhy)
	}
	if p.isSelf(ip) {
		return fmt.Errorf("%w: %s is %s", ErrRefused, ip, selfWhy)
	}
	return nil
}

// refusedRange names the refused range holding ip, or "".
func refusedRange(ip netip.Addr) string {
	for _, r := range refused {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	if ip.Is4() && ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return "broadcast"
	}
	return ""
}

// embeddedIPv4 returns the IPv4 address inside a NAT64, 6to4 or
// IPv4-compatible IPv6 address.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip), v4Compat.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

func (p *Policy) isSelf(ip netip.Addr) bool {
	if p.Self == nil {
		return false
	}
	for _, a := range p.Self() {
		if a.Unmap() == ip {
			return true
		}
	}
	return false
}

func containsAny(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

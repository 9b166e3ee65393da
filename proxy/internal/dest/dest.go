// Package dest holds the destination address that a client names: either an
// IP address or a host name (resolved at the server, never at the client, so
// that users' DNS queries do not leak from the client box), plus a port.
package dest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// MaxNameLen is the longest host name accepted (RFC 1035, 253 characters in
// text form); SOCKS5 allows 255 but DNS cannot carry more than 253.
const MaxNameLen = 253

// Addr is a destination: exactly one of Name or IP is set.
type Addr struct {
	Name string     // host name, resolved by the server
	IP   netip.Addr // literal address
	Port uint16
}

// ErrBadName is returned for host names that are not plausible DNS names.
var ErrBadName = errors.New("invalid host name")

// FromIP returns the destination for a literal address and port.
func FromIP(ap netip.AddrPort) Addr {
	return Addr{IP: ap.Addr().Unmap(), Port: ap.Port()}
}

// IsName reports whether the destination is a host name.
func (a Addr) IsName() bool { return a.Name != "" }

// String formats the destination as host:port.
func (a Addr) String() string {
	host := a.Name
	if host == "" {
		host = a.IP.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(int(a.Port)))
}

// Validate checks that exactly one of Name or IP is set, the name is a
// plausible DNS name and the port is not zero.
func (a Addr) Validate() error {
	if a.Port == 0 {
		return errors.New("port 0")
	}
	if a.Name != "" {
		if a.IP.IsValid() {
			return errors.New("both name and address set")
		}
		return CheckName(a.Name)
	}
	if !a.IP.IsValid() {
		return errors.New("no address")
	}
	return nil
}

// CheckName accepts LDH labels (letters, digits, hyphen) and underscores,
// 1..63 characters per label, at most MaxNameLen in total, one optional
// trailing dot. Anything else (NUL, spaces, "..", an IP literal in disguise
// with a zone) is rejected before it reaches a resolver or a log line.
func CheckName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen+1 {
		return fmt.Errorf("%w: length %d", ErrBadName, len(name))
	}
	if name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: length %d", ErrBadName, len(name))
	}
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return fmt.Errorf("%w: empty label", ErrBadName)
			}
			label = 0
			continue
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return fmt.Errorf("%w: character %q", ErrBadName, c)
		}
		label++
		if label > 63 {
			return fmt.Errorf("%w: label longer than 63", ErrBadName)
		}
	}
	if label == 0 {
		return fmt.Errorf("%w: empty label", ErrBadName)
	}
	return nil
}

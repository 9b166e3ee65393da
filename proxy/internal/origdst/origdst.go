// Package origdst reads the original destination of a connection that
// iptables/nftables redirected to a local listener (REDIRECT or DNAT in the
// nat table), via the SO_ORIGINAL_DST socket option of conntrack.
package origdst

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Not in x/sys/unix.
const (
	soOriginalDst     = 80 // SO_ORIGINAL_DST, linux/netfilter_ipv4.h
	ip6tSoOriginalDst = 80 // IP6T_SO_ORIGINAL_DST, linux/netfilter_ipv6/ip6_tables.h
)

// Get returns the pre-NAT destination of c.
func Get(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	var (
		ap   netip.AddrPort
		gerr error
	)
	err = raw.Control(func(fd uintptr) {
		// x/sys/unix has no getter typed for these options; the ones
		// whose result has the size of struct sockaddr_in (16 bytes) and
		// of struct ip6_mtuinfo (a sockaddr_in6 first) read them, as
		// other transparent proxies do.
		if local.Addr().Unmap().Is4() {
			var m *unix.IPv6Mreq
			if m, gerr = unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, soOriginalDst); gerr == nil {
				sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(m))
				ap = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port(sa.Port))
			}
			return
		}
		var mi *unix.IPv6MTUInfo
		if mi, gerr = unix.GetsockoptIPv6MTUInfo(int(fd), unix.IPPROTO_IPV6, ip6tSoOriginalDst); gerr == nil {
			ap = netip.AddrPortFrom(netip.AddrFrom16(mi.Addr.Addr).Unmap(), port(mi.Addr.Port))
		}
	})
	if err == nil {
		err = gerr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("getsockopt SO_ORIGINAL_DST (was the connection redirected by iptables/nftables?): %w", err)
	}
	return ap, nil
}

// port converts a sockaddr's port (network byte order in memory) to a
// number.
func port(p uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], p)
	return binary.BigEndian.Uint16(b[:])
}

// Package origdst reads the original destination of a connection that
// iptables/nftables redirected to a local listener (REDIRECT or DNAT in the
// nat table), via the SO_ORIGINAL_DST socket option of conntrack.
package origdst

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"
)

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
		if local.Addr().Unmap().Is4() {
			var sa [16]byte // struct sockaddr_in
			if gerr = getsockopt(fd, syscall.SOL_IP, soOriginalDst, sa[:]); gerr == nil {
				ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), binary.BigEndian.Uint16(sa[2:4]))
			}
			return
		}
		var sa [28]byte // struct sockaddr_in6
		if gerr = getsockopt(fd, syscall.SOL_IPV6, ip6tSoOriginalDst, sa[:]); gerr == nil {
			ap = netip.AddrPortFrom(netip.AddrFrom16([16]byte(sa[8:24])).Unmap(), binary.BigEndian.Uint16(sa[2:4]))
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

func getsockopt(fd uintptr, level, opt int, buf []byte) error {
	l := uint32(len(buf))
	_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

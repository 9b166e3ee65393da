// Package mptcpinfo reads per-subflow counters of an MPTCP socket, so
// braid-proxy can report bytes per subflow, i.e. per network/gateway. It
// asks with one MPTCP_FULL_INFO socket option (Linux 6.6+) and, on older
// kernels, with MPTCP_TCPINFO and MPTCP_SUBFLOW_ADDRS (Linux 5.16+).
package mptcpinfo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offsets of the two counters in struct tcp_info, from x/sys/unix's copy
// of the kernel's layout.
var (
	offBytesAcked    = int(unsafe.Offsetof(unix.TCPInfo{}.Bytes_acked))
	offBytesReceived = int(unsafe.Offsetof(unix.TCPInfo{}.Bytes_received))
)

// MPTCP socket options (include/uapi/linux/mptcp.h; x/sys/unix has
// SOL_MPTCP but not these).
const (
	solMPTCP          = unix.SOL_MPTCP
	optTCPInfo        = 2                   // MPTCP_TCPINFO
	optSubflowAddrs   = 3                   // MPTCP_SUBFLOW_ADDRS
	optFullInfo       = 4                   // MPTCP_FULL_INFO
	fullInfoHeadLen   = 40                  // struct mptcp_full_info up to mptcp_info (not asked for)
	subflowInfoLen    = 8 + subflowAddrsLen // struct mptcp_subflow_info: id, padding, addrs
	subflowDataLen    = 16                  // struct mptcp_subflow_data
	tcpInfoUserLen    = 136                 // enough of struct tcp_info for bytes_received
	subflowAddrsLen   = 256                 // struct mptcp_subflow_addrs: two sockaddr_storage
	maxSubflows       = 16
	sockaddrStoreSize = 128
)

// Subflow is one subflow's addresses and byte counters.
type Subflow struct {
	Local, Remote netip.AddrPort
	BytesAcked    uint64 // sent and acknowledged
	BytesReceived uint64
}

// ErrNotMPTCP is returned for plain TCP sockets (e.g. after fallback).
var ErrNotMPTCP = errors.New("not an MPTCP socket")

// queryBufs holds the getsockopt results of one Subflows call. The proxy
// samples every relay's subflows, so these 6 KB would otherwise be garbage
// on every connection.
type queryBufs struct {
	info  [subflowDataLen + maxSubflows*tcpInfoUserLen]byte
	addrs [subflowDataLen + maxSubflows*subflowInfoLen]byte
	head  [fullInfoHeadLen]byte
}

var bufPool = sync.Pool{New: func() any { return new(queryBufs) }}

// Subflows returns the current subflows of c, or ErrNotMPTCP for a plain
// TCP socket or one that fell back to TCP.
func Subflows(c *net.TCPConn) ([]Subflow, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	bufs := bufPool.Get().(*queryBufs)
	defer bufPool.Put(bufs)
	var (
		n    int
		gerr error
	)
	err = raw.Control(func(fd uintptr) { n, gerr = fullInfo(fd, bufs) })
	if err != nil {
		return nil, fmt.Errorf("reading MPTCP subflow info: %w", err)
	}
	if gerr == nil {
		return decode(bufs.info[subflowDataLen:], bufs.addrs[8:], subflowInfoLen, n), nil
	}
	// Plain TCP and fallen-back sockets refuse SOL_MPTCP options here; so
	// do kernels without MPTCP_FULL_INFO. Ask the way those answer.
	if !errors.Is(gerr, syscall.EOPNOTSUPP) && !errors.Is(gerr, syscall.ENOPROTOOPT) {
		return nil, fmt.Errorf("reading MPTCP subflow info: %w", gerr)
	}
	return subflowsTwoQueries(c, raw, bufs)
}

// fullInfo asks for every subflow's addresses and tcp_info in one call
// and returns how many subflows it filled in.
func fullInfo(fd uintptr, bufs *queryBufs) (int, error) {
	h := bufs.head[:]
	clear(h)
	binary.NativeEndian.PutUint32(h[4:], tcpInfoUserLen)  // size_tcpinfo_user
	binary.NativeEndian.PutUint32(h[12:], subflowInfoLen) // size_sfinfo_user
	binary.NativeEndian.PutUint32(h[20:], maxSubflows)    // size_arrays_user
	binary.NativeEndian.PutUint64(h[24:], uint64(uintptr(unsafe.Pointer(&bufs.addrs[0]))))
	binary.NativeEndian.PutUint64(h[32:], uint64(uintptr(unsafe.Pointer(&bufs.info[subflowDataLen]))))
	l := uint32(len(h))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, solMPTCP, optFullInfo,
		uintptr(unsafe.Pointer(&h[0])), uintptr(unsafe.Pointer(&l)), 0)
	runtime.KeepAlive(bufs)
	if e != 0 {
		return 0, e
	}
	if binary.NativeEndian.Uint32(h[4:]) != tcpInfoUserLen || binary.NativeEndian.Uint32(h[12:]) != subflowInfoLen {
		return 0, fmt.Errorf("kernel item sizes %d/%d, want %d/%d",
			binary.NativeEndian.Uint32(h[4:]), binary.NativeEndian.Uint32(h[12:]), tcpInfoUserLen, subflowInfoLen)
	}
	return min(int(binary.NativeEndian.Uint32(h[16:])), maxSubflows), nil
}

// subflowsTwoQueries is Subflows for kernels older than MPTCP_FULL_INFO.
func subflowsTwoQueries(c *net.TCPConn, raw syscall.RawConn, bufs *queryBufs) ([]Subflow, error) {
	// Checked first: a fallen-back socket still answers these options (on
	// some kernels) with its one TCP subflow.
	if ok, _ := c.MultipathTCP(); !ok {
		return nil, ErrNotMPTCP
	}
	var info, addrs []byte
	var n1, n2 int
	var gerr error
	err := raw.Control(func(fd uintptr) {
		if info, n1, gerr = query(fd, optTCPInfo, tcpInfoUserLen, bufs.info[:]); gerr != nil {
			return
		}
		addrs, n2, gerr = query(fd, optSubflowAddrs, subflowAddrsLen, bufs.addrs[:])
	})
	if err == nil {
		err = gerr
	}
	if err != nil {
		return nil, fmt.Errorf("reading MPTCP subflow info: %w", err)
	}
	return decode(info, addrs, subflowAddrsLen, min(n1, n2)), nil
}

// decode reads n subflows from tcp_info items (info) and address pairs
// spaced addrStride apart (addrs).
func decode(info, addrs []byte, addrStride, n int) []Subflow {
	out := make([]Subflow, 0, n)
	for i := 0; i < n; i++ {
		ti := info[i*tcpInfoUserLen:]
		ad := addrs[i*addrStride:]
		out = append(out, Subflow{
			Local:         sockaddr(ad[:sockaddrStoreSize]),
			Remote:        sockaddr(ad[sockaddrStoreSize:]),
			BytesAcked:    binary.NativeEndian.Uint64(ti[offBytesAcked:]),
			BytesReceived: binary.NativeEndian.Uint64(ti[offBytesReceived:]),
		})
	}
	return out
}

// query runs one MPTCP getsockopt into buf and returns the item array and count.
func query(fd uintptr, opt, itemLen int, buf []byte) ([]byte, int, error) {
	clear(buf[:subflowDataLen])
	binary.NativeEndian.PutUint32(buf[0:], subflowDataLen) // size_subflow_data
	binary.NativeEndian.PutUint32(buf[12:], uint32(itemLen))
	l := uint32(len(buf))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, solMPTCP, uintptr(opt),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return nil, 0, e
	}
	num := int(binary.NativeEndian.Uint32(buf[4:]))
	userLen := int(binary.NativeEndian.Uint32(buf[12:]))
	if userLen != itemLen {
		return nil, 0, fmt.Errorf("kernel item size %d, want %d", userLen, itemLen)
	}
	num = min(num, maxSubflows, (int(l)-subflowDataLen)/itemLen)
	return buf[subflowDataLen:], num, nil
}

func sockaddr(b []byte) netip.AddrPort {
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&b[0]))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), binary.BigEndian.Uint16(b[2:4]))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&b[0]))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), binary.BigEndian.Uint16(b[2:4]))
	}
	return netip.AddrPort{}
}

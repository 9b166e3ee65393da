// Package mptcpinfo reads per-subflow counters of an MPTCP socket with the
// kernel's MPTCP_TCPINFO and MPTCP_SUBFLOW_ADDRS socket options (Linux 5.16+),
// so braid-proxy can report bytes per subflow, i.e. per network/gateway.
package mptcpinfo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"unsafe"
)

const (
	solMPTCP          = 284 // SOL_MPTCP
	optTCPInfo        = 2   // MPTCP_TCPINFO
	optSubflowAddrs   = 3   // MPTCP_SUBFLOW_ADDRS
	subflowDataLen    = 16  // struct mptcp_subflow_data
	tcpInfoUserLen    = 136 // enough of struct tcp_info for bytes_received
	offBytesAcked     = 120 // tcpi_bytes_acked
	offBytesReceived  = 128 // tcpi_bytes_received
	subflowAddrsLen   = 256 // struct mptcp_subflow_addrs: two sockaddr_storage
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

// queryBufs holds the two getsockopt result arrays of one Subflows call.
// The proxy samples every relay's subflows when each direction ends, so
// these 6 KB would otherwise be garbage several times per connection.
type queryBufs struct {
	info  [subflowDataLen + maxSubflows*tcpInfoUserLen]byte
	addrs [subflowDataLen + maxSubflows*subflowAddrsLen]byte
}

var bufPool = sync.Pool{New: func() any { return new(queryBufs) }}

// Subflows returns the current subflows of c, or ErrNotMPTCP for a plain
// TCP socket or one that fell back to TCP.
func Subflows(c *net.TCPConn) ([]Subflow, error) {
	// Checked first: a fallen-back socket still answers SOL_MPTCP options
	// (on recent kernels) with its one TCP subflow.
	if ok, _ := c.MultipathTCP(); !ok {
		return nil, ErrNotMPTCP
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	bufs := bufPool.Get().(*queryBufs)
	defer bufPool.Put(bufs)
	var info, addrs []byte
	var n1, n2 int
	var gerr error
	err = raw.Control(func(fd uintptr) {
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
	n := min(n1, n2)
	out := make([]Subflow, 0, n)
	for i := 0; i < n; i++ {
		ti := info[i*tcpInfoUserLen:]
		ad := addrs[i*subflowAddrsLen:]
		out = append(out, Subflow{
			Local:         sockaddr(ad[:sockaddrStoreSize]),
			Remote:        sockaddr(ad[sockaddrStoreSize:]),
			BytesAcked:    binary.NativeEndian.Uint64(ti[offBytesAcked:]),
			BytesReceived: binary.NativeEndian.Uint64(ti[offBytesReceived:]),
		})
	}
	return out, nil
}

// query runs one MPTCP getsockopt into buf and returns the item array and count.
func query(fd uintptr, opt, itemLen int, buf []byte) ([]byte, int, error) {
	clear(buf[:subflowDataLen])
	binary.NativeEndian.PutUint32(buf[0:], subflowDataLen) // size_subflow_data
	binary.NativeEndian.PutUint32(buf[12:], uint32(itemLen))
	l := uint32(len(buf))
	_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, solMPTCP, uintptr(opt),
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
	case syscall.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
	case syscall.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), binary.BigEndian.Uint16(b[2:4]))
	}
	return netip.AddrPort{}
}

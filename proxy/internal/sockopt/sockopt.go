// Package sockopt sets the TCP options braid-proxy uses to save round
// trips and wake-ups on connection setup. All of them work on MPTCP
// sockets on Linux 6.2+ and are best effort: a kernel that refuses them
// only costs the optimisation.
package sockopt

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

const (
	tcpFastOpen        = 23 // TCP_FASTOPEN (listener queue length)
	tcpFastOpenConnect = 30 // TCP_FASTOPEN_CONNECT
	tcpDeferAccept     = 9  // TCP_DEFER_ACCEPT
)

// Listener enables TCP Fast Open on a listening socket (the hello then rides
// in the SYN of repeat clients) and defers accept until the first data
// arrives (one wake-up less per connection, and connections that never send
// a byte never reach the server's code).
func Listener(c syscall.RawConn) (fastOpen, deferAccept error) {
	c.Control(func(fd uintptr) {
		fastOpen = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpFastOpen, 1024)
		deferAccept = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpDeferAccept, 1)
	})
	return
}

// FastOpenConnect makes connect() return at once and send the SYN with the
// first write, carrying data when the kernel holds a Fast Open cookie for
// the server.
func FastOpenConnect(c syscall.RawConn) error {
	var err error
	c.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpFastOpenConnect, 1)
	})
	return err
}

// FastOpenSysctl returns net.ipv4.tcp_fastopen of the current namespace
// (bit 1: client, bit 2: server), or -1 if unreadable.
func FastOpenSysctl() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_fastopen")
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return v
}

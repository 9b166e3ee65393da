package policy

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// hostAddrsTTL is how long HostAddrs trusts its last look at the
// interfaces: addresses change rarely (DHCP, a new interface), and a look
// costs a netlink dump, too much for every connection.
const hostAddrsTTL = 10 * time.Second

// HostAddrs lists the relay host's own addresses (for Policy.Self), looked
// up at most every hostAddrsTTL. The zero value is ready to use.
type HostAddrs struct {
	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
}

// Get returns the addresses of every interface of the host (the last
// successful look if the current one fails).
func (h *HostAddrs) Get() []netip.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.at) < hostAddrsTTL {
		return h.addrs
	}
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return h.addrs
	}
	out := make([]netip.Addr, 0, len(ifAddrs))
	for _, a := range ifAddrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	h.addrs, h.at = out, time.Now()
	return out
}

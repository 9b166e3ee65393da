package client

import (
	"net"
	"time"

	"braid/proxy/internal/mptcpinfo"
)

// A spare connection is worth most once its other subflows have joined:
// then a connection's first flight (hello, request, early data) can follow
// the packet scheduler's split from its first byte instead of leaving on the
// first subflow alone, which is what a privacy split (hywf) must avoid and
// what lets a bulk upload use every path at once.
//
// But an MPTCP client may only open MP_JOIN subflows once it knows the
// server received the keys of its third ACK (RFC 8684 §3.1): the first
// packet back from the server carrying a data ACK. A spare sends nothing
// until it is used, and the server has nothing to say before the hello, so
// without help it never learns that and its subflows join only after the
// first upload has been acknowledged, too late for that upload.
//
// braid's kernel on the server, under one of braid's schedulers, sends
// that ACK when it accepts a connection whose client has said nothing, so
// a spare joins within a couple of round trips. Against a server with
// another kernel or the default scheduler the help is a TCP keepalive
// probe: after joinProbeIdle the client's kernel sends one (no payload, no
// application byte), the server's kernel answers with an ACK carrying its
// data ACK, and the path manager adds the other subflows. Once they have joined (or joinProbeFor has passed, e.g. a box
// with one gateway) the probe is switched off again and the connection gets
// the keepalive setting of every relay connection.
const (
	joinProbeIdle = time.Second // the kernel's smallest TCP_KEEPIDLE
	joinProbeFor  = 3 * time.Second
	joinPoll      = 50 * time.Millisecond
)

// startJoinProbe has the kernel probe conn after joinProbeIdle.
func startJoinProbe(conn *net.TCPConn) error {
	return conn.SetKeepAliveConfig(net.KeepAliveConfig{
		Enable: true, Idle: joinProbeIdle, Interval: joinProbeIdle, Count: 3,
	})
}

// stopJoinProbe gives conn the keepalive setting dialFrom's net.Dialer gives
// every relay connection (zero fields: Go's defaults).
func stopJoinProbe(conn *net.TCPConn, rt *runtimeState) error {
	if rt.cfg.RelayKeepAlive() < 0 {
		return conn.SetKeepAlive(false)
	}
	return conn.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true})
}

// joined reports whether conn has more than its first subflow.
func joined(conn *net.TCPConn) bool {
	sfs, err := mptcpinfo.Subflows(conn)
	return err == nil && len(sfs) > 1
}

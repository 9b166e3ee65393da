// Package e2e holds loopback end-to-end tests of braid-proxy: a real
// server, a real client and a real traffic sink in one process, talking
// over real (MPTCP) sockets on 127.0.0.0/8. The network-namespace tests
// (two veth WANs, iptables redirect, curl) live in proxy/tests.
package e2e

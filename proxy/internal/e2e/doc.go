// Package e2e holds loopback end-to-end tests of braid-proxy: a real
// server, a real client and a real traffic sink in one process, talking
// over real (MPTCP) sockets on 127.0.0.0/8. The network-namespace tests
// (two veth WANs, iptables redirect, curl) live in proxy/tests.
//
// Tests that spend their time waiting for a server's deadline (1-2 s here)
// and use almost no CPU meanwhile call t.Parallel: Go runs them together
// only after every other test in the package has finished, so they overlap
// each other's waits and never the CPU-heavy tests (transfers, floods, the
// 1,000-connection leak check, which counts the process's goroutines and
// file descriptors) or the tests with tight bounds on a sleep.
package e2e

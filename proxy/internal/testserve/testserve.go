// Package testserve gives tests small loopback servers: a destination to
// relay to, a stand-in for tor's ORPort. Tests only; the relay's own accept
// loops are acceptloop's.
package testserve

import (
	"io"
	"net"
	"testing"
)

// Loopback listens on a loopback port, closed when the test ends, and
// runs handle for every connection it accepts, each in its own goroutine.
// It returns the listening address.
func Loopback(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

// Echo sends back what c sends until c's sender closes, then closes c.
func Echo(c net.Conn) {
	io.Copy(c, c)
	c.Close()
}

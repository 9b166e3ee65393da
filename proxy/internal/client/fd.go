package client

import (
	"errors"
	"syscall"
)

// isConnectError reports errors of a connection attempt (as opposed to a
// server that accepted and then closed).
func isConnectError(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// Package acceptloop runs a listener's accept loop for the client and the
// server: it stops when the context ends or the listener is closed, and
// backs off on every other error (descriptor exhaustion, kernel memory
// pressure, a firewall's EPERM) instead of spinning or giving up.
package acceptloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Run accepts connections on ln and hands each to dispatch until ctx ends
// (then it returns nil) or ln is closed. dispatch must not block.
//
// An accept error other than a closed listener is about one connection or
// a passing shortage: ending the loop would stop the process and cut every
// relay in flight for it.
func Run(ctx context.Context, ln net.Listener, log *slog.Logger, dispatch func(net.Conn)) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accepting: %w", err)
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			log.Warn("accept failed; backing off", "err", err, "delay", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		dispatch(conn)
	}
}

// Package acceptloop runs a listener's accept loop for the client and the
// server: it stops when the context ends and backs off on transient errors
// (timeouts, descriptor exhaustion) instead of spinning.
package acceptloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// Run accepts connections on ln and hands each to dispatch until ctx ends
// (then it returns nil) or ln fails for good. dispatch must not block.
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
			if transient(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				log.Warn("accept failed; backing off", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("accepting: %w", err)
		}
		delay = 0
		dispatch(conn)
	}
}

// transient reports accept errors worth retrying after a pause.
func transient(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

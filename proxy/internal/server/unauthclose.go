package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"time"

	"braid/proxy/internal/auth"
	"braid/proxy/internal/config"
)

// How a server ends connections that do not authenticate, so that a prober
// cannot recognise a braid server by a fixed behaviour: without it, garbage
// shorter than a hello was closed exactly handshake_timeout after its first
// byte, and a hello-sized one at once (a reset beyond a few KiB).
//
// Each server draws, when it starts, a stretch factor for its pre-auth
// deadlines (first_byte_timeout and handshake_timeout are the least time
// allowed; this server allows 0-50 % more) and a byte budget. A hello that
// fails to authenticate is not answered by a close: the server keeps
// reading and discarding until the connection's handshake deadline, or
// until it has read the budget, whichever comes first, as obfs4 does. The
// values are fixed per server, so probing one server repeatedly learns no
// distribution, and they differ between servers.
const (
	maxDeadlineStretch = 0.5
	// The budget counts from the hello's first byte: between one hello and
	// one hello plus 8 KiB.
	maxExtraCloseBytes = 8 << 10
)

// unauthClose is one server's draw.
type unauthClose struct {
	stretch float64 // extra fraction of each pre-auth deadline
	bytes   int64   // bytes read from a failed hello's start before closing
}

func newUnauthClose() unauthClose {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("server: no randomness: " + err.Error())
	}
	u := float64(binary.BigEndian.Uint64(b[:8])>>11) / (1 << 53) // [0, 1)
	extra := int64(binary.BigEndian.Uint64(b[8:]) % maxExtraCloseBytes)
	return unauthClose{stretch: u * maxDeadlineStretch, bytes: auth.ClientHelloLen + extra}
}

// deadline is d stretched by this server's factor.
func (u unauthClose) deadline(d config.Duration) time.Duration {
	return time.Duration(float64(d) * (1 + u.stretch))
}

// drain reads and discards what follows a failed hello from r, c's reader
// (c's deadline is already set), until the budget is spent, the deadline
// passes, the peer closes or ctx ends (a server shutting down does not
// wait for garbage).
func (u unauthClose) drain(ctx context.Context, c net.Conn, r *bufio.Reader) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	io.Copy(io.Discard, io.LimitReader(r, u.bytes-auth.ClientHelloLen))
}

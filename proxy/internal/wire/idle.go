package wire

import "syscall"

// A relay holds many connections that are quiet most of the time (a page
// loaded and kept open, a chat waiting). Each direction of a Conn needs a
// frame buffer (32 KiB) while it moves data; keeping it while the
// direction waited for its next byte made those buffers most of what a
// held connection costs. Now neither direction holds one while it waits:
//
//   - reading frames (Conn.Read, WriteTo), the wait is for the next
//     frame's header, read through the connection's small read buffer;
//     the frame buffer is taken for the body and given back once a frame
//     shorter than the largest has been consumed;
//   - sealing frames from a socket (Conn.ReadFrom), the wait is for the
//     socket to become readable (readableWaiter) before a buffer is taken,
//     and the buffer goes back after a read shorter than a whole frame.
//
// A bulk transfer, whose frames and reads are whole, keeps its buffers.

// readableWaiter returns a function that returns once r has something to
// read (data, its end or an error), without reading it; one that returns at
// once if r is not a socket. The socket's handle is looked up once, not at
// every wait. Errors are left to the read that follows, which sees them too.
func readableWaiter(r any) func() {
	sc, ok := r.(syscall.Conn)
	if !ok {
		return func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	var one [1]byte
	return func() {
		_ = rc.Read(func(fd uintptr) bool {
			// MSG_PEEK leaves the byte for the read; MPTCP sockets support it.
			_, _, err := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return err != syscall.EAGAIN
		})
	}
}

// Package faketor is tor's side of the Extended ORPort (ext-orport-spec),
// for tests: the transport's tests in package extorport and braid-pt's
// end-to-end tests speak to it. It is written from the spec independently
// of package extorport (its own framing and hashes), so that a mistake
// shared by both would have to be made twice.
package faketor

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"
)

// Replies to the transport's DONE.
const (
	Okay uint16 = 0x1000
	Deny uint16 = 0x1001
)

// Tor is one Extended ORPort's behaviour.
type Tor struct {
	Cookie     [32]byte
	AuthTypes  []byte // offered; default: SAFE_COOKIE only
	RefuseHash bool   // answer status 0 whatever the transport's hash
	Extra      []byte // replies sent before the final one (unknown commands)
	Final      uint16 // Okay or Deny
}

// Seen is what the fake tor learnt from the transport.
type Seen struct {
	AuthOK    bool
	UserAddr  string
	Transport string
	Err       error
}

// Serve runs the exchange on c up to and including the final reply, and
// leaves c open: after Okay the OR protocol follows on it.
func (f Tor) Serve(c net.Conn) (s Seen) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	types := f.AuthTypes
	if types == nil {
		types = []byte{1}
	}
	c.Write(append(append([]byte{}, types...), 0))
	var choice [1 + 32]byte
	if _, s.Err = io.ReadFull(c, choice[:]); s.Err != nil {
		return s
	}
	if choice[0] != 1 {
		s.Err = errors.New("transport chose another auth type")
		return s
	}
	clientNonce := choice[1:]
	serverNonce := bytes.Repeat([]byte{0x5a}, 32)
	h := func(key string) []byte {
		m := hmac.New(sha256.New, f.Cookie[:])
		m.Write([]byte(key))
		m.Write(clientNonce)
		m.Write(serverNonce)
		return m.Sum(nil)
	}
	c.Write(append(h("ExtORPort authentication server-to-client hash"), serverNonce...))
	var clientHash [32]byte
	if _, s.Err = io.ReadFull(c, clientHash[:]); s.Err != nil {
		return s
	}
	if f.RefuseHash || !hmac.Equal(clientHash[:], h("ExtORPort authentication client-to-server hash")) {
		c.Write([]byte{0})
		return s
	}
	s.AuthOK = true
	c.Write([]byte{1})
	for {
		var hdr [4]byte
		if _, s.Err = io.ReadFull(c, hdr[:]); s.Err != nil {
			return s
		}
		body := make([]byte, binary.BigEndian.Uint16(hdr[2:]))
		if _, s.Err = io.ReadFull(c, body); s.Err != nil {
			return s
		}
		switch binary.BigEndian.Uint16(hdr[:2]) {
		case 1:
			s.UserAddr = string(body)
		case 2:
			s.Transport = string(body)
		case 0:
			c.Write(f.Extra)
			c.Write(binary.BigEndian.AppendUint32(nil, uint32(f.Final)<<16))
			return s
		}
	}
}

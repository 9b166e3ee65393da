// Package extorport speaks the transport's side of tor's Extended ORPort
// (ext-orport-spec.txt): SAFE_COOKIE authentication with the cookie tor
// writes for its pluggable transports, then the USERADDR and TRANSPORT
// commands that tell the bridge who the client is and how it came, DONE,
// and tor's OKAY (or DENY). After OKAY the connection carries the plain OR
// protocol.
//
// Written here rather than taken from goptlib, which the Go module proxy
// does not serve (see package pt). Nothing here logs or returns the
// cookie.
package extorport

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
)

// CookieHeader starts tor's cookie file; the 32-byte cookie follows it.
const CookieHeader = "! Extended ORPort Auth Cookie !\x0a"

const (
	// CookieLen is the cookie's length, and that of nonces and hashes.
	CookieLen = 32

	authSafeCookie = 1

	cmdDone      = 0x0000
	cmdUserAddr  = 0x0001
	cmdTransport = 0x0002
	replyOkay    = 0x1000
	replyDeny    = 0x1001

	serverHashKey = "ExtORPort authentication server-to-client hash"
	clientHashKey = "ExtORPort authentication client-to-server hash"

	// maxReplies bounds the replies tor may send before OKAY or DENY
	// (unknown ones are skipped, as the spec asks).
	maxReplies = 16
)

var (
	// ErrDenied: tor answered DENY (it wants no more traffic from this
	// client for a while).
	ErrDenied = errors.New("extorport: tor denied the connection (DENY)")
	// ErrAuth: the authentication failed (tor's hash did not verify, so
	// the cookie differs, or tor refused ours).
	ErrAuth = errors.New("extorport: authentication failed")
	// ErrProtocol: tor's answer broke the protocol.
	ErrProtocol = errors.New("extorport: protocol error")
)

// Cookie is the shared secret of SAFE_COOKIE authentication.
type Cookie [CookieLen]byte

// ParseCookie checks a cookie file's contents: the header, then exactly 32
// bytes.
func ParseCookie(b []byte) (Cookie, error) {
	var c Cookie
	if len(b) != len(CookieHeader)+CookieLen || !bytes.HasPrefix(b, []byte(CookieHeader)) {
		return c, fmt.Errorf("not an Extended ORPort cookie file (%d bytes; want the header and %d bytes)", len(b), CookieLen)
	}
	copy(c[:], b[len(CookieHeader):])
	return c, nil
}

// ReadCookie reads tor's cookie file (TOR_PT_AUTH_COOKIE_FILE).
func ReadCookie(path string) (Cookie, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Cookie{}, err
	}
	c, err := ParseCookie(b)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Handshake authenticates to the Extended ORPort on rw with cookie, names
// the client (its address as the transport saw it) and the transport, and
// waits for tor's OKAY. It reads exactly the protocol's bytes, so rw then
// carries the OR protocol. The caller bounds it with a deadline.
func Handshake(rw io.ReadWriter, cookie Cookie, client netip.AddrPort, transport string) error {
	return handshake(rw, cookie, client, transport, rand.Reader)
}

func handshake(rw io.ReadWriter, cookie Cookie, client netip.AddrPort, transport string, random io.Reader) error {
	if err := authenticate(rw, cookie, random); err != nil {
		return err
	}
	// One write for the commands: USERADDR, TRANSPORT, DONE. tor closes a
	// connection that sends anything after DONE before its OKAY.
	var msg []byte
	if client.IsValid() {
		// ext-orport-spec's formats: 1.2.3.4:5678, [1:2::3:4]:5678.
		client = netip.AddrPortFrom(client.Addr().Unmap().WithZone(""), client.Port())
		msg = appendCommand(msg, cmdUserAddr, client.String())
	}
	if transport != "" {
		msg = appendCommand(msg, cmdTransport, transport)
	}
	msg = appendCommand(msg, cmdDone, "")
	if _, err := rw.Write(msg); err != nil {
		return err
	}
	for range maxReplies {
		cmd, err := readReply(rw)
		if err != nil {
			return err
		}
		switch cmd {
		case replyOkay:
			return nil
		case replyDeny:
			return ErrDenied
		}
	}
	return fmt.Errorf("%w: %d replies without OKAY or DENY", ErrProtocol, maxReplies)
}

// authenticate runs SAFE_COOKIE.
func authenticate(rw io.ReadWriter, cookie Cookie, random io.Reader) error {
	types, err := readAuthTypes(rw)
	if err != nil {
		return err
	}
	if !bytes.Contains(types, []byte{authSafeCookie}) {
		rw.Write([]byte{0}) // "none of them"
		return fmt.Errorf("%w: tor offers no SAFE_COOKIE authentication (types %v)", ErrProtocol, types)
	}
	var clientNonce [CookieLen]byte
	if _, err := io.ReadFull(random, clientNonce[:]); err != nil {
		return err
	}
	if _, err := rw.Write(append([]byte{authSafeCookie}, clientNonce[:]...)); err != nil {
		return err
	}
	var reply [2 * CookieLen]byte // server hash, server nonce
	if _, err := io.ReadFull(rw, reply[:]); err != nil {
		return fmt.Errorf("reading tor's hash and nonce: %w", unexpected(err))
	}
	serverHash, serverNonce := reply[:CookieLen], reply[CookieLen:]
	if !hmac.Equal(serverHash, mac(cookie, serverHashKey, clientNonce[:], serverNonce)) {
		return fmt.Errorf("%w: tor's hash does not verify (the cookie file is not this tor's)", ErrAuth)
	}
	if _, err := rw.Write(mac(cookie, clientHashKey, clientNonce[:], serverNonce)); err != nil {
		return err
	}
	var status [1]byte
	if _, err := io.ReadFull(rw, status[:]); err != nil {
		return fmt.Errorf("reading tor's authentication status: %w", unexpected(err))
	}
	switch status[0] {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("%w: tor refused our hash", ErrAuth)
	}
	return fmt.Errorf("%w: authentication status %d", ErrProtocol, status[0])
}

// readAuthTypes reads tor's list of authentication types, ended by 0.
func readAuthTypes(r io.Reader) ([]byte, error) {
	var types []byte
	var b [1]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("reading tor's authentication types: %w", unexpected(err))
		}
		if b[0] == 0 {
			return types, nil
		}
		if len(types) == 255 { // one of each value at most
			return nil, fmt.Errorf("%w: authentication type list too long", ErrProtocol)
		}
		types = append(types, b[0])
	}
}

// readReply reads one of tor's replies and returns its command; the body
// (ignored for every reply there is) is read and dropped.
func readReply(r io.Reader) (uint16, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, fmt.Errorf("reading tor's reply: %w", unexpected(err))
	}
	cmd, n := binary.BigEndian.Uint16(hdr[:2]), binary.BigEndian.Uint16(hdr[2:])
	if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
		return 0, fmt.Errorf("reading tor's reply body: %w", unexpected(err))
	}
	return cmd, nil
}

func appendCommand(b []byte, cmd uint16, body string) []byte {
	b = binary.BigEndian.AppendUint16(b, cmd)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

func mac(cookie Cookie, key string, clientNonce, serverNonce []byte) []byte {
	h := hmac.New(sha256.New, cookie[:])
	h.Write([]byte(key))
	h.Write(clientNonce)
	h.Write(serverNonce)
	return h.Sum(nil)
}

// unexpected turns EOF in the middle of the protocol into
// io.ErrUnexpectedEOF: tor closed the connection.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

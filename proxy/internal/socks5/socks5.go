// Package socks5 parses the client side of SOCKS version 5 (RFC 1928) and
// its username/password sub-negotiation (RFC 1929), and writes the replies.
//
// Every message is read with exact-length reads straight from the
// connection: nothing is buffered past the request, so data a client sends
// optimistically right after its request is left in the socket for the relay.
// All lengths in the protocol are single bytes, so no message can exceed 515
// bytes; a client that promises more than it sends is cut off by the
// caller's deadline.
package socks5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"braid/proxy/internal/dest"
)

// Protocol constants (RFC 1928 section 3-6, RFC 1929 section 2).
const (
	Version5       = 0x05
	userPassVer    = 0x01
	MethodNoAuth   = 0x00
	MethodUserPass = 0x02
	MethodNone     = 0xFF

	CmdConnect      = 0x01
	CmdBind         = 0x02
	CmdUDPAssociate = 0x03

	AtypIPv4   = 0x01
	AtypDomain = 0x03
	AtypIPv6   = 0x04
)

// Reply codes (RFC 1928 section 6).
const (
	ReplySucceeded          = 0x00
	ReplyGeneralFailure     = 0x01
	ReplyNotAllowed         = 0x02
	ReplyNetUnreachable     = 0x03
	ReplyHostUnreachable    = 0x04
	ReplyConnRefused        = 0x05
	ReplyTTLExpired         = 0x06
	ReplyCmdNotSupported    = 0x07
	ReplyAddrTypeNotSupport = 0x08
)

// Error is a protocol error; Reply is the code to send back to the client
// (if the exchange got far enough for a reply to make sense).
type Error struct {
	Reply byte
	Msg   string
}

func (e *Error) Error() string { return "socks5: " + e.Msg }

func protoErr(reply byte, format string, args ...any) error {
	return &Error{Reply: reply, Msg: fmt.Sprintf(format, args...)}
}

// ReplyFor returns the reply code that best describes err.
func ReplyFor(err error) byte {
	var e *Error
	if errors.As(err, &e) {
		return e.Reply
	}
	return ReplyGeneralFailure
}

// Request is a parsed SOCKS5 request.
type Request struct {
	Cmd  byte
	Dest dest.Addr
}

// ReadGreeting reads the version/method-selection message and returns the
// methods the client offers.
func ReadGreeting(r io.Reader) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("socks5: reading greeting: %w", err)
	}
	if hdr[0] != Version5 {
		return nil, protoErr(ReplyGeneralFailure, "version %#x in greeting", hdr[0])
	}
	if hdr[1] == 0 {
		return nil, protoErr(ReplyGeneralFailure, "greeting offers no methods")
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return nil, fmt.Errorf("socks5: reading greeting methods: %w", err)
	}
	return methods, nil
}

// WriteMethod answers the greeting with the chosen method (MethodNone if no
// offered method is acceptable).
func WriteMethod(w io.Writer, method byte) error {
	_, err := w.Write([]byte{Version5, method})
	return err
}

// ReadUserPass reads an RFC 1929 username/password request.
func ReadUserPass(r io.Reader) (user, pass string, err error) {
	var hdr [2]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return "", "", fmt.Errorf("socks5: reading user/pass: %w", err)
	}
	if hdr[0] != userPassVer {
		return "", "", protoErr(ReplyGeneralFailure, "user/pass version %#x", hdr[0])
	}
	if hdr[1] == 0 {
		return "", "", protoErr(ReplyGeneralFailure, "empty user name")
	}
	buf := make([]byte, int(hdr[1])+1)
	if _, err = io.ReadFull(r, buf); err != nil {
		return "", "", fmt.Errorf("socks5: reading user name: %w", err)
	}
	user = string(buf[:hdr[1]])
	plen := buf[hdr[1]]
	if plen == 0 {
		return "", "", protoErr(ReplyGeneralFailure, "empty password")
	}
	p := make([]byte, plen)
	if _, err = io.ReadFull(r, p); err != nil {
		return "", "", fmt.Errorf("socks5: reading password: %w", err)
	}
	return user, string(p), nil
}

// WriteUserPassStatus answers the username/password request.
func WriteUserPassStatus(w io.Writer, ok bool) error {
	status := byte(0x01)
	if ok {
		status = 0x00
	}
	_, err := w.Write([]byte{userPassVer, status})
	return err
}

// ReadRequest reads a request. Unsupported commands and address types are
// parsed to the end of the message and reported with the matching reply
// code, so the caller can answer before closing.
func ReadRequest(r io.Reader) (Request, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Request{}, fmt.Errorf("socks5: reading request: %w", err)
	}
	if hdr[0] != Version5 {
		return Request{}, protoErr(ReplyGeneralFailure, "version %#x in request", hdr[0])
	}
	req := Request{Cmd: hdr[1]}
	a, err := readAddr(r, hdr[3])
	if err != nil {
		return req, err
	}
	req.Dest = a
	switch req.Cmd {
	case CmdConnect:
	case CmdBind, CmdUDPAssociate:
		return req, protoErr(ReplyCmdNotSupported, "command %#x not supported", req.Cmd)
	default:
		return req, protoErr(ReplyCmdNotSupported, "unknown command %#x", req.Cmd)
	}
	if err := req.Dest.Validate(); err != nil {
		return req, protoErr(ReplyAddrTypeNotSupport, "destination: %v", err)
	}
	return req, nil
}

func readAddr(r io.Reader, atyp byte) (dest.Addr, error) {
	var a dest.Addr
	var buf [255 + 2]byte
	switch atyp {
	case AtypIPv4:
		if _, err := io.ReadFull(r, buf[:4+2]); err != nil {
			return a, fmt.Errorf("socks5: reading IPv4 address: %w", err)
		}
		a.IP = netip.AddrFrom4([4]byte(buf[:4]))
		a.Port = binary.BigEndian.Uint16(buf[4:])
	case AtypIPv6:
		if _, err := io.ReadFull(r, buf[:16+2]); err != nil {
			return a, fmt.Errorf("socks5: reading IPv6 address: %w", err)
		}
		a.IP = netip.AddrFrom16([16]byte(buf[:16])).Unmap()
		a.Port = binary.BigEndian.Uint16(buf[16:])
	case AtypDomain:
		if _, err := io.ReadFull(r, buf[:1]); err != nil {
			return a, fmt.Errorf("socks5: reading name length: %w", err)
		}
		n := int(buf[0])
		if n == 0 {
			return a, protoErr(ReplyAddrTypeNotSupport, "empty host name")
		}
		if _, err := io.ReadFull(r, buf[:n+2]); err != nil {
			return a, fmt.Errorf("socks5: reading host name: %w", err)
		}
		name := string(buf[:n])
		a.Port = binary.BigEndian.Uint16(buf[n:])
		// A literal address sent as a name is treated as an address, so
		// the destination policy sees it as one.
		if ip, err := netip.ParseAddr(name); err == nil && ip.Zone() == "" {
			a.IP = ip.Unmap()
		} else {
			a.Name = name
		}
	default:
		return a, protoErr(ReplyAddrTypeNotSupport, "address type %#x", atyp)
	}
	return a, nil
}

// AppendRequest encodes a CONNECT request (used by tests and the load
// generator's SOCKS client).
func AppendRequest(b []byte, cmd byte, a dest.Addr) []byte {
	b = append(b, Version5, cmd, 0)
	b = AppendAddr(b, a)
	return b
}

// AppendAddr encodes ATYP, address and port.
func AppendAddr(b []byte, a dest.Addr) []byte {
	switch {
	case a.Name != "":
		b = append(b, AtypDomain, byte(len(a.Name)))
		b = append(b, a.Name...)
	case a.IP.Is4():
		ip := a.IP.As4()
		b = append(b, AtypIPv4)
		b = append(b, ip[:]...)
	default:
		ip := a.IP.As16()
		b = append(b, AtypIPv6)
		b = append(b, ip[:]...)
	}
	return binary.BigEndian.AppendUint16(b, a.Port)
}

// WriteReply sends a reply with the given code and bound address (the
// zero AddrPort is sent as 0.0.0.0:0).
func WriteReply(w io.Writer, code byte, bound netip.AddrPort) error {
	b := make([]byte, 0, 22)
	b = append(b, Version5, code, 0)
	ip := bound.Addr().Unmap()
	if !ip.IsValid() {
		ip = netip.IPv4Unspecified()
	}
	b = AppendAddr(b, dest.Addr{IP: ip, Port: bound.Port()})
	_, err := w.Write(b)
	return err
}

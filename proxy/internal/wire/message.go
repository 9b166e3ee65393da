package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"braid/proxy/internal/dest"
)

// Version of the request/reply messages.
const Version = 1

// Address types inside a request (same numbers as SOCKS5).
const (
	atypIPv4 = 0x01
	atypName = 0x03
	atypIPv6 = 0x04
)

// Status is the server's answer to a request. The values are the SOCKS5
// reply codes, so the client passes them through unchanged.
type Status byte

// Statuses.
const (
	StatusOK              Status = 0x00
	StatusGeneralFailure  Status = 0x01
	StatusNotAllowed      Status = 0x02
	StatusNetUnreachable  Status = 0x03
	StatusHostUnreachable Status = 0x04
	StatusConnRefused     Status = 0x05
	StatusTTLExpired      Status = 0x06

	// StatusRetryWithoutEarlyData is not a SOCKS code: the server refused
	// the hello's early data (its client id's replay share is full) and
	// did nothing with it; the client connects again without early data.
	StatusRetryWithoutEarlyData Status = 0xe0
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusGeneralFailure:
		return "general failure"
	case StatusNotAllowed:
		return "not allowed"
	case StatusNetUnreachable:
		return "network unreachable"
	case StatusHostUnreachable:
		return "host unreachable"
	case StatusConnRefused:
		return "connection refused"
	case StatusTTLExpired:
		return "timed out"
	case StatusRetryWithoutEarlyData:
		return "early data refused, retry without"
	}
	return fmt.Sprintf("status(%d)", byte(s))
}

// ErrMalformed is returned for requests and replies that do not parse.
var ErrMalformed = errors.New("wire: malformed message")

// AppendRequest encodes a request: version | atyp | address | port.
func AppendRequest(b []byte, d dest.Addr) []byte {
	b = append(b, Version)
	switch {
	case d.Name != "":
		b = append(b, atypName, byte(len(d.Name)))
		b = append(b, d.Name...)
	case d.IP.Is4():
		a := d.IP.As4()
		b = append(b, atypIPv4)
		b = append(b, a[:]...)
	default:
		a := d.IP.As16()
		b = append(b, atypIPv6)
		b = append(b, a[:]...)
	}
	return binary.BigEndian.AppendUint16(b, d.Port)
}

// ParseRequest decodes a whole request frame and validates the destination.
func ParseRequest(b []byte) (dest.Addr, error) {
	var d dest.Addr
	if len(b) < 2 || b[0] != Version {
		return d, fmt.Errorf("%w: version", ErrMalformed)
	}
	rest := b[2:]
	switch b[1] {
	case atypIPv4:
		if len(rest) != 4+2 {
			return d, fmt.Errorf("%w: IPv4 length", ErrMalformed)
		}
		d.IP = netip.AddrFrom4([4]byte(rest[:4]))
		rest = rest[4:]
	case atypIPv6:
		if len(rest) != 16+2 {
			return d, fmt.Errorf("%w: IPv6 length", ErrMalformed)
		}
		d.IP = netip.AddrFrom16([16]byte(rest[:16])).Unmap()
		rest = rest[16:]
	case atypName:
		if len(rest) < 1 || len(rest) != 1+int(rest[0])+2 {
			return d, fmt.Errorf("%w: name length", ErrMalformed)
		}
		// int: 1+rest[0] in byte arithmetic wraps to 0 for a 255-byte
		// name, and the slice below panicked.
		n := 1 + int(rest[0])
		d.Name = string(rest[1:n])
		rest = rest[n:]
	default:
		return d, fmt.Errorf("%w: address type %d", ErrMalformed, b[1])
	}
	d.Port = binary.BigEndian.Uint16(rest)
	if err := d.Validate(); err != nil {
		return dest.Addr{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return d, nil
}

// ReplyFlagPadding, set in a reply's version byte, says the server drops
// padding frames (FlagPadding): the client may pad towards it. A server
// sets it only for a client whose hello said it knows the flag
// (auth.FlagPadding), since clients that predate it refuse any version
// byte but Version.
const ReplyFlagPadding = 0x80

// ReplyFlagLinger and ReplyFlagDrain answer the hello's auth.FlagDrain and
// auth.FlagLinger (linger.go): the server may pad after its FIN frame, so
// the client drains it; the server drains the client's padding after the
// client's FIN frame, so the client may linger. Each is set only for a
// client whose hello asked.
const (
	ReplyFlagLinger = 0x40
	ReplyFlagDrain  = 0x20
	replyFlags      = ReplyFlagPadding | ReplyFlagLinger | ReplyFlagDrain
)

// AppendReply encodes a reply: version | status.
func AppendReply(b []byte, s Status) []byte { return append(b, Version, byte(s)) }

// AppendReplyFlags encodes a reply with flags in the version byte.
func AppendReplyFlags(b []byte, s Status, flags byte) []byte {
	return append(b, Version|flags, byte(s))
}

// ParseReply decodes a reply without flags.
func ParseReply(b []byte) (Status, error) {
	if len(b) != 2 || b[0] != Version {
		return 0, fmt.Errorf("%w: reply", ErrMalformed)
	}
	return Status(b[1]), nil
}

// ParseReplyFlags decodes a reply that may carry the reply flags.
func ParseReplyFlags(b []byte) (Status, byte, error) {
	if len(b) != 2 || b[0]&^replyFlags != Version {
		return 0, 0, fmt.Errorf("%w: reply", ErrMalformed)
	}
	return Status(b[1]), b[0] & replyFlags, nil
}

package loadgen

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"braid/proxy/internal/dest"
	"braid/proxy/internal/socks5"
)

// SOCKSDialer returns a dialer that connects through a SOCKS5 proxy
// (no authentication, or user/password if user is set), naming target
// by host name or address as given.
func SOCKSDialer(proxy, target, user, pass string) (Dialer, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	d := dest.Addr{Name: host, Port: uint16(p)}
	if ip, err := netip.ParseAddr(host); err == nil {
		d = dest.Addr{IP: ip, Port: uint16(p)}
	}
	req := socks5.AppendRequest(nil, socks5.CmdConnect, d)
	return func(ctx context.Context) (net.Conn, error) {
		var nd net.Dialer
		c, err := nd.DialContext(ctx, "tcp", proxy)
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			c.SetDeadline(dl)
		}
		err = socksHandshake(c, req, user, pass)
		c.SetDeadline(time.Time{})
		if err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}, nil
}

func socksHandshake(c net.Conn, req []byte, user, pass string) error {
	greet := []byte{5, 1, 0}
	if user != "" {
		greet = []byte{5, 1, 2}
	}
	// No pipelining of greeting and request: not every proxy (microsocks)
	// accepts it, and curl does not do it either.
	if _, err := c.Write(greet); err != nil {
		return err
	}
	var m [2]byte
	if _, err := io.ReadFull(c, m[:]); err != nil {
		return fmt.Errorf("socks method: %w", err)
	}
	if m[1] != greet[2] {
		return fmt.Errorf("socks method %#x refused", greet[2])
	}
	if user == "" {
		if _, err := c.Write(req); err != nil {
			return err
		}
	} else {
		up := append([]byte{1, byte(len(user))}, user...)
		up = append(append(up, byte(len(pass))), pass...)
		if _, err := c.Write(up); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, m[:]); err != nil || m[1] != 0 {
			return fmt.Errorf("socks auth failed")
		}
		if _, err := c.Write(req); err != nil {
			return err
		}
	}
	var rep [4]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		return fmt.Errorf("socks reply: %w", err)
	}
	if rep[1] != 0 {
		return fmt.Errorf("socks reply code %d", rep[1])
	}
	skip := 0
	switch rep[3] {
	case 1:
		skip = 4 + 2
	case 4:
		skip = 16 + 2
	case 3:
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return err
		}
		skip = int(l[0]) + 2
	default:
		return fmt.Errorf("socks reply address type %d", rep[3])
	}
	_, err := io.ReadFull(c, make([]byte, skip))
	return err
}

// DirectDialer connects straight to target, optionally with MPTCP and from
// a given source address.
func DirectDialer(target string, mptcp bool, src string) Dialer {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		d.SetMultipathTCP(mptcp)
		if src != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
		}
		return d.DialContext(ctx, "tcp", target)
	}
}

// Package pt speaks Tor's pluggable-transport protocol (pt-spec.txt,
// version 1) on the transport's side: the managed-proxy environment that
// tor sets (TOR_PT_*), the lines the transport answers on stdout (VERSION,
// CMETHOD, SMETHOD, the *-ERROR lines) and the per-bridge arguments that
// tor passes through SOCKS user name and password ("k=v;k=v" with
// backslash escapes).
//
// It is written here rather than taken from goptlib: goptlib is packaged in
// Debian (golang-goptlib-dev) but not served by the Go module proxy, and
// braid-proxy builds with the standard library and go.mod alone. The
// protocol is small; this package only parses and formats, and the braid
// binding lives in cmd/braid-pt.
package pt

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Version is the only managed-proxy protocol version there is.
const Version = "1"

// Env looks up an environment variable (os.Getenv in production; a map in
// tests).
type Env func(string) string

// Common is the part of the environment both roles get.
type Common struct {
	StateDir         string // TOR_PT_STATE_LOCATION, where the transport keeps its files
	ExitOnStdinClose bool   // TOR_PT_EXIT_ON_STDIN_CLOSE=1
	// OutboundV4 and OutboundV6 are the source addresses tor asks the
	// transport to use for its outgoing IPv4 and IPv6 connections
	// (TOR_PT_OUTBOUND_BIND_ADDRESS_V4/_V6, from torrc's
	// OutboundBindAddressPT; invalid if unset). Connections to loopback
	// addresses ignore them (OutboundFor).
	OutboundV4, OutboundV6 netip.Addr
}

// OutboundFor returns the source address for a connection to dst: the
// bind address of dst's family, unless dst is a loopback address (pt-spec:
// the setting is ignored for 127.0.0.0/8 and ::1) or none was given.
func (c Common) OutboundFor(dst netip.Addr) (netip.Addr, bool) {
	dst = dst.Unmap()
	switch {
	case !dst.IsValid() || dst.IsLoopback():
		return netip.Addr{}, false
	case dst.Is4() && c.OutboundV4.IsValid():
		return c.OutboundV4, true
	case dst.Is6() && c.OutboundV6.IsValid():
		return c.OutboundV6, true
	}
	return netip.Addr{}, false
}

// Client is a client transport's environment.
type Client struct {
	Common
	Transports []string // requested names, "*" expanded by Select
	Proxy      string   // TOR_PT_PROXY (upstream proxy), unsupported by braid
}

// Bind is one TOR_PT_SERVER_BINDADDR entry.
type Bind struct {
	Transport string
	Addr      netip.AddrPort
}

// Server is a server transport's environment.
type Server struct {
	Common
	Transports []string
	Binds      []Bind          // TOR_PT_SERVER_BINDADDR
	ORPort     netip.AddrPort  // TOR_PT_ORPORT (invalid if unset)
	ExtORPort  netip.AddrPort  // TOR_PT_EXTENDED_SERVER_PORT (invalid if unset)
	AuthCookie string          // TOR_PT_AUTH_COOKIE_FILE
	Options    map[string]Args // TOR_PT_SERVER_TRANSPORT_OPTIONS per transport
}

// EnvError is a problem with the environment; its text goes into an
// ENV-ERROR (or VERSION-ERROR) line.
type EnvError struct {
	Line string // the full line to print, e.g. "ENV-ERROR no TOR_PT_STATE_LOCATION"
}

func (e *EnvError) Error() string { return "pt: " + e.Line }

func envErr(format string, args ...any) error {
	return &EnvError{Line: "ENV-ERROR " + oneLine(fmt.Sprintf(format, args...))}
}

func parseCommon(env Env) (Common, error) {
	vers := env("TOR_PT_MANAGED_TRANSPORT_VER")
	if vers == "" {
		return Common{}, envErr("TOR_PT_MANAGED_TRANSPORT_VER is not set (is this run by tor as a managed proxy?)")
	}
	if !slices.Contains(strings.Split(vers, ","), Version) {
		return Common{}, &EnvError{Line: "VERSION-ERROR no-version"}
	}
	c := Common{StateDir: env("TOR_PT_STATE_LOCATION")}
	if c.StateDir == "" {
		return Common{}, envErr("TOR_PT_STATE_LOCATION is not set")
	}
	switch v := env("TOR_PT_EXIT_ON_STDIN_CLOSE"); v {
	case "", "0":
	case "1":
		c.ExitOnStdinClose = true
	default:
		return Common{}, envErr("TOR_PT_EXIT_ON_STDIN_CLOSE must be 0 or 1, not %q", v)
	}
	var err error
	if c.OutboundV4, err = parseBindAddr(env, "TOR_PT_OUTBOUND_BIND_ADDRESS_V4", false); err != nil {
		return Common{}, err
	}
	if c.OutboundV6, err = parseBindAddr(env, "TOR_PT_OUTBOUND_BIND_ADDRESS_V6", true); err != nil {
		return Common{}, err
	}
	return c, nil
}

// parseBindAddr reads an outbound bind address: an IPv4 address, or an
// IPv6 one, which tor wraps in square brackets (accepted without them too).
// Unset or empty means none.
func parseBindAddr(env Env, name string, v6 bool) (netip.Addr, error) {
	v := env(name)
	if v == "" {
		return netip.Addr{}, nil
	}
	s := v
	if v6 && len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil || a.Zone() != "":
		return netip.Addr{}, envErr("%s: %q is not an IP address", name, v)
	case v6 && !a.Is6(), !v6 && !a.Is4():
		fam := map[bool]string{false: "IPv4", true: "IPv6"}[v6]
		return netip.Addr{}, envErr("%s: %q is not an %s address", name, v, fam)
	}
	return a, nil
}

func transportList(env Env, name string) ([]string, error) {
	v := env(name)
	if v == "" {
		return nil, envErr("%s is not set or empty", name)
	}
	list := strings.Split(v, ",")
	for _, t := range list {
		if t != "*" && !validName(t) {
			return nil, envErr("%s: invalid transport name %q", name, t)
		}
	}
	return list, nil
}

// validName: transport names are C identifiers (pt-spec 3.2.1).
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ParseClient reads a client transport's environment.
func ParseClient(env Env) (*Client, error) {
	c, err := parseCommon(env)
	if err != nil {
		return nil, err
	}
	ts, err := transportList(env, "TOR_PT_CLIENT_TRANSPORTS")
	if err != nil {
		return nil, err
	}
	return &Client{Common: c, Transports: ts, Proxy: env("TOR_PT_PROXY")}, nil
}

// ParseServer reads a server transport's environment.
func ParseServer(env Env) (*Server, error) {
	c, err := parseCommon(env)
	if err != nil {
		return nil, err
	}
	ts, err := transportList(env, "TOR_PT_SERVER_TRANSPORTS")
	if err != nil {
		return nil, err
	}
	s := &Server{Common: c, Transports: ts, AuthCookie: env("TOR_PT_AUTH_COOKIE_FILE")}
	if v := env("TOR_PT_ORPORT"); v != "" {
		if s.ORPort, err = parseAddrPort(v); err != nil {
			return nil, envErr("TOR_PT_ORPORT: %v", err)
		}
	}
	if v := env("TOR_PT_EXTENDED_SERVER_PORT"); v != "" {
		if s.ExtORPort, err = parseAddrPort(v); err != nil {
			return nil, envErr("TOR_PT_EXTENDED_SERVER_PORT: %v", err)
		}
	}
	if !s.ORPort.IsValid() && !s.ExtORPort.IsValid() {
		return nil, envErr("neither TOR_PT_ORPORT nor TOR_PT_EXTENDED_SERVER_PORT is set")
	}
	if v := env("TOR_PT_SERVER_BINDADDR"); v != "" {
		for _, e := range strings.Split(v, ",") {
			name, addr, ok := strings.Cut(e, "-")
			if !ok || !validName(name) {
				return nil, envErr("TOR_PT_SERVER_BINDADDR: entry %q is not transport-addr:port", e)
			}
			ap, err := parseAddrPort(addr)
			if err != nil {
				return nil, envErr("TOR_PT_SERVER_BINDADDR: %s: %v", name, err)
			}
			s.Binds = append(s.Binds, Bind{Transport: name, Addr: ap})
		}
	}
	if v := env("TOR_PT_SERVER_TRANSPORT_OPTIONS"); v != "" {
		if s.Options, err = ParseServerOptions(v); err != nil {
			return nil, envErr("TOR_PT_SERVER_TRANSPORT_OPTIONS: %v", err)
		}
	}
	return s, nil
}

// BindFor returns the address tor asks transport to listen on, if any.
func (s *Server) BindFor(transport string) (netip.AddrPort, bool) {
	for _, b := range s.Binds {
		if b.Transport == transport {
			return b.Addr, true
		}
	}
	return netip.AddrPort{}, false
}

// Wants reports whether transport was requested (by name or by "*").
func Wants(requested []string, transport string) bool {
	return slices.Contains(requested, transport) || slices.Contains(requested, "*")
}

func parseAddrPort(s string) (netip.AddrPort, error) {
	// tor writes IPv6 as [addr]:port, which ParseAddrPort reads.
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("%q is not address:port", s)
	}
	if ap.Port() == 0 && !strings.HasSuffix(s, ":0") {
		return ap, fmt.Errorf("%q has no port", s)
	}
	return ap, nil
}

// Args are transport arguments in their order of appearance; a key may
// repeat (pt-spec allows it), Get returns the first.
type Args []KV

// KV is one argument.
type KV struct{ Key, Value string }

// Get returns the value of key and whether it was given.
func (a Args) Get(key string) (string, bool) {
	for _, kv := range a {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return "", false
}

// ErrArgs wraps every malformed-argument error.
var ErrArgs = errors.New("malformed transport arguments")

// ParseSOCKSArgs decodes the per-bridge arguments that tor sends in the
// SOCKS5 user name and password: their concatenation is "k=v;k=v", where
// '\' escapes the next character (so values may hold ';', '=' and '\').
// tor sends a password of one NUL byte when the arguments fit the user
// name; that byte is not part of them.
func ParseSOCKSArgs(user, pass string) (Args, error) {
	s := user
	if pass != "\x00" {
		s += pass
	}
	return parseKV(s, ';')
}

// parseKV splits "k=v<sep>k=v" with backslash escapes. Keys must not be
// empty; a value may be.
func parseKV(s string, sep byte) (Args, error) {
	if s == "" {
		return nil, nil
	}
	var (
		out      Args
		cur      strings.Builder
		key      string
		inValue  bool
		escaping bool
	)
	finish := func() error {
		if !inValue {
			return fmt.Errorf("%w: %q has no '='", ErrArgs, cur.String())
		}
		out = append(out, KV{key, cur.String()})
		cur.Reset()
		inValue = false
		return nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaping:
			cur.WriteByte(c)
			escaping = false
		case c == '\\':
			escaping = true
		case c == '=' && !inValue:
			key = cur.String()
			if key == "" {
				return nil, fmt.Errorf("%w: empty key", ErrArgs)
			}
			cur.Reset()
			inValue = true
		case c == sep:
			if err := finish(); err != nil {
				return nil, err
			}
		default:
			cur.WriteByte(c)
		}
	}
	if escaping {
		return nil, fmt.Errorf("%w: ends with a lone '\\'", ErrArgs)
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseServerOptions decodes TOR_PT_SERVER_TRANSPORT_OPTIONS:
// "transport:k=v;transport:k=v" with backslash escapes.
func ParseServerOptions(s string) (map[string]Args, error) {
	kvs, err := parseKV(s, ';')
	if err != nil {
		return nil, err
	}
	out := map[string]Args{}
	for _, kv := range kvs {
		t, k, ok := strings.Cut(kv.Key, ":")
		if !ok || !validName(t) || k == "" {
			return nil, fmt.Errorf("%w: option %q is not transport:key=value", ErrArgs, kv.Key)
		}
		out[t] = append(out[t], KV{k, kv.Value})
	}
	return out, nil
}

// EncodeArgs formats args for a bridge line ("k=v k=v", tor's own syntax,
// values with spaces are not representable there and are refused) or, with
// sep ',', for SMETHOD's ARGS: option, escaping ',', '=' and '\'.
func EncodeArgs(args Args, sep byte) (string, error) {
	var b strings.Builder
	for i, kv := range args {
		if i > 0 {
			b.WriteByte(sep)
		}
		for _, part := range []string{kv.Key, kv.Value} {
			if strings.ContainsAny(part, " \t\r\n") {
				return "", fmt.Errorf("%w: %q holds white space", ErrArgs, part)
			}
		}
		b.WriteString(escape(kv.Key, sep))
		b.WriteByte('=')
		b.WriteString(escape(kv.Value, sep))
	}
	return b.String(), nil
}

func escape(s string, sep byte) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '=' || c == sep {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// oneLine keeps a message on one protocol line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// Out writes protocol lines to tor (stdout); safe for concurrent use, and
// each line is written whole.
type Out struct {
	mu sync.Mutex
	w  io.Writer
}

// NewOut writes lines to w.
func NewOut(w io.Writer) *Out { return &Out{w: w} }

// Line writes one protocol line.
func (o *Out) Line(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, "%s\n", oneLine(fmt.Sprintf(format, args...)))
}

// Version announces the protocol version.
func (o *Out) Version() { o.Line("VERSION %s", Version) }

// CMethod announces a client transport's SOCKS5 listener.
func (o *Out) CMethod(name string, addr netip.AddrPort) {
	o.Line("CMETHOD %s socks5 %s", name, addr)
}

// CMethodError reports that a client transport cannot run.
func (o *Out) CMethodError(name, msg string) { o.Line("CMETHOD-ERROR %s %s", name, msg) }

// CMethodsDone ends the client transports' list.
func (o *Out) CMethodsDone() { o.Line("CMETHODS DONE") }

// SMethod announces a server transport's listener, with args for its
// clients' bridge lines (tor copies them into its extra-info descriptor).
func (o *Out) SMethod(name string, addr netip.AddrPort, args Args) error {
	if len(args) == 0 {
		o.Line("SMETHOD %s %s", name, addr)
		return nil
	}
	enc, err := EncodeArgs(args, ',')
	if err != nil {
		return err
	}
	o.Line("SMETHOD %s %s ARGS:%s", name, addr, enc)
	return nil
}

// SMethodError reports that a server transport cannot run.
func (o *Out) SMethodError(name, msg string) { o.Line("SMETHOD-ERROR %s %s", name, msg) }

// SMethodsDone ends the server transports' list.
func (o *Out) SMethodsDone() { o.Line("SMETHODS DONE") }

// ProxyError refuses TOR_PT_PROXY.
func (o *Out) ProxyError(msg string) { o.Line("PROXY-ERROR %s", msg) }

// Log sends a message to tor's log (pt-spec 3.3.4); severity is one of
// error, warning, notice, info, debug.
func (o *Out) Log(severity, msg string) {
	o.Line("LOG SEVERITY=%s MESSAGE=%s", severity, quote(msg))
}

// quote makes a C-style quoted string, as the LOG line wants.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, "\\%03o", c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

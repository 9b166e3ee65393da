// Package config holds the configuration of both braid-proxy roles: a JSON
// file (unknown fields are errors, so typos do not pass silently), defaults
// for everything that has a sensible one, command-line flags that override
// the file, and validation whose errors name the offending field.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"braid/proxy/internal/auth"
)

// Defaults shared by documentation, flags and validation.
const (
	DefaultSOCKSListen       = "127.0.0.1:1080"
	DefaultServerListen      = "0.0.0.0:7443"
	DefaultClientMetrics     = "127.0.0.1:9180"
	DefaultServerMetrics     = "127.0.0.1:9181"
	DefaultGatewayStatusFile = "/run/braid/gateways.json"
	DefaultDialTimeout       = 10 * time.Second
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultIdleTimeout       = 5 * time.Minute
	DefaultShutdownGrace     = 10 * time.Second
	DefaultMaxClockSkew      = 30 * time.Second
	DefaultClientMaxConns    = 4096
	DefaultServerMaxConns    = 16384
	DefaultMaxConnsPerClient = 4096
	// Unauthenticated connections: a quarter of max_conns in total (the
	// rest is kept for connections that have authenticated) and this many
	// per source (an IPv4 address or an IPv6 /64), a quarter of the
	// default total: a flood must come from several sources to fill the
	// pre-authentication slots. A client box's connections are
	// unauthenticated only until their hello arrives (its silent spares:
	// preconnect, at most MaxPreconnect), but a burst of new ones (1,000
	// at once in the load test) is that many at the same moment.
	DefaultMaxPreauthPerSource = 1024
	// How long a server connection may stay silent before its first byte:
	// the budget of a client's spare connections (preconnect_max_age must
	// stay below it). The rest of the hello then has handshake_timeout.
	DefaultFirstByteTimeout = 10 * time.Second
	DefaultRaceDelay        = 0
	// Both roles run their Go code on one scheduler thread, as event-loop
	// proxies do: per-connection work is small and hand-offs between
	// threads (and the runtime's monitor waking for them) cost more than
	// they gain. One thread relays several Gbit/s (proxy/README.md,
	// "Runtime settings"), far above a client box's WANs and most relays'
	// uplinks; a relay that must carry more raises max_procs.
	DefaultClientMaxProcs = 1
	DefaultServerMaxProcs = 1

	// One spare connection to the server, replaced before the server's
	// default handshake timeout (10s) would close it.
	DefaultPreconnect       = 1
	DefaultPreconnectMaxAge = 5 * time.Second
	MaxPreconnect           = 64

	// SOCKSReplyAuto answers early for a destination this client reached
	// through the server within the last 10 minutes, and after the
	// server's answer otherwise: a refused destination gets its real reply
	// code, and the connections of a page, which reuse few destinations,
	// still answer at once.
	SOCKSReplyAuto = "auto"
	// SOCKSReplyEarly answers SOCKS as soon as the connection to the server
	// is up; the application's first bytes then travel with the hello.
	SOCKSReplyEarly = "early"
	// SOCKSReplyConnected answers only after the server has reached the
	// destination, with the real reply code; one round trip slower.
	SOCKSReplyConnected = "connected"

	// Adaptive padding: off (budget 0) by default; padding
	// stops this long after the last real frame, the idle threshold
	// defenses/braid_wf/defences/adaptive_padding.py uses (IDLE_S).
	DefaultPaddingIdle = time.Second
	// padding_scope values.
	PaddingScopeClient     = "client"
	PaddingScopeConnection = "connection"
	// MaxPaddingBudget bounds padding_budget (padding bytes per data byte).
	MaxPaddingBudget = 10
)

// Duration is a time.Duration written as "10s" in JSON.
type Duration time.Duration

// UnmarshalJSON accepts Go duration strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"10s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// String implements flag.Value.
func (d *Duration) String() string { return time.Duration(*d).String() }

// Set implements flag.Value.
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Common holds settings of both roles.
type Common struct {
	Auth             string   `json:"auth"`                 // psk (default) or tls
	MetricsListen    string   `json:"metrics_listen"`       // localhost status endpoint; "" disables
	AllowPublicStats bool     `json:"allow_public_metrics"` // permit a non-loopback metrics address
	LogLevel         string   `json:"log_level"`            // debug|info|warn|error
	LogFormat        string   `json:"log_format"`           // text|json
	HandshakeTimeout Duration `json:"handshake_timeout"`    // bound on SOCKS / hello exchange
	DialTimeout      Duration `json:"dial_timeout"`
	IdleTimeout      Duration `json:"idle_timeout"` // 0 disables
	ShutdownGrace    Duration `json:"shutdown_grace"`
	MaxConns         int      `json:"max_conns"`
	MaxProcs         int      `json:"max_procs"` // Go scheduler threads (GOMAXPROCS); 0 = one per CPU
	// Adaptive padding of the direction this end sends (PSK mode with
	// encryption only): padding wire bytes ≤ padding_budget × data wire
	// bytes per connection; 0 = off.
	PaddingBudget     float64  `json:"padding_budget"`
	PaddingIdle       Duration `json:"padding_idle"`       // no padding this long after the last real frame
	PaddingHistograms string   `json:"padding_histograms"` // delay histograms (JSON); "" = built-in
	// What one padding state machine and budget cover: "client" (all of a
	// client's connections as one stream, so a page loaded over one short
	// connection per object is padded through its gaps) or "connection".
	PaddingScope string `json:"padding_scope"`
}

// RelayKeepAlive is the net package's keepalive setting for the sockets a
// relay spans between client box, server and destination: off (-1) while
// the idle timeout ends relays that go quiet, which also catches a peer
// that vanished (and saves the four system calls per socket that turning
// it on costs); Go's default probes (0) when relays may idle forever, so
// that a vanished peer does not hold one.
func (c *Common) RelayKeepAlive() time.Duration {
	if c.IdleTimeout > 0 {
		return -1
	}
	return 0
}

// Client is the client-box role.
type Client struct {
	Common
	SOCKSListen       string `json:"socks_listen"`       // "" disables SOCKS
	TransparentListen string `json:"transparent_listen"` // "" disables transparent mode
	Server            string `json:"server"`             // host:port of braid-proxy server
	// Servers lists several relays (see relays.go) in place of server.
	Servers      []Relay `json:"servers"`
	ServerPolicy string  `json:"server_policy"` // failover (default), spread or sticky
	// HealthInterval is how often each relay of a servers list gets a
	// health check (an authenticated handshake); 0 = none.
	HealthInterval Duration `json:"health_interval"`
	HealthTimeout  Duration `json:"health_timeout"` // a health check's limit
	// HealthCloseAfter consecutive failed health checks close the
	// connections in flight on that relay; 0 = never.
	HealthCloseAfter int    `json:"health_close_after"`
	ClientID         string `json:"client_id"`
	KeyFile          string `json:"key_file"`
	// ServerPublicKey is the server's static public key (its
	// static_key_file's): the client then accepts only that server, not
	// any holder of its pre-shared key. "" = a server without one.
	ServerPublicKey string `json:"server_public_key"`
	Encrypt         bool   `json:"encrypt"`
	SOCKSReply      string `json:"socks_reply"`      // auto (default), early or connected
	SOCKSUsersFile  string `json:"socks_users_file"` // "user:password" lines; "" = no SOCKS auth
	// AllowPublicSOCKS permits a non-loopback socks_listen without a
	// users file (an open proxy to whoever reaches it: only behind a
	// firewall that limits who does).
	AllowPublicSOCKS  bool     `json:"allow_public_socks"`
	GatewayStatusFile string   `json:"gateway_status_file"`
	Race              bool     `json:"race"`
	RaceDelay         Duration `json:"race_delay"`
	NoMPTCP           bool     `json:"no_mptcp"`   // testing only: plain TCP to the server
	FastOpen          bool     `json:"fast_open"`  // TCP Fast Open to the server when not racing
	Preconnect        int      `json:"preconnect"` // idle connections kept ready to the server
	PreconnectMaxAge  Duration `json:"preconnect_max_age"`
	TLSCertFile       string   `json:"tls_cert_file"`  // auth tls: this client's certificate
	TLSKeyFile        string   `json:"tls_key_file"`   // auth tls: its private key (mode 0600)
	TLSServerPin      string   `json:"tls_server_pin"` // auth tls: SHA-256 of the server certificate
}

// Server is the relay role.
type Server struct {
	Common
	Listen  string `json:"listen"`
	KeyFile string `json:"key_file"`
	// StaticKeyFile holds the server's static X25519 key (braid-proxy
	// genkey -static): clients that are given its public key
	// (server_public_key) can tell this server from anyone else who
	// knows their pre-shared key. "" = none; every client must then
	// have no server_public_key.
	StaticKeyFile  string   `json:"static_key_file"`
	AllowPlaintext bool     `json:"allow_plaintext"`
	AllowCIDRs     []string `json:"allow_cidrs"`
	AllowList      []string `json:"allow_list"`
	// RefuseCIDRs are refused besides the built-in ranges, even inside
	// AllowCIDRs: the relay's public address behind a provider's 1:1
	// NAT is on no interface, so the relay cannot find it itself.
	RefuseCIDRs       []string `json:"refuse_cidrs"`
	MaxConnsPerClient int      `json:"max_conns_per_client"`
	// Pre-authentication limits (see package preauth): 0 = max_conns/4.
	MaxPreauthConns     int      `json:"max_preauth_conns"`
	MaxPreauthPerSource int      `json:"max_preauth_per_source"`
	FirstByteTimeout    Duration `json:"first_byte_timeout"`
	MaxClockSkew        Duration `json:"max_clock_skew"`
	ResolveTimeout      Duration `json:"resolve_timeout"`
	TLSCertFile         string   `json:"tls_cert_file"`  // auth tls: server certificate
	TLSKeyFile          string   `json:"tls_key_file"`   // auth tls: its private key (mode 0600)
	TLSPeersFile        string   `json:"tls_peers_file"` // auth tls: "client-id pin" lines
}

func defaultCommon(metrics string, maxConns, maxProcs int) Common {
	return Common{
		Auth:             "psk",
		MetricsListen:    metrics,
		LogLevel:         "info",
		LogFormat:        "text",
		HandshakeTimeout: Duration(DefaultHandshakeTimeout),
		DialTimeout:      Duration(DefaultDialTimeout),
		IdleTimeout:      Duration(DefaultIdleTimeout),
		ShutdownGrace:    Duration(DefaultShutdownGrace),
		MaxConns:         maxConns,
		MaxProcs:         maxProcs,
		PaddingIdle:      Duration(DefaultPaddingIdle),
		PaddingScope:     PaddingScopeClient,
	}
}

// DefaultClient returns the client defaults.
func DefaultClient() *Client {
	return &Client{
		Common:            defaultCommon(DefaultClientMetrics, DefaultClientMaxConns, DefaultClientMaxProcs),
		SOCKSListen:       DefaultSOCKSListen,
		Encrypt:           true,
		SOCKSReply:        SOCKSReplyAuto,
		GatewayStatusFile: DefaultGatewayStatusFile,
		Preconnect:        DefaultPreconnect,
		PreconnectMaxAge:  Duration(DefaultPreconnectMaxAge),
		ServerPolicy:      PolicyFailover,
		HealthInterval:    Duration(DefaultHealthInterval),
		HealthTimeout:     Duration(DefaultHealthTimeout),
		HealthCloseAfter:  DefaultHealthCloseAfter,
	}
}

// DefaultServer returns the server defaults.
func DefaultServer() *Server {
	return &Server{
		Common:              defaultCommon(DefaultServerMetrics, DefaultServerMaxConns, DefaultServerMaxProcs),
		Listen:              DefaultServerListen,
		MaxConnsPerClient:   DefaultMaxConnsPerClient,
		MaxPreauthPerSource: DefaultMaxPreauthPerSource,
		FirstByteTimeout:    Duration(DefaultFirstByteTimeout),
		MaxClockSkew:        Duration(DefaultMaxClockSkew),
		ResolveTimeout:      Duration(5 * time.Second),
	}
}

// Decode reads JSON into v (which holds defaults), refusing unknown fields,
// fields given twice and trailing data.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			return fmt.Errorf("syntax error at line %d, column %d: %w", line, col, err)
		}
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	if name, err := repeatedField(data); err != nil {
		return err
	} else if name != "" {
		return fmt.Errorf("field %q is given twice (only one of them would count)", name)
	}
	return nil
}

// position is the line and column (from 1) of the byte before offset.
func position(data []byte, offset int64) (line, col int) {
	before := data[:min(max(offset-1, 0), int64(len(data)))]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// repeatedField returns the first object member of data named twice in its
// object, as a dotted path, or "". encoding/json keeps the last silently:
// an operator who edits the first copy of a setting changes nothing.
func repeatedField(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path string) (string, error)
	walk = func(path string) (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		delim, ok := tok.(json.Delim)
		if !ok {
			return "", nil
		}
		seen := map[string]bool{}
		for i := 0; dec.More(); i++ {
			member := strconv.Itoa(i)
			if delim == '{' {
				name, err := dec.Token()
				if err != nil {
					return "", err
				}
				member = name.(string)
				if seen[member] {
					return path + member, nil
				}
				seen[member] = true
			}
			if dup, err := walk(path + member + "."); dup != "" || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token() // the closing delimiter
		return "", err
	}
	return walk("")
}

// BindCommon registers the shared flags.
func BindCommon(c *Common, fs *flag.FlagSet) {
	fs.StringVar(&c.Auth, "auth", c.Auth, "authentication: psk (pre-shared key) or tls (mutual TLS 1.3, pinned certificates)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "status/metrics HTTP endpoint (loopback only); empty disables")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn, error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log format: text or json")
	fs.Var(&c.HandshakeTimeout, "handshake-timeout", "time allowed for the SOCKS/hello exchange")
	fs.Var(&c.DialTimeout, "dial-timeout", "time allowed to connect")
	fs.Var(&c.IdleTimeout, "idle-timeout", "close relays idle this long (0 disables)")
	fs.Var(&c.ShutdownGrace, "shutdown-grace", "on SIGTERM, wait this long for relays to finish")
	fs.IntVar(&c.MaxConns, "max-conns", c.MaxConns, "maximum concurrent connections")
	fs.IntVar(&c.MaxProcs, "max-procs", c.MaxProcs, "threads running Go code at once (GOMAXPROCS); 0 = one per CPU")
	fs.Float64Var(&c.PaddingBudget, "padding-budget", c.PaddingBudget, "adaptive padding of what this end sends: padding bytes at most this many times the data bytes per connection (e.g. 0.4); 0 = off. Only with auth psk and encryption, towards a peer that supports it")
	fs.Var(&c.PaddingIdle, "padding-idle", "adaptive padding stops this long after the last data in either direction")
	fs.StringVar(&c.PaddingScope, "padding-scope", c.PaddingScope, "what one adaptive padding budget covers: client (all of a client's connections as one stream; pads pages loaded over one connection per object) or connection")
	fs.StringVar(&c.PaddingHistograms, "padding-histograms", c.PaddingHistograms, "adaptive padding delay histograms (JSON from defenses/braid_wf/defences/adaptive_padding.py histograms_to_json); empty = built-in")
}

// BindClient registers the client flags on fs, writing into c.
func BindClient(c *Client, fs *flag.FlagSet) {
	BindCommon(&c.Common, fs)
	fs.StringVar(&c.SOCKSListen, "socks-listen", c.SOCKSListen, "SOCKS5 listen address; empty disables")
	fs.StringVar(&c.TransparentListen, "transparent-listen", c.TransparentListen, "listen address for iptables/nftables-redirected connections; empty disables")
	fs.StringVar(&c.Server, "server", c.Server, "braid-proxy server host:port (required unless the config file has a servers list)")
	fs.StringVar(&c.ServerPolicy, "server-policy", c.ServerPolicy, "with a servers list: failover (the first healthy relay), spread (new connections by weight over the healthy relays) or sticky (each destination host on one healthy relay)")
	fs.Var(&c.HealthInterval, "health-interval", "with a servers list: time between health checks (authenticated handshakes) of each relay; 0 disables")
	fs.Var(&c.HealthTimeout, "health-timeout", "time allowed for one health check")
	fs.IntVar(&c.HealthCloseAfter, "health-close-after", c.HealthCloseAfter, "close the connections in flight on a relay after this many consecutive failed health checks; 0 = never")
	fs.StringVar(&c.ClientID, "client-id", c.ClientID, "this client's id in the key file")
	fs.StringVar(&c.KeyFile, "key-file", c.KeyFile, "pre-shared key file, mode 0600 (required)")
	fs.StringVar(&c.ServerPublicKey, "server-public-key", c.ServerPublicKey, "the server's static public key (base64, from braid-proxy genkey -static): accept only the server holding its private key")
	fs.BoolVar(&c.Encrypt, "encrypt", c.Encrypt, "encrypt relayed data (the server must allow_plaintext for false)")
	fs.StringVar(&c.SOCKSReply, "socks-reply", c.SOCKSReply, "when to answer a SOCKS request: \"early\" once the server connection is up (the request and the first data go out together; a refused destination then shows as a reset connection), \"connected\" after the server reached the destination (real SOCKS error codes, one round trip slower), or \"auto\": early for a destination reached in the last 10 minutes, connected otherwise")
	fs.StringVar(&c.SOCKSUsersFile, "socks-users-file", c.SOCKSUsersFile, "require SOCKS5 user/password (file of user:password lines, mode 0600)")
	fs.BoolVar(&c.AllowPublicSOCKS, "allow-public-socks", c.AllowPublicSOCKS, "permit a non-loopback socks-listen without socks-users-file (anyone who reaches it can use the relay: only behind a firewall)")
	fs.StringVar(&c.GatewayStatusFile, "gateway-status-file", c.GatewayStatusFile, "path manager status file used to pick the first subflow's gateway")
	fs.BoolVar(&c.Race, "race", c.Race, "race the handshake over the two best gateways and keep the first")
	fs.Var(&c.RaceDelay, "race-delay", "head start of the best gateway before the second one is tried")
	fs.BoolVar(&c.FastOpen, "fast-open", c.FastOpen, "experimental, off by default: send the hello in the SYN (TCP Fast Open) when not racing; saves a round trip (server needs sysctl net.ipv4.tcp_fastopen=3). Known kernel problem: bulk downloads over such MPTCP connections can slow to a crawl (seen on Linux 6.12 and 6.18)")
	fs.IntVar(&c.Preconnect, "preconnect", c.Preconnect, "idle connections kept open to the server, handshake done, so a new connection's hello leaves at once (0 disables; kept only within a minute of the last client connection; not with fast-open)")
	fs.Var(&c.PreconnectMaxAge, "preconnect-max-age", "an idle preconnected connection is used only this young; keep it below the server's first-byte-timeout")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "auth tls: client certificate (braid-proxy gencert)")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "auth tls: client private key, mode 0600")
	fs.StringVar(&c.TLSServerPin, "tls-server-pin", c.TLSServerPin, "auth tls: SHA-256 (hex) of the server certificate")
}

// BindServer registers the server flags on fs, writing into s.
func BindServer(s *Server, fs *flag.FlagSet) {
	BindCommon(&s.Common, fs)
	fs.StringVar(&s.Listen, "listen", s.Listen, "MPTCP listen address")
	fs.StringVar(&s.KeyFile, "key-file", s.KeyFile, "pre-shared keys file (\"client-id key\" lines), mode 0600 (required)")
	fs.StringVar(&s.StaticKeyFile, "static-key-file", s.StaticKeyFile, "the server's static key file, mode 0600 (braid-proxy genkey -static); clients then need its public key as -server-public-key")
	fs.BoolVar(&s.AllowPlaintext, "allow-plaintext", s.AllowPlaintext, "let authenticated clients relay without encryption")
	fs.Var((*listFlag)(&s.AllowCIDRs), "allow-cidr", "re-allow a refused range, e.g. 127.0.0.1/32 (repeatable)")
	fs.Var((*listFlag)(&s.AllowList), "allow", "restrict destinations to CIDRs / names / *.suffix (repeatable); does not re-allow refused ranges")
	fs.Var((*listFlag)(&s.RefuseCIDRs), "refuse-cidr", "refuse a range besides the built-in ones, even inside -allow-cidr; e.g. the relay's public address behind 1:1 NAT (repeatable)")
	fs.IntVar(&s.MaxConnsPerClient, "max-conns-per-client", s.MaxConnsPerClient, "maximum concurrent connections per client id")
	fs.Var(&s.MaxClockSkew, "max-clock-skew", "accepted clock difference in hellos")
	fs.IntVar(&s.MaxPreauthConns, "max-preauth-conns", s.MaxPreauthConns, "connections held before they authenticate, in total (0 = max-conns/4; the rest of max-conns stays for authenticated clients)")
	fs.IntVar(&s.MaxPreauthPerSource, "max-preauth-per-source", s.MaxPreauthPerSource, "connections held before they authenticate, per source IPv4 address or IPv6 /64")
	fs.Var(&s.FirstByteTimeout, "first-byte-timeout", "close a connection that sends nothing for this long (clients' spare connections must be used sooner); handshake-timeout then bounds the rest of the hello")
	fs.StringVar(&s.TLSCertFile, "tls-cert-file", s.TLSCertFile, "auth tls: server certificate (braid-proxy gencert)")
	fs.StringVar(&s.TLSKeyFile, "tls-key-file", s.TLSKeyFile, "auth tls: server private key, mode 0600")
	fs.StringVar(&s.TLSPeersFile, "tls-peers-file", s.TLSPeersFile, "auth tls: file of \"client-id pin\" lines")
}

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// ParseArgs builds a configuration from defaults, the file named by
// -config (if any) and the flags, flags winning over the file.
func ParseArgs[T any](fs *flag.FlagSet, args []string, defaults func() *T, bind func(*T, *flag.FlagSet)) (*T, string, error) {
	cfg := defaults()
	var path string
	fs.StringVar(&path, "config", "", "JSON configuration file (flags override it)")
	bind(cfg, fs)
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if path == "" {
		return cfg, "", nil
	}
	fromFile, err := LoadFile(path, defaults)
	if err != nil {
		return nil, "", err
	}
	// Re-apply only the flags given on the command line over the file;
	// flags the caller added that are not settings (-config, check's
	// -files) stay where they were parsed.
	fs2 := flag.NewFlagSet("", flag.ContinueOnError)
	bind(fromFile, fs2)
	var setErr error
	fs.Visit(func(f *flag.Flag) {
		if fs2.Lookup(f.Name) == nil {
			return
		}
		if err := fs2.Set(f.Name, f.Value.String()); err != nil && setErr == nil {
			setErr = fmt.Errorf("flag -%s: %w", f.Name, err)
		}
	})
	return fromFile, path, setErr
}

// LoadFile reads a config file over the defaults.
func LoadFile[T any](path string, defaults func() *T) (*T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg := defaults()
	if err := Decode(data, cfg); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// FieldError names the field that failed validation.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return "config: " + e.Field + ": " + e.Msg }

func ferr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func validateHostPort(field, v string, required bool) error {
	if v == "" {
		if required {
			return ferr(field, "required (host:port)")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return ferr(field, "%v", err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return ferr(field, "bad port %q", port)
	}
	if p, _ := strconv.Atoi(port); p < 0 || p > 65535 {
		return ferr(field, "port out of range")
	}
	_ = host
	return nil
}

// isLoopback reports whether a host:port listen address is on loopback
// only ("" and wildcard hosts are not).
func isLoopback(hostPort string) bool {
	host, _, _ := net.SplitHostPort(hostPort)
	ip, err := netip.ParseAddr(host)
	return host == "localhost" || (err == nil && ip.IsLoopback())
}

func (c *Common) validate(prefix string) error {
	if err := validateHostPort(prefix+"metrics_listen", c.MetricsListen, false); err != nil {
		return err
	}
	if c.MetricsListen != "" && !c.AllowPublicStats {
		if !isLoopback(c.MetricsListen) {
			return ferr(prefix+"metrics_listen", "%q is not a loopback address (set allow_public_metrics to override)", c.MetricsListen)
		}
	}
	if c.Auth != "psk" && c.Auth != "tls" {
		return ferr(prefix+"auth", "%q is not psk or tls", c.Auth)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return ferr(prefix+"log_level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return ferr(prefix+"log_format", "%q is not text or json", c.LogFormat)
	}
	for name, d := range map[string]Duration{"handshake_timeout": c.HandshakeTimeout, "dial_timeout": c.DialTimeout} {
		if d <= 0 {
			return ferr(prefix+name, "must be positive")
		}
	}
	if c.IdleTimeout < 0 {
		return ferr(prefix+"idle_timeout", "must not be negative")
	}
	if c.ShutdownGrace < 0 {
		return ferr(prefix+"shutdown_grace", "must not be negative")
	}
	if c.MaxConns < 1 {
		return ferr(prefix+"max_conns", "must be at least 1")
	}
	if c.MaxProcs < 0 {
		return ferr(prefix+"max_procs", "must not be negative (0 = one per CPU)")
	}
	if !(c.PaddingBudget >= 0 && c.PaddingBudget <= MaxPaddingBudget) {
		return ferr(prefix+"padding_budget", "must be between 0 (off) and %d", MaxPaddingBudget)
	}
	if c.PaddingScope != PaddingScopeClient && c.PaddingScope != PaddingScopeConnection {
		return ferr(prefix+"padding_scope", "must be %q or %q", PaddingScopeClient, PaddingScopeConnection)
	}
	if c.PaddingIdle <= 0 {
		return ferr(prefix+"padding_idle", "must be positive")
	}
	if c.PaddingBudget > 0 && c.Auth == "tls" {
		return ferr(prefix+"padding_budget", "padding needs auth psk (braid's own framing); TLS mode does not pad")
	}
	return nil
}

// Validate checks a client configuration.
func (c *Client) Validate() error {
	if err := c.Common.validate("client."); err != nil {
		return err
	}
	if c.SOCKSListen == "" && c.TransparentListen == "" {
		return ferr("client.socks_listen", "both socks_listen and transparent_listen are empty: nothing to serve")
	}
	if err := validateHostPort("client.socks_listen", c.SOCKSListen, false); err != nil {
		return err
	}
	if c.SOCKSListen != "" && c.SOCKSUsersFile == "" && !c.AllowPublicSOCKS && !isLoopback(c.SOCKSListen) {
		return ferr("client.socks_listen", "%q is not a loopback address and no socks_users_file is set: anyone reaching it could use the relay (set socks_users_file, or allow_public_socks behind a firewall)", c.SOCKSListen)
	}
	if err := validateHostPort("client.transparent_listen", c.TransparentListen, false); err != nil {
		return err
	}
	if err := c.validateRelays(); err != nil {
		return err
	}
	if c.ServerPublicKey != "" {
		if c.Auth != "psk" {
			return ferr("client.server_public_key", "only with auth psk (auth tls pins the server's certificate: tls_server_pin)")
		}
		if _, err := auth.ParsePublicKey(c.ServerPublicKey); err != nil {
			return ferr("client.server_public_key", "%v", err)
		}
	}
	if c.Auth == "psk" && c.KeyFile == "" {
		return ferr("client.key_file", "required with auth psk")
	}
	if c.Auth == "tls" {
		if c.TLSCertFile == "" || c.TLSKeyFile == "" {
			return ferr("client.tls_cert_file", "tls_cert_file and tls_key_file are required with auth tls")
		}
		if len(c.TLSServerPin) != 64 {
			return ferr("client.tls_server_pin", "required with auth tls: 64 hex characters (SHA-256 of the server certificate)")
		}
		if !c.Encrypt {
			return ferr("client.encrypt", "TLS always encrypts; encrypt=false only exists with auth psk")
		}
	}
	if c.PaddingBudget > 0 && !c.Encrypt {
		return ferr("client.padding_budget", "padding needs encrypt (a plaintext relay has no frames to pad with)")
	}
	if c.RaceDelay < 0 {
		return ferr("client.race_delay", "must not be negative")
	}
	if c.Preconnect < 0 || c.Preconnect > MaxPreconnect {
		return ferr("client.preconnect", "must be between 0 and %d", MaxPreconnect)
	}
	if c.PreconnectMaxAge <= 0 {
		return ferr("client.preconnect_max_age", "must be positive")
	}
	if c.SOCKSReply != SOCKSReplyAuto && c.SOCKSReply != SOCKSReplyEarly && c.SOCKSReply != SOCKSReplyConnected {
		return ferr("client.socks_reply", "must be %q, %q or %q, not %q", SOCKSReplyAuto, SOCKSReplyEarly, SOCKSReplyConnected, c.SOCKSReply)
	}
	return nil
}

// PreauthLimit is max_preauth_conns with its default applied: a quarter
// of max_conns (at least one).
func (s *Server) PreauthLimit() int {
	if s.MaxPreauthConns > 0 {
		return s.MaxPreauthConns
	}
	return max(1, s.MaxConns/4)
}

// Validate checks a server configuration.
func (s *Server) Validate() error {
	if err := s.Common.validate("server."); err != nil {
		return err
	}
	if err := validateHostPort("server.listen", s.Listen, true); err != nil {
		return err
	}
	if s.Auth == "psk" && s.KeyFile == "" {
		return ferr("server.key_file", "required with auth psk")
	}
	if s.StaticKeyFile != "" && s.Auth != "psk" {
		return ferr("server.static_key_file", "only with auth psk (auth tls has the server certificate)")
	}
	if s.Auth == "tls" {
		if s.TLSCertFile == "" || s.TLSKeyFile == "" {
			return ferr("server.tls_cert_file", "tls_cert_file and tls_key_file are required with auth tls")
		}
		if s.TLSPeersFile == "" {
			return ferr("server.tls_peers_file", "required with auth tls")
		}
	}
	if s.MaxConnsPerClient < 1 {
		return ferr("server.max_conns_per_client", "must be at least 1")
	}
	if s.MaxPreauthConns < 0 || (s.MaxPreauthConns > 0 && s.MaxPreauthConns >= s.MaxConns) {
		return ferr("server.max_preauth_conns", "must be between 1 and max_conns-1 (%d), or 0 for max_conns/4: the rest of max_conns is kept for authenticated connections", s.MaxConns-1)
	}
	if s.MaxPreauthPerSource < 1 {
		return ferr("server.max_preauth_per_source", "must be at least 1")
	}
	if s.FirstByteTimeout <= 0 {
		return ferr("server.first_byte_timeout", "must be positive")
	}
	if s.MaxClockSkew <= 0 {
		return ferr("server.max_clock_skew", "must be positive")
	}
	if s.ResolveTimeout <= 0 {
		return ferr("server.resolve_timeout", "must be positive")
	}
	return nil
}

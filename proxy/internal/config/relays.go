package config

import (
	"fmt"
	"strings"
	"time"

	"braid/proxy/internal/auth"
)

// server_policy values: how a client with several relays (servers)
// chooses one for each new connection.
const (
	// PolicyFailover uses the first healthy relay in the list's order.
	PolicyFailover = "failover"
	// PolicySpread spreads new connections over the healthy relays in
	// proportion to their weights.
	PolicySpread = "spread"
	// PolicySticky keeps each destination host on one healthy relay
	// (weighted rendezvous hashing): a relay's failure moves only its own
	// destinations.
	PolicySticky = "sticky"
)

// Health checks of a client's relays.
const (
	DefaultHealthInterval   = 2 * time.Second
	DefaultHealthTimeout    = 5 * time.Second
	DefaultHealthCloseAfter = 3
	// MaxRelayWeight bounds a relay's weight (the spread policy deals one
	// ticket per unit of weight per round).
	MaxRelayWeight = 100
)

// Relay is one entry of a client's servers list.
type Relay struct {
	Address string `json:"address"` // host:port of a braid-proxy server
	// Weight is the relay's share under spread and sticky (0 = 1).
	Weight int `json:"weight"`
	// ServerPublicKey is this relay's static public key; "" = the
	// client's server_public_key.
	ServerPublicKey string `json:"server_public_key"`
}

// Relays returns the relays the client uses, in order, with defaults
// applied: the servers list, or the single server as a list of one.
func (c *Client) Relays() []Relay {
	if len(c.Servers) == 0 {
		return []Relay{{Address: c.Server, Weight: 1, ServerPublicKey: c.ServerPublicKey}}
	}
	out := make([]Relay, len(c.Servers))
	for i, r := range c.Servers {
		if r.Weight == 0 {
			r.Weight = 1
		}
		if r.ServerPublicKey == "" {
			r.ServerPublicKey = c.ServerPublicKey
		}
		out[i] = r
	}
	return out
}

// validateRelays checks server / servers and the relay settings.
func (c *Client) validateRelays() error {
	if c.Server != "" && len(c.Servers) > 0 {
		return ferr("client.servers", "set either server (one relay) or servers (a list), not both")
	}
	if len(c.Servers) == 0 {
		if err := validateHostPort("client.server", c.Server, true); err != nil {
			if c.Server == "" {
				return ferr("client.server", "required (host:port), or a servers list")
			}
			return err
		}
	}
	seen := map[string]int{}
	for i, r := range c.Servers {
		field := fmt.Sprintf("client.servers[%d]", i)
		if err := validateHostPort(field+".address", r.Address, true); err != nil {
			return err
		}
		key := strings.ToLower(r.Address)
		if j, dup := seen[key]; dup {
			return ferr(field+".address", "%q is already servers[%d]", r.Address, j)
		}
		seen[key] = i
		if r.Weight < 0 || r.Weight > MaxRelayWeight {
			return ferr(field+".weight", "must be between 1 and %d (0 or absent = 1), not %d", MaxRelayWeight, r.Weight)
		}
		if r.ServerPublicKey != "" {
			if c.Auth != "psk" {
				return ferr(field+".server_public_key", "only with auth psk (auth tls pins the server's certificate: tls_server_pin)")
			}
			if _, err := auth.ParsePublicKey(r.ServerPublicKey); err != nil {
				return ferr(field+".server_public_key", "%v", err)
			}
		}
	}
	switch c.ServerPolicy {
	case PolicyFailover, PolicySpread, PolicySticky:
	default:
		return ferr("client.server_policy", "%q is not one of %s, %s, %s", c.ServerPolicy, PolicyFailover, PolicySpread, PolicySticky)
	}
	if c.HealthInterval < 0 {
		return ferr("client.health_interval", "must not be negative (0 = no health checks)")
	}
	if c.HealthTimeout <= 0 {
		return ferr("client.health_timeout", "must be positive")
	}
	if c.HealthCloseAfter < 0 {
		return ferr("client.health_close_after", "must not be negative (0 = never close connections in flight)")
	}
	return nil
}

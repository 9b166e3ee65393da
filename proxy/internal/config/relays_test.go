package config

import (
	"errors"
	"strings"
	"testing"
)

// Every way a relay list can be wrong is refused with an error that names
// the field; the single server keeps working as a list of one.
func TestRelayValidation(t *testing.T) {
	ok := []Relay{{Address: "a.example:7443"}, {Address: "b.example:7443", Weight: 3}}
	for _, tc := range []struct {
		name  string
		mut   func(*Client)
		field string // "" = valid
		msg   string
	}{
		{"single server", func(c *Client) {}, "", ""},
		{"list", func(c *Client) { c.Server, c.Servers = "", ok }, "", ""},
		{"list spread", func(c *Client) { c.Server, c.Servers, c.ServerPolicy = "", ok, PolicySpread }, "", ""},
		{"list sticky", func(c *Client) { c.Server, c.Servers, c.ServerPolicy = "", ok, PolicySticky }, "", ""},
		{"neither", func(c *Client) { c.Server = "" }, "client.server", "required"},
		{"both", func(c *Client) { c.Servers = ok }, "client.servers", "not both"},
		{"empty address", func(c *Client) { c.Server, c.Servers = "", []Relay{{Address: "a:1"}, {}} }, "client.servers[1].address", "required"},
		{"bad address", func(c *Client) { c.Server, c.Servers = "", []Relay{{Address: "nope"}} }, "client.servers[0].address", "port"},
		{"duplicate", func(c *Client) {
			c.Server, c.Servers = "", []Relay{{Address: "a:1"}, {Address: "b:1"}, {Address: "A:1"}}
		}, "client.servers[2].address", "already servers[0]"},
		{"negative weight", func(c *Client) { c.Server, c.Servers = "", []Relay{{Address: "a:1", Weight: -1}} }, "client.servers[0].weight", "between 1 and"},
		{"huge weight", func(c *Client) { c.Server, c.Servers = "", []Relay{{Address: "a:1", Weight: MaxRelayWeight + 1}} }, "client.servers[0].weight", "between 1 and"},
		{"bad key", func(c *Client) { c.Server, c.Servers = "", []Relay{{Address: "a:1", ServerPublicKey: "xx"}} }, "client.servers[0].server_public_key", ""},
		{"key with tls", func(c *Client) {
			c.Auth, c.KeyFile, c.TLSCertFile, c.TLSKeyFile, c.TLSServerPin = "tls", "", "/c", "/k", strings.Repeat("a", 64)
			c.Server, c.Servers = "", []Relay{{Address: "a:1", ServerPublicKey: "xx"}}
		}, "client.servers[0].server_public_key", "only with auth psk"},
		{"unknown policy", func(c *Client) { c.ServerPolicy = "random" }, "client.server_policy", `"random" is not one of`},
		{"empty policy", func(c *Client) { c.ServerPolicy = "" }, "client.server_policy", ""},
		{"negative interval", func(c *Client) { c.HealthInterval = -1 }, "client.health_interval", ""},
		{"zero timeout", func(c *Client) { c.HealthTimeout = 0 }, "client.health_timeout", ""},
		{"negative close after", func(c *Client) { c.HealthCloseAfter = -1 }, "client.health_close_after", ""},
	} {
		c := DefaultClient()
		c.Server, c.KeyFile = "relay:7443", "/k"
		tc.mut(c)
		err := c.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("%s: want error on %s (%q), got %v", tc.name, tc.field, tc.msg, err)
		}
	}
}

// Relays applies the defaults: weight 1, the shared server_public_key.
func TestRelaysDefaults(t *testing.T) {
	c := DefaultClient()
	c.Server, c.ServerPublicKey = "one:1", "shared"
	if got := c.Relays(); len(got) != 1 || got[0] != (Relay{Address: "one:1", Weight: 1, ServerPublicKey: "shared"}) {
		t.Fatalf("single server: %+v", got)
	}
	c.Server = ""
	c.Servers = []Relay{{Address: "a:1"}, {Address: "b:1", Weight: 5, ServerPublicKey: "own"}}
	got := c.Relays()
	if got[0] != (Relay{Address: "a:1", Weight: 1, ServerPublicKey: "shared"}) || got[1] != (Relay{Address: "b:1", Weight: 5, ServerPublicKey: "own"}) {
		t.Fatalf("list: %+v", got)
	}
	if c.Servers[0].Weight != 0 {
		t.Fatal("Relays changed the configuration")
	}
}

// A servers list in the file, with the policy given as a flag.
func TestRelaysFromFile(t *testing.T) {
	c := DefaultClient()
	err := Decode([]byte(`{"servers":[{"address":"a:1","weight":2},{"address":"b:1"}],"server_policy":"sticky","key_file":"/k","health_interval":"500ms"}`), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Servers) != 2 || c.Servers[0].Weight != 2 || c.ServerPolicy != PolicySticky || c.HealthInterval.String() != "500ms" {
		t.Fatalf("%+v", c)
	}
}

package client

import (
	"sync/atomic"

	"braid/proxy/internal/metrics"
)

// exportRelays puts each relay's health and use on the status endpoint,
// labelled by its address: an operator sees which relays are up and where
// the connections and failures are.
func (c *Client) exportRelays(m *metrics.Registry) {
	each := func(f func(*relayHost) float64) func() map[string]float64 {
		return func() map[string]float64 {
			rs := c.rt.Load().relays.list
			out := make(map[string]float64, len(rs))
			for _, r := range rs {
				out[r.addr] = f(r)
			}
			return out
		}
	}
	count := func(f func(*relayHealth) *atomic.Int64) func() map[string]float64 {
		return each(func(r *relayHost) float64 { return float64(f(r.h).Load()) })
	}
	m.AddGaugeFamily("relay_up", metrics.GaugeFamily{Label: "relay",
		Help: "1 if the relay takes new connections, 0 if its last dial, handshake or health check failed.",
		Values: each(func(r *relayHost) float64 {
			if r.h.up.Load() {
				return 1
			}
			return 0
		})})
	m.AddGaugeFamily("relay_conns_active", metrics.GaugeFamily{Label: "relay",
		Help:   "Connections relayed through the relay now.",
		Values: each(func(r *relayHost) float64 { return float64(r.h.active()) })})
	m.AddCounterFamily("relay_conns", metrics.GaugeFamily{Label: "relay",
		Help:   "Connections opened to the relay (spares and health checks not counted).",
		Values: count(func(h *relayHealth) *atomic.Int64 { return &h.conns })})
	m.AddCounterFamily("relay_failures", metrics.GaugeFamily{Label: "relay",
		Help:   "Connections whose dial or handshake to the relay failed.",
		Values: count(func(h *relayHealth) *atomic.Int64 { return &h.failures })})
	m.AddCounterFamily("relay_health_check_failures", metrics.GaugeFamily{Label: "relay",
		Help:   "Health checks of the relay that failed.",
		Values: count(func(h *relayHealth) *atomic.Int64 { return &h.probeFailures })})
	m.AddCounterFamily("relay_conns_cut", metrics.GaugeFamily{Label: "relay",
		Help:   "Connections in flight closed because the relay failed its health checks.",
		Values: count(func(h *relayHealth) *atomic.Int64 { return &h.cut })})
}

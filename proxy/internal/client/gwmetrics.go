package client

import (
	"braid/proxy/internal/gwstatus"
	"braid/proxy/internal/metrics"
)

// exportGateways puts the path manager's view of each gateway (gwsteer's
// status file, as the client reads it to pick first subflows) on the
// status endpoint: an operator scraping the client box sees which
// gateways are up and their probe RTTs without reading the file.
func (c *Client) exportGateways(m *metrics.Registry) {
	each := func(f func(gwstatus.Gateway) float64) func() map[string]float64 {
		return func() map[string]float64 {
			gws, _ := c.rt.Load().gateways.All()
			out := make(map[string]float64, len(gws))
			for _, g := range gws {
				out[g.ID] = f(g)
			}
			return out
		}
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	m.Gauge("gateway_status_loaded", func() int64 {
		_, ok := c.rt.Load().gateways.All()
		return int64(flag(ok))
	})
	m.AddGaugeFamily("gateway_up", metrics.GaugeFamily{Label: "gateway",
		Help:   "1 if the path manager has the gateway up, 0 if down (gwsteer's status file).",
		Values: each(func(g gwstatus.Gateway) float64 { return flag(g.Up) })})
	m.AddGaugeFamily("gateway_backup", metrics.GaugeFamily{Label: "gateway",
		Help:   "1 if the gateway is a backup (used only when no other is up).",
		Values: each(func(g gwstatus.Gateway) float64 { return flag(g.Backup) })})
	m.AddGaugeFamily("gateway_probe_rtt_seconds", metrics.GaugeFamily{Label: "gateway",
		Help:   "The gateway's last probe round-trip time.",
		Values: each(func(g gwstatus.Gateway) float64 { return g.RttMs / 1000 })})
	m.AddGaugeFamily("gateway_probe_rtt_ewma_seconds", metrics.GaugeFamily{Label: "gateway",
		Help:   "The gateway's smoothed probe round-trip time, by which first subflows are placed.",
		Values: each(func(g gwstatus.Gateway) float64 { return g.EwmaMs / 1000 })})
}

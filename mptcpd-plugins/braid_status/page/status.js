// braid's status page: polls api/status and draws it (uPlot for the graph).
"use strict";
(() => {
  const COLORS = ["#2c7be5", "#e07b24", "#2e9d4f", "#9b51e0", "#d93a3a", "#00a3a3"];
  const state = { chart: null, chartKey: "", last: null, errors: 0 };
  window.braidStatus = state;

  const el = (tag, attrs = {}, text = "") => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text) e.textContent = text;
    return e;
  };
  const rate = (bps) => {
    if (bps === null || bps === undefined) return "-";
    const units = ["B/s", "kB/s", "MB/s", "GB/s"];
    let i = 0;
    while (bps >= 1000 && i < units.length - 1) { bps /= 1000; i++; }
    return `${bps.toFixed(i ? 1 : 0)} ${units[i]}`;
  };
  const ms = (v) => (v === null || v === undefined ? "-" : `${v.toFixed(1)} ms`);
  const when = (t) => new Date(t * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");

  function renderGateways(data) {
    const box = document.getElementById("gateways");
    box.replaceChildren(...data.gateways.map((g) => {
      const card = el("div", { class: "gw", "data-gateway": g.id, "data-state": g.up ? "up" : "down",
                              "data-rate-bps": String((g.sent_bps || 0) + (g.received_bps || 0)) });
      card.append(el("span", { class: "state" }, g.up ? "UP" : "DOWN"), el("div", { class: "name" }, g.id));
      const dl = el("dl");
      const rows = [["source", g.source], ["role", g.backup ? "backup" : (g.best ? "best" : "active")],
                    ["probe RTT", ms(g.rtt_ms)], ["RTT EWMA", ms(g.ewma_ms)], ["subflows", String(g.subflows)],
                    ["sent", rate(g.sent_bps)], ["received", rate(g.received_bps)],
                    ["last change", g.last_change || "-"]];
      for (const [k, v] of rows) dl.append(el("dt", {}, k), el("dd", {}, v));
      card.append(dl);
      return card;
    }));
    const err = document.getElementById("status-error");
    err.hidden = !data.status_error;
    err.textContent = data.status_error || "";
  }

  function renderRelay(data) {
    const relay = document.getElementById("relay");
    const p = data.proxy;
    if (!p) return;
    relay.dataset.state = p.reachable ? "up" : "down";
    relay.textContent = p.reachable
      ? `braid-proxy ${p.role || "?"} ${p.version || ""}: reachable, ${p.conns_active ?? "-"} connections open, ` +
        `${p.conns_total ?? "-"} accepted (${p.url})`
      : `UNREACHABLE: ${p.url} (${p.error})`;
  }

  function renderEvents(data) {
    const list = document.getElementById("events");
    list.replaceChildren(...data.events.map((e) => el("li", { class: e.up ? "up" : "down", "data-gateway": e.gateway },
      `${when(e.time)} ${e.gateway} ${e.up ? "up" : "down"}${e.kind === "last" ? " (last change before the page started)" : ""}`)));
    if (!data.events.length) list.replaceChildren(el("li", {}, "none seen"));
  }

  const bytes = (n) => {
    const units = ["B", "kB", "MB", "GB"];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
    return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
  };

  // One row per page load (open ones first, marked), one cell per WAN with its bytes and share.
  function renderPages(data) {
    const p = data.pages;
    const body = document.querySelector("#pages tbody");
    if (!p) { body.replaceChildren(); return; }
    document.getElementById("pages-rule").textContent =
      `(a page: bytes to one ${p.scope_name} until ${p.idle_ms} ms without any, sampled every ${p.interval_s} s` +
      `${p.scheduler === "hywf" ? "" : `; scheduler ${p.scheduler || "-"}, not hywf: no per-page split is drawn`})`;
    const rows = p.pages.map((g) => {
      const tr = el("tr", { class: g.open ? "open" : "closed", "data-peer": g.peer, "data-bytes": String(g.bytes) });
      const wans = el("td", { class: "wans" });
      for (const [wan, w] of Object.entries(g.wans)) {
        const share = w.share === null ? "-" : `${Math.round(w.share * 100)}%`;
        const cell = el("span", { class: "wan", "data-wan": wan, "data-bytes": String(w.bytes),
                                  "data-share": w.share === null ? "" : String(w.share) }, `${wan} ${bytes(w.bytes)} ${share}`);
        const bar = el("span", { class: "bar" });
        bar.style.width = `${Math.round((w.share || 0) * 60)}px`;
        cell.prepend(bar);
        wans.append(cell);
      }
      tr.append(el("td", {}, when(g.start)), el("td", {}, g.peer),
                el("td", {}, `${g.duration_s.toFixed(1)}${g.open ? " (loading)" : ""}`), el("td", {}, bytes(g.bytes)), wans);
      return tr;
    });
    if (!rows.length) rows.push(el("tr", {}));
    body.replaceChildren(...rows);
    if (!p.pages.length) body.firstChild.append(el("td", { colspan: "5" }, "none seen yet"));
  }

  function renderChart(data) {
    const ids = Object.keys(data.history.gateways).sort();
    const key = ids.join("\u0000");
    const series = [{}];
    const columns = [data.history.t];
    ids.forEach((id, i) => {
      const color = COLORS[i % COLORS.length];
      series.push({ label: `${id} sent`, stroke: color, width: 2, value: (u, v) => rate(v) });
      series.push({ label: `${id} received`, stroke: color, width: 1, dash: [6, 4], value: (u, v) => rate(v) });
      columns.push(data.history.gateways[id].sent_bps, data.history.gateways[id].received_bps);
    });
    if (!state.chart || state.chartKey !== key) {
      if (state.chart) state.chart.destroy();
      const box = document.getElementById("throughput");
      state.chart = new uPlot({
        width: Math.max(box.clientWidth - 16, 300), height: 280, series,
        axes: [{}, { label: "bytes/s", size: 90, values: (u, vals) => vals.map(rate) }],
        scales: { y: { range: (u, min, max) => [0, Math.max(max, 1000)] } },
      }, columns, box);
      state.chartKey = key;
    } else {
      state.chart.setData(columns);
    }
  }

  async function poll() {
    try {
      const resp = await fetch("api/status", { cache: "no-store" });
      if (!resp.ok) throw new Error(`api/status: HTTP ${resp.status}`);
      const data = await resp.json();
      state.last = data;
      const up = data.gateways.filter((g) => g.up).length;
      document.getElementById("summary").textContent =
        `${up} of ${data.gateways.length} gateways up · scheduler ${data.kernel.scheduler || "-"} · ` +
        `${data.connections} MPTCP connections · ${when(data.updated)}`;
      renderGateways(data);
      renderRelay(data);
      renderEvents(data);
      renderPages(data);
      renderChart(data);
    } catch (e) {
      state.errors++;
      document.getElementById("summary").textContent = `cannot read api/status: ${e.message}`;
    }
    setTimeout(poll, Math.max(500, ((state.last && state.last.interval_s) || 1) * 1000));
  }
  poll();
})();

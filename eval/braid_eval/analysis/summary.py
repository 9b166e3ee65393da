"""E5, one page: every experiment's headline figure beside its published
counterpart, whether the evaluation's targets were met, and the
benchmarks' side-by-side tables.

Reads whatever of OUT/e1/e1.json, OUT/e1b/e1b.json, OUT/e2/e2.json,
OUT/e2-variable/e2.json (E2 on the variable slow link alone),
OUT/e3/e3.json, OUT/e3-braid-delaybal/e3.json, OUT/e3-braid-bernoulli/e3.json,
OUT/e3-braid-hywf/e3.json and OUT/e3-braid-default/e3.json (E3 in braid's kernel), OUT/bench-sched.json,
OUT/bench-pageload.json, OUT/bench-pageload-defences.json and
OUT/bench-pageload-repeat.json (the page-load benchmark under the defences,
and a second run of some of them), OUT/simult-flows.json (braid_eval.analysis.selftest_record), OUT/wf-deep-12ep.json,
OUT/wf-deep-30ep.json, OUT/wf-kfp.json, OUT/wf-captured-kfp.json,
OUT/wf-captured-deep.json, OUT/wf-captured-rf.json, OUT/wf-captured-df-curve.json,
OUT/wf-captured-df-200.json, OUT/wf-captured-web-kfp.json,
OUT/wf-captured-web-deep.json, OUT/wf-captured-web-tiktok-rf.json,
OUT/wf-captured-web-df-hywf.json, OUT/wf-captured-web-df-hywf-ap.json,
OUT/wf-captured-web-kfp-ncons.json and OUT/wf-captured-web-df-hywf-ncons100.json
(``braid-wf defenses --json``, the last twelve on a captured corpus, the
last seven of web-shaped sites),
OUT/wf-captured-confusion.json, OUT/wf-captured-confusion-df.json and
OUT/wf-captured-web-confusion.json (``braid-wf confusion --json``: which
sites k-FP and DF confuse), OUT/wf-wire-check.json, OUT/wf-wire-check-long.json
and OUT/wf-tor.json (``braid-wf wirecheck --json``: the simulators against the
wire, the same with hywf's 100-packet bursts, Tor mode), OUT/wf-loaders.json
(``braid-wf loadercheck --json``: the synthetic loader against a browser) and OUT/relay-capacity.json
(proxy/bench/capacity.py) exists
(each also accepted as OUT/<name>.json or OUT/<name>/<name>.json), names
the missing ones, and writes the page (OUT/summary.md unless --page).
Before the fingerprinting sections, an overview judges each defence
against the privacy goal from all of them and the page-load benchmark
(braid_eval.analysis.privacy_goal). No
measurement of its own, no root needed:

    python3 -m braid_eval.analysis.summary --out out
    python3 -m braid_eval.analysis.summary --out results --page RESULTS.md   # make results
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from braid_eval.analysis.privacy_goal import (
    WF_OVERHEAD_PCT,
    WF_TARGET_PCT,
    WF_TIME_PCT,
    defence_label,
    goal_section,
    page_time_goal,
)
from braid_eval.analysis.provenance import installed_version
from braid_eval.bench.comparison import markdown_table, paired_ratio
from braid_eval.bench.pageload import ROWS as PAGELOAD_ROWS
from braid_eval.bench.sched import ROWS as SCHED_ROWS
from braid_eval.experiments import failover, latency
from braid_wf import confusion, loadercheck, wirecheck
from braid_wf.attacks import ATTACK_NAMES, DEEP_ATTACKS
from braid_wf.compare import share_band_names
from braid_wf.deep.train import RECIPES
from braid_wf.defences.catalog import ADAPTIVE, base_name, parse_spec
from braid_wf.defences.hywf_sim import NCONS

E1_TARGET = 1.8  # x single-gateway TCP at <= 0.1 % loss
E3_TARGET_S = 1.0  # gwsteer's median time to 90 % of the surviving capacity
WF_WORKS = 0.9  # undefended accuracy that shows an attack works as published
BRAID_SCHEDULERS = ("default", "hywf", "bernoulli", "delaybal", "redundant")


def find(out: Path, name: str) -> Path | None:
    """OUT/<name>/<name>.json or OUT/<name>.json, whichever exists; E3 in
    braid's kernel is OUT/e3-braid-<scheduler>/e3.json and E2's variable
    slow link OUT/e2-variable/e2.json (the experiments always name their
    files e2.json and e3.json)."""
    stem = name.split("-")[0] if name.startswith(("e2-", "e3-")) else name
    for path in (out / name / f"{stem}.json", out / name / f"{name}.json", out / f"{name}.json"):
        if path.is_file():
            return path
    return None


def _env(params: dict[str, Any]) -> str:
    mode = params.get("mode")
    if mode is None and "quick" in params:  # the page-load benchmark's flag
        mode = "quick" if params["quick"] else "full"
    bits = ([f"{mode} mode"] if mode else []) + [f"kernel {params.get('kernel', '?')}"]
    if "braid" in params:
        bits.append(f"braid {params['braid']}")
    return ", ".join(bits)


def e1_section(data: dict[str, Any]) -> list[str]:
    """Best braid scheduler per low-loss scenario against the 1.8x target."""
    params, points = data["params"], data["points"]
    loss = {name: float(pct) for name, pct, _delay in params["scenarios"]}
    rows, met = [], True
    for scenario, flows in dict.fromkeys((p["scenario"], p["flows"]) for p in points):
        if loss.get(scenario, 100.0) > 0.1:
            continue
        braid = [p for p in points if p["scenario"] == scenario and p["flows"] == flows
                 and p["config"] != "tcp-gw1"]
        if not braid:
            continue
        best = max(braid, key=lambda p: p["vs_tcp"])
        ok = best["vs_tcp"] >= E1_TARGET
        met = met and ok
        rows.append(f"| {scenario}, {flows} flow(s) | {best['goodput_mbit']:.1f} Mbit/s = "
                    f"{best['vs_tcp']:.2f}x TCP ({best['config']}) | {'met' if ok else 'not met'} |")
    if not rows:
        return ["No E1 point at <= 0.1 % loss in e1.json.", ""]
    ten = [p["goodput_mbit"] for p in points if p["flows"] == 10 and p["config"] == "default"]
    return ["## E1: Binder aggregation", "", f"({_env(params)})", "",
            f"| scenario | best braid scheduler | >= {E1_TARGET}x TCP |", "|---|---|---|", *rows, "",
            f"Target (braid >= {E1_TARGET}x single-gateway TCP at <= 0.1 % loss, every such point): "
            f"**{'met' if met else 'not met'}**."
            + (f" `default` with 10 flows: {min(ten):.1f}-{max(ten):.1f} Mbit/s." if ten else ""), "",
            "Published (Binder, kept apart): perfect aggregation at low loss; 10 flows above "
            "16 Mbit/s in total at 80-120 ms RTT; per-flow CoV 5-20 % (17-25 % unequal RTTs).", ""]


def e1b_section(data: dict[str, Any]) -> list[str]:
    """Binder's time-varying table: each configuration against TCP through
    gw1 over the run, at 1e-2 loss and after gw1's death."""
    params, runs = data["params"], {r["config"]: r for r in data["runs"]}
    steps = [float(loss) for _t, _rtt, loss in params["table_2"]]
    lossy, dead = steps.index(1e-2), steps.index(1.0)
    tcp = runs.get("tcp-gw1")

    def mean(r: dict[str, Any]) -> float:
        return statistics.fmean(r["per_second"])

    rows = [f"| {name} | {mean(r):.1f}" + (f" ({mean(r) / mean(tcp):.2f}x TCP)" if tcp and name != "tcp-gw1"
                                           else "")
            + f" | {r['per_step'][lossy]:.1f} | {r['per_step'][dead]:.1f} |" for name, r in runs.items()]
    return ["## E1b: Binder's time-varying scenario (Table 2)", "", f"({_env(params)})", "",
            "| configuration | whole run, Mbit/s | at 1e-2 loss | after gw1's death |", "|---|---|---|---|",
            *rows, "",
            "The evaluation sets no numeric target for E1b.", "",
            "Published (Binder, kept apart; a figure, no numbers in the text): single-path TCP "
            "collapses at 1e-2 loss; Binder stays above it; nothing reported after the total loss.", ""]


def e2_section(data: dict[str, Any]) -> list[str]:
    """Adaptive bernoulli's median delay per load beside the model's
    optimum, the measured references and p_lim, for each slow link run,
    with the target's verdict."""
    params = data["params"]
    points = [latency.Point(**p) for p in data["points"]]
    table = latency.summarise(points)
    shown = [c for c in ("bernoulli", "bernoulli-unbounded", *latency.REFERENCES, "bernoulli-plim")
             if any(key[1] == c for key in table)]
    scenarios = list(dict.fromkeys(p.scenario for p in points))
    rows = []
    for scenario in scenarios:
        for load in sorted({p.load for p in points if p.scenario == scenario}):
            if (scenario, "bernoulli", load) not in table:
                continue
            cells = []
            for config in shown:
                got = table.get((scenario, config, load))
                cells.append("-" if got is None else got.text(1))
            lead = f"| {scenario} " if len(scenarios) > 1 else ""
            rows.append(f"{lead}| {load:.2f} | " + " | ".join(cells)
                        + f" | {latency.model_ms(load, scenario)[0]:.1f} |")
    if not rows:
        return ["No adaptive `bernoulli` point in e2.json.", ""]
    runs = params.get("runs", 1)
    title = "" if scenarios == ["steady"] else f", {' and '.join(scenarios)} slow link"
    head = ("| slow link " if len(scenarios) > 1 else "") + "| load | " + " | ".join(shown) + " | model p* |"
    return [f"## E2: message delay against load (thesis ch. 5){title}", "",
            f"({_env(params)}; {' and '.join(scenarios)} slow link; mean message delay in ms, "
            + (f"median of {runs} runs (range)" if runs > 1 else "one run") + ")", "",
            head, "|---" * (len(shown) + 2 + (len(scenarios) > 1)) + "|", *rows, "",
            *(latency.verdict_lines(points) or ["No reference measured beside `bernoulli`: no verdict.", ""]),
            "Published (thesis ch. 5, kept apart): model at 29 of 35 Mbit/s, variable slow link: "
            "3.9 ms with p* against 51 ms with p_lim; its WiFi testbed: 6 ms against 25 ms at "
            "64 Mbit/s.", ""]


def _median(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    miss = len(values) - len(got)
    if not got:
        return "-"
    return f"{statistics.median(got):.2f} s" + (f" ({miss} of {len(values)} -)" if miss else "")


def _within(t90: float | None) -> str:
    return "-" if t90 is None else "yes" if t90 <= E3_TARGET_S else "no"


def e3_section(data: dict[str, Any]) -> list[str]:
    """Median t90, re-use and copies per outage, gwsteer beside the in-kernel
    PM, on the host kernel or in braid's with the client's scheduler named."""
    params, runs = data["params"], data["runs"]
    rows = []
    for outage in sorted({r["outage_s"] for r in runs}):
        cells = []
        for key in ("t90_s", "first_gw1_s", "dup_bytes"):
            for mode in ("gwsteer", "kernel"):
                got = [r.get(key) for r in runs if r["mode"] == mode and r["outage_s"] == outage]
                if key != "dup_bytes":
                    cells.append(_median(got))
                    continue
                known = [v for v in got if v is not None and v >= 0]  # -1: not measured
                cells.append(f"{statistics.median(known) / 1e3:.0f} kB" if known else "-")
        rows.append(f"| {outage:g} s | " + " | ".join(cells) + " |")
    head = data.get("headline", {})
    med = head.get("median_t90_s", {})
    g, k = med.get("gwsteer"), med.get("kernel")
    met = g is not None and g <= E3_TARGET_S and (k is None or g < k)
    sched = params.get("client_sysctls", {}).get("net.mptcp.scheduler", "default")
    braid = "braid" in str(params.get("kernel", ""))
    if braid:
        title, where = f", braid's kernel, client scheduler `{sched}`", f"braid's kernel in its VM (TCG), `{sched}`"
    else:
        title, where = "", "host kernel"
    return [f"## E3: failover, gwsteer vs the in-kernel path manager{title}", "",
            f"({_env(params)}; {where}; {params.get('runs', '?')} run(s) per cell; t90: "
            "median over the runs that reached 90 % within the outage, how many did not in "
            "brackets; copies: bytes through gw2 during the outage that the receiver already held)", "",
            "| outage | t90 gwsteer | t90 kernel PM | first gw1 packet gwsteer | kernel PM "
            "| copies gwsteer | kernel PM |",
            "|---|---|---|---|---|---|---|", *rows, "",
            f"Target (gwsteer's median t90 <= {E3_TARGET_S:g} s over outages >= 1 s and below the "
            f"in-kernel PM's): gwsteer {'-' if g is None else f'{g:.2f} s'}, in-kernel PM "
            f"{'-' if k is None else f'{k:.2f} s'} -> **{'met' if met else 'not met'}**. "
            f"Median t90 <= {E3_TARGET_S:g} s on its own: gwsteer {_within(g)}, in-kernel PM {_within(k)}.",
            *failover.copies_line({m: [(r.get("dup_bytes", -1), r.get("gw1_in_flight", -1))
                                       for r in runs if r["mode"] == m] for m in ("gwsteer", "kernel")}), "",
            *(["A braid scheduler re-sends only what the removed subflow carried; `default` and "
               "`redundant` keep upstream's re-injection of everything above the connection's "
               "acknowledgement. Times in the VM are emulated-CPU times: compare columns and "
               "schedulers within a run, not with the host's table.", ""] if braid else []),
            "Published (kept apart): neither Binder nor MultiNAT reports a failover time; Binder "
            "never re-creates a subflow after a gateway returns, MultiNAT's connections die with "
            "their link.", ""]


def bench_sched_section(data: dict[str, Any]) -> list[str]:
    """The scheduler benchmark: every braid scheduler beside the baseline."""
    params, results = data["params"], data["results"]
    schedulers = list(params["schedulers"])
    return ["## Scheduler benchmark (braid_eval.bench.sched)", "",
            f"({_env(params)}; {params['runs']} bulk transfers of {params['size']} per direction, "
            f"{params['requests']} request/response exchanges per latency figure; parts: "
            f"{', '.join(params['parts'])}; both ends run the scheduler)", "",
            *markdown_table(results, schedulers, SCHED_ROWS, 2), "",
            "A split drawn uniformly on [0, 1] allows on average ln 2 = 0.69 of two equal WANs' "
            "capacity: `hywf`'s goodput is bounded by its split, not by the scheduler. `redundant` "
            "sends every byte on both WANs: half the goodput by design.", ""]


def bench_pageload_section(data: dict[str, Any]) -> list[str]:
    """The page-load benchmark: pages through braid-proxy per scheduler."""
    params, results = data["params"], data["results"]
    names = list(params.get("conditions") or params["schedulers"])
    what = "the website-fingerprinting corpus's loads" if params["corpus"] else "pages of 8 objects"
    return ["## Page-load benchmark (braid_eval.bench.pageload)", "",
            f"({_env(params)}; {params['pages']} {what} per scheduler through braid-proxy, interleaved in "
            f"{params['rounds']} rounds)", "",
            *markdown_table(results, names, PAGELOAD_ROWS, 3), ""]


PAGELOAD_DEFENCES_HEADING = "## Page-load benchmark: the defences' overheads on the wire (braid_eval.bench.pageload)"


def bench_pageload_defences_section(data: dict[str, Any], heading: str = PAGELOAD_DEFENCES_HEADING) -> list[str]:
    """The page-load benchmark under the fingerprinting defences: their
    bandwidth and page-load-time overheads on the wire, beside the goal."""
    params, results = data["params"], data["results"]
    names = list(params["conditions"])
    base = names[0]
    lines = [heading, "",
             f"({_env(params)}; {params['pages']} loads of the website-fingerprinting corpus per condition "
             f"through braid-proxy, interleaved in {params['rounds']} rounds; padding budget "
             f"{params['padding_budget']}, hywf-ap's p-drift {params['n_chp']}; bytes on the wire: both WAN "
             "interfaces of the client, both directions, the pause after each block's last load included)", "",
             *markdown_table(results, names, PAGELOAD_ROWS, 3), ""]
    page_times = data.get("page_times_s")
    if page_times:
        lines += ["Page-load time overhead: the median over pages of each page's time under the defence divided "
                  f"by the same page's under `{base}`, with a distribution-free confidence interval for that "
                  "median; the goal is met when the whole interval is inside it, missed when the whole "
                  "interval is outside.", ""]
    for name in names[1:]:
        bandwidth = results[name]["wire_kb_per_page"] / results[base]["wire_kb_per_page"]
        bandwidth_ok = 100 * (bandwidth - 1) <= WF_OVERHEAD_PCT
        if page_times:
            r = paired_ratio(page_times[name], page_times[base])
            time_text = (f"page-load time overhead {100 * (r.median - 1):+.1f} % ({100 * r.level:.0f} % CI "
                         f"{100 * (r.low - 1):+.1f} to {100 * (r.high - 1):+.1f} %, {r.items} pages)")
            inside = page_time_goal(r)
            verdict = ("**not met**" if not bandwidth_ok or inside is False else
                       "met" if inside else f"not resolved by {r.items} pages")
        else:
            ratio = results[name]["median_s"] / results[base]["median_s"]
            time_text = f"page-load time overhead {100 * (ratio - 1):+.1f} % (median)"
            verdict = "met" if bandwidth_ok and 100 * (ratio - 1) <= WF_TIME_PCT else "**not met**"
        lines.append(f"- `{name}`: bandwidth overhead {100 * (bandwidth - 1):+.1f} %, {time_text} over `{base}`; "
                     f"goal <= +{WF_OVERHEAD_PCT:g} % / <= +{WF_TIME_PCT:g} %: {verdict}.")
    return [*lines, ""]


def bench_pageload_repeat_section(data: dict[str, Any]) -> list[str]:
    """A second run of the page-load benchmark on some of the defences'
    conditions: how far one run's figures move in the next, which each
    run's per-page interval does not cover."""
    conditions = ", ".join(f"`{c}`" for c in data["params"]["conditions"])
    return [*bench_pageload_defences_section(data, f"## Page-load benchmark: a second run, {conditions}"),
            "Beside the run above: each run's interval covers the variation among its own pages, not the "
            "variation from one run to the next, so a defence's page-load time is established only where "
            "runs agree.", ""]


def simult_flows_section(data: dict[str, Any]) -> list[str]:
    """Upstream's simult_flows.sh under each scheduler: time against limit."""
    params, results = data["params"], data["results"]
    schedulers = list(params["schedulers"])
    tests = {r["n"]: r["test"] for rows in results.values() for r in rows}
    by = {s: {r["n"]: r for r in results[s]} for s in schedulers}
    lines = ["## Upstream's simult_flows.sh (kernel/selftests)", "",
             f"({_env(params)}; one run per scheduler; transfer time in ms against the limit upstream "
             "computes from the links, **FAIL** above it)", "",
             "| test | limit | " + " | ".join(schedulers) + " |", "|---" * (len(schedulers) + 2) + "|"]
    for n in sorted(tests):
        limit = next(by[s][n]["max_ms"] for s in schedulers if n in by[s])
        cells = [("-" if n not in by[s] else
                  f"{by[s][n]['ms']}" + ("" if by[s][n]["ok"] else " **FAIL**")) for s in schedulers]
        lines.append(f"| {n:02d} {tests[n]} | {limit} | " + " | ".join(cells) + " |")
    passed = [f"{s} {sum(r['ok'] for r in results[s])}/{len(results[s])}" for s in schedulers]
    lines += ["", f"Passed: {', '.join(passed)}. Under TCG the limits, computed for real hardware, leave "
              "`default` a few per cent of margin: a single run tells a scheduler's clear failure "
              "from a pass, not a near miss from noise.", ""]
    return lines


def _wf_cell(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "-"
    if cell.get("skipped"):
        return "not run (time)"
    return f"{cell['tpr_mean'] * 100:.1f}"


# Results recorded before the simulator said how it split (``hywf_split``)
# were made with the split of the HyWF thesis's simulator.
SEQUENTIAL_SPLIT = "bursts in send order, each whole on its network before the next"


def _rows_set_burst(defences: Iterable[str]) -> bool:
    """Whether any row is named with a mean burst of its own (``hywf:ncons=N``)."""
    return any("ncons" in parse_spec(d)[1] for d in defences)


def _split_model(meta: dict[str, Any]) -> str:
    """How the run split the loads; its mean burst where it recorded one
    (runs before ``--ncons`` used the thesis's 20), which a row named
    ``hywf:ncons=N`` sets for itself."""
    ncons = (meta.get("params") or {}).get("ncons")
    own = _rows_set_burst(meta.get("defences", []))
    return (f"`hywf` simulated as {meta.get('hywf_split', SEQUENTIAL_SPLIT)}"
            + (f", bursts of {ncons} packets on average" if ncons else "")
            + (" where the row does not name its own" if ncons and own else ""))


# Results recorded before the simulator said how it sized adaptive
# padding's dummies (``padding_model``) were made with dummies the size of
# their end's last packet: most often an empty FIN or window frame, so
# the padding added about a quarter more packets but some 1 % of bytes,
# where braid-proxy's padding (and the present simulator) adds 27 %.
LAST_PACKET_PADDING = ("each its end's last packet, most often a 35-byte empty frame (about 1 % of bytes where "
                       "braid-proxy's padding adds 27 %: the bandwidth overheads of `ap` and `hywf-ap` here are "
                       "understated)")


def _padding_model(meta: dict[str, Any]) -> str:
    return f"AP's dummies {meta.get('padding_model', LAST_PACKET_PADDING)}"


def _wf_open_world(meta: dict[str, Any], results: dict[str, Any]) -> list[str]:
    """The open-world table, if any of its cells was run: a load of an
    unmonitored site taken for a monitored one is a false positive, and
    precision is at the run's base rate."""
    attacks, names = meta["attacks"], meta["attack_names"]
    if not any(c.get("tpr_mean") is not None for r in results.values() for c in r.get("open", {}).values()):
        return []

    def cells(cell: dict[str, Any] | None) -> str:
        if cell is None or cell.get("tpr_mean") is None:
            return "not run (time) | -" if cell is not None and cell.get("skipped") else "- | -"
        return (f"{cell['tpr_mean'] * 100:.1f} / {cell['fpr_mean'] * 100:.1f} | "
                f"{cell['precision_mean'] * 100:.1f}")

    lines = [f"Open world ({meta['unmonitored']} loads of unmonitored sites besides the monitored ones; "
             f"precision when {meta['base_rate']:g} of loads are to monitored sites):", "",
             "| defence | " + " | ".join(f"{n} TPR / FPR % | {n} precision %" for n in names) + " |",
             "|---" * (2 * len(attacks) + 1) + "|"]
    for defence, row in results.items():
        lines.append(f"| {defence} | " + " | ".join(cells(row.get("open", {}).get(a)) for a in attacks) + " |")
    return [*lines, ""]


def _wf_corpus_caveat(meta: dict[str, Any], defended: bool = True) -> str:
    """What a table's figures say, given where its loads came from and
    whether it has defended rows."""
    how = meta.get("collection")
    if not how:
        return ("Simulated loads, not captures: these figures say how the defences compare against "
                "attacks that work on this corpus, not what braid's users get on real pages, and say nothing "
                "of page-load time. ")
    split = (", which the `hywf` simulator has both networks carry at once, where a network's round trips "
             "cut it into several" if defended else "")
    web = how.get("profile") == "web"
    shape = ("last tenths of a second and their answers come as one flight per wave of requests" if web else
             "last milliseconds and their answers come as one flight")
    timing = (f"on unshaped links, so a load's timing is the machines' own work, not a network's: the loads "
              f"{shape}{split}; " if how.get("links") == "unshaped" else "")
    defences = ("the defences are the trace-level simulators, checked against the wire in the section below"
                if defended else "the load as one network carries it, no defence")
    pages = ("shaped like today's home pages (requests and bytes per page as the HTTP Archive measured them), "
             "but synthetic" if web else "the synthetic corpus's")
    return (f"Captured loads{', simulated defences' if defended else ''}: the loads are packets captured on the "
            f"wire through braid-proxy ({how['loader']} loader; {timing}{defences}). The pages are {pages}, "
            "not real web sites, and page-load time is not part of these figures. ")


def wf_deep_section(data: dict[str, Any]) -> list[str]:
    """The WF attacks against each defence, closed world, on network 1's
    traces, with the defence's bandwidth overhead, against the privacy goal."""
    meta, results = data["meta"], data["results"]
    attacks, names = meta["attacks"], meta["attack_names"]
    deep = any(a in DEEP_ATTACKS for a in attacks)
    padded = any(base_name(d) in ADAPTIVE for d in results)
    defended = list(results) != ["none"]
    against = "against the defences" if defended else "undefended"
    lines = [f"## Website fingerprinting: {', '.join(names)} {against}"
             + (f" ({meta['epochs']} epochs)" if deep else "")
             + (", captured loads" if meta.get("collection") else "")
             + (" of web-shaped sites" if meta.get("collection", {}).get("profile") == "web" else ""), "",
             f"({meta['corpus']}; {meta['started'][:10]}"
             + (f", on {', '.join(meta['jax_devices'])}" if meta.get("jax_devices") else "")
             + f"; {meta['repeats']} random split, "
             + (f"attacker trained on originals + {meta['copies']} protected copy per load; " if defended
                else "trained and tested on the undefended loads; ")
             + (f"deep attacks {meta['epochs']} epochs" if deep else "")
             + (f", RF's TAM over {meta['tam_seconds']:g} s" if "rf" in attacks and meta.get("tam_seconds") else "")
             + ("; " if deep else "")
             + (f"{_split_model(meta)}; " if defended else "") + (f"{_padding_model(meta)}; " if padded else "")
             + "closed-world accuracy %" + (" of network 1's observer" if defended else "") + ", chance 1 %)", "",
             "| defence | bandwidth overhead % | " + " | ".join(names) + " |",
             "|---" * (len(attacks) + 2) + "|"]
    for defence, row in results.items():
        cells = [_wf_cell(row["closed"].get(a)) for a in attacks]
        lines.append(f"| {defence} | {row['overhead'] * 100:.1f} | " + " | ".join(cells) + " |")
    lines += ["", *_wf_learning_curves(results), *_wf_by_share(results), *_wf_open_world(meta, results)]
    for defence in [d for d in results if base_name(d) in ("hywf", "hywf-ap")]:
        row = results[defence]
        done = [c for c in (row or {}).get("closed", {}).values() if c.get("tpr_mean") is not None]
        if not row or not done:
            continue
        worst = max(done, key=lambda c: c["tpr_mean"])
        within = worst["tpr_mean"] * 100 <= WF_TARGET_PCT and row["overhead"] * 100 <= WF_OVERHEAD_PCT
        missing = [c["attack"] for c in row["closed"].values() if c.get("tpr_mean") is None]
        verdict = ("not met" if not within else
                   f"not established ({', '.join(missing)} not run)" if missing else "met by these attacks")
        # a deep attack stopped short of its recipe's epochs is not yet the published attack
        short = [a for a in row["closed"] if a in RECIPES and meta.get("epochs")
                 and meta["epochs"] < RECIPES[a].epochs]
        if within and short:
            verdict += (f", {', '.join(ATTACK_NAMES[a] for a in short)} trained for {meta['epochs']} of the "
                        f"published {max(RECIPES[a].epochs for a in short)} epochs: more may raise it")
        if base_name(defence) == "hywf-ap" and "padding_model" not in meta:
            verdict += ", with its overhead understated"
        lines.append(f"- `{defence_label(defence, meta)}`: strongest attack run {worst['attack']} at "
                     f"{worst['tpr_mean'] * 100:.1f} % "
                     f"with {row['overhead'] * 100:.1f} % bandwidth overhead; goal <= {WF_TARGET_PCT:g} % at "
                     f"<= {WF_OVERHEAD_PCT:g} %: **{verdict}**.")
    if lines[-1]:
        lines.append("")
    own_burst = (meta.get("params") or {}).get("ncons", NCONS) != NCONS or _rows_set_burst(results)
    lines += [_wf_corpus_caveat(meta, defended)
              + (f"Only `hywf`'s default burst ({NCONS} packets) is checked against the wire; the other bursts "
                 "here are simulated only. " if defended and own_burst else "")
              + _wf_undefended_note(results, attacks, names, defended)
              + ("" if deep else f" The deep attacks ({', '.join(ATTACK_NAMES[a] for a in DEEP_ATTACKS)}) are "
                 "not in this run: at this size each trains for hours on a CPU."), ""]
    return lines


def _wf_undefended_note(results: dict[str, Any], attacks: list[str], names: list[str], defended: bool) -> str:
    """Whether the attacks in this run work undefended: an attack below
    90 % there makes its figures against the defences a lower bound."""
    if "none" not in results:
        return "This run has no undefended row: the undefended figures on these loads are in their own sections."
    undefended = [c for c in results["none"]["closed"].values() if c.get("tpr_mean") is not None]
    if not undefended:
        return "No undefended cell of this run finished: whether its attacks work here is not shown by it."
    weak = [c["attack"] for c in undefended if c["tpr_mean"] < 0.9]
    if weak:
        return (f"Undefended, {', '.join(weak)} {'stays' if len(weak) == 1 else 'stay'} below the 90 % that proves "
                "an attack works as published"
                + (": the figures against the defences are a lower bound on what a stronger attack does."
                   if defended else "."))
    # a run stopped before an attack's cell: the table's "-"
    not_run = [name for a, name in zip(attacks, names, strict=True)
               if (results["none"]["closed"].get(a) or {}).get("tpr_mean") is None]
    if not_run:
        return f"Undefended, every attack run reaches 90 % ({', '.join(not_run)} not run)."
    return "Undefended, every attack reaches 90 %."


def _wf_by_share(results: dict[str, Any]) -> list[str]:
    """Per split-defence cell that recorded it, its accuracy by network 1's
    share of the load's bytes: where in the split the attack finds its
    answers."""
    cells = [(defence, cell) for defence, row in results.items() for cell in row["closed"].values()
             if cell.get("by_share")]
    if not cells:
        return []
    names = share_band_names([b["share_from"] for b in cells[0][1]["by_share"]])
    rows = [f"| {defence} | {cell['attack']} | "
            + " | ".join(f"{100 * b['right'] / b['loads']:.1f} ({b['loads']})" if b["loads"] else "-"
                         for b in cell["by_share"]) + " |" for defence, cell in cells]
    return ["Accuracy % by network 1's share of the load's bytes (test loads in that band, all splits):", "",
            "| defence | attack | " + " | ".join(names) + " |", "|---" * (len(names) + 2) + "|", *rows, ""]


def _wf_learning_curves(results: dict[str, Any]) -> list[str]:
    """Per closed-world cell that recorded one, its first split's learning
    curve: the test loads' accuracy after every so many epochs (the last
    is that split's figure in the table)."""
    curves = [(defence, cell["attack"], curve) for defence, row in results.items()
              for cell in row["closed"].values() for curve in cell.get("curve", [])[:1]]
    if not curves:
        return []
    rows, gains = [], []
    for defence, attack, curve in curves:
        rows.append(f"| {defence} | {attack} | " + ", ".join(f"{e}: {100 * a:.1f}" for e, a in curve) + " |")
        last_epoch, last = curve[-1]
        half = [(e, a) for e, a in curve if e <= last_epoch / 2]
        if half:
            gains.append(f"{attack} ({defence}) {100 * (last - half[-1][1]):+.1f} points from epoch "
                         f"{half[-1][0]} to {last_epoch}")
    return ["Learning curve: accuracy % on the test loads after each number of epochs, scored during the "
            "training, which does not depend on it (the last is the table's figure):", "",
            "| defence | attack | epoch: accuracy % |", "|---|---|---|", *rows, "",
            *([f"Over the second half of the training: {'; '.join(gains)}.", ""] if gains else [])]


def wf_wire_check_section(data: dict[str, Any]) -> list[str]:
    """Each attack on captured protected traces beside the simulator on the
    same loads (braid_wf.wirecheck)."""
    meta, checks = data["meta"], wirecheck.from_json(data)
    held = sum(c.holds for c in checks)
    # one file per collection: the heading tells them apart
    collected = ", ".join(dict.fromkeys(f"`{c.condition}`" for c in checks))
    return [f"## Website fingerprinting: the simulators against the wire, {collected}", "",
            f"(loads collected in braid's kernel under `{meta['root']}`, originals `{meta['originals']}`; "
            f"braid {meta['braid']}, {meta['date']}; closed world, the defence-aware model on network 1's "
            "protected test traces, mean ± sd over each row's splits (a split of the loads into training "
            "and test, with fresh random splits of the traces; se: the standard error of the mean difference); "
            f"{'published' if meta['full'] else 'quick-mode'} attacks; AP budget {meta['padding_budget']:g}, "
            f"hywf-ap's p-drift {meta['n_chp']}; {_split_model(meta)}; a load of which network 1 captured "
            "nothing is left out of "
            "both columns; undefended: the attack trained and tested on the unsplit loads)", "",
            *wirecheck.table(checks), "",
            f"{held} of {len(checks)} checks within ±{meta['tolerance_points']:g} points: where one is not and its "
            "splits resolve it, the simulated figures above misstate that attack under that defence on the wire."
            + (f" {unresolved} with too few splits to tell (fewer than {wirecheck.MIN_SPLITS}, or the se above "
               f"{wirecheck.RESOLVED_SE_POINTS:g} points)."
               if (unresolved := sum(not c.resolved for c in checks)) else ""), "",
            *(["How the loads cross the networks, on the wire / simulated (medians over loads; a run is "
               "consecutive packets of one direction on one network, both networks' packets merged in time). "
               "The wire is captured past each network's link: when a burst moves to the other network "
               "faster than a link drains, the first link's queue still empties as the second's fills, and "
               "the merged packets alternate. The last column passes the simulated networks through links "
               "of the collection's rate, as the wire's captures see them (— where not computed):", "",
               *wirecheck.structure_table(structures), ""] if (structures := wirecheck.structures_from_json(data))
              else [])]


def wf_tor_section(data: dict[str, Any]) -> list[str]:
    """Tor mode's loads (braid-wf collect --condition tor-hywf) under the
    attacks: network 1's captures of the client's connection to the bridge
    beside the unsplit loads and the hywf simulator (braid_wf.wirecheck)."""
    meta, checks = data["meta"], wirecheck.from_json(data)
    strongest = max(checks, key=lambda c: statistics.fmean(c.wire), default=None)
    lines = ["## Website fingerprinting: Tor mode on the wire", "",
             f"(page loads through a private Tor network in braid's kernel, the client's tor reaching the braid "
             f"bridge over MPTCP with `hywf` on both ends, under `{meta['root']}`; braid {meta['braid']}, "
             f"{meta['date']}; closed world, mean ± sd over each row's splits; "
             f"{'published' if meta['full'] else 'quick-mode'} attacks; undefended: trained and tested on both "
             "networks merged, i.e. the load as one network carries it; on the wire: the defence-aware model on "
             f"network 1's captures; simulated: the same loads split by the hywf simulator, {_split_model(meta)})",
             "",
             *wirecheck.table(checks), ""]
    if strongest is not None:
        chance = f", chance {100 / meta['sites']:.0f} %" if meta.get("sites") else ""
        lines += [f"Strongest attack on one network's Tor-mode traces: {strongest.attack} at "
                  f"{100 * statistics.fmean(strongest.wire):.1f} % (goal <= {WF_TARGET_PCT:g} %{chance}).", ""]
    weak = [f"{c.attack} {100 * statistics.fmean(c.undefended):.1f} %" for c in checks
            if c.undefended and statistics.fmean(c.undefended) < WF_WORKS]
    if weak:
        lines += [f"Undefended below {100 * WF_WORKS:.0f} %: {', '.join(weak)}. Such an attack does not work as "
                  "published on these loads (too few of them, or quick mode): its figure under the defence is a "
                  "lower bound on a working one's.", ""]
    return lines


def wf_loaders_section(data: dict[str, Any]) -> list[str]:
    """The synthetic loader's traces against a browser's on the same pages
    (braid_wf.loadercheck)."""
    meta, checks = data["meta"], loadercheck.from_json(data)
    sites = checks[0].sites if checks else 0
    defense = checks[0].defense if checks else None
    defended = (f" Under {defense}: each loader's loads split by the `{defense}` simulator, the attack trained and "
                "tested on network 1's part (defence-aware): whether the split protects a browser's loads as it "
                "does the synthetic loader's." if defense else "")
    return ["## Website fingerprinting: the synthetic loader against a browser", "",
            f"(the corpus's loads through braid-proxy on the host kernel, loaded twice: by `websites.py`'s loader "
            f"(`{meta['synthetic']}`) and as web pages by headless Chromium (`{meta['browser']}`, "
            f"{meta.get('browser_version') or 'version not recorded'}); {checks[0].loads if checks else 0} loads "
            f"of {sites} sites in both, matched by name, under `{meta['root']}`; braid {meta['braid']}, "
            f"{meta['date']}; unshaped links (the host kernel has no netem), so durations and load times are "
            "the loaders' own work, not a network's; what an observer of the relay connection sees, both "
            "directions; "
            f"{'published' if meta['full'] else 'quick-mode'} attacks, closed world, mean ± sd over "
            f"{meta['repeats']} splits of the loads, the same splits in every column"
            + (f", chance {100 / sites:.1f} %" if sites else "") + ")", "",
            *loadercheck.table(checks), "",
            "Trained on one loader and tested on the other: how far a figure measured on the synthetic "
            "loader's traces carries to a browser's loading the same pages." + defended, ""]


def wf_confusion_section(data: dict[str, Any]) -> list[str]:
    """Which sites an attack confuses, beside the sites' shapes
    (braid_wf.confusion)."""
    meta, c = data["meta"], confusion.Confusion.from_json(data["confusion"])
    web = meta.get("profile") == "web"
    shapes = (f"; objects / kB: each site's base objects and their bytes as the site generator (seed "
              f"{meta['generator_seed']}{', web profile' if web else ''}) made them, before a load's own "
              "variation" if c.shapes else "")
    epochs = f", {meta['epochs']} epochs" if meta.get("epochs") else ""
    name = ATTACK_NAMES.get(c.attack, c.attack)
    return [f"## Website fingerprinting: which sites {name} confuses" + (", web-shaped sites" if web else ""), "",
            f"({meta['corpus']}; {'full-size' if meta['full'] else 'quick-mode'} attack{epochs}, closed world, "
            f"one split of the loads (seed {meta['seed']}), 2/3 for training; braid {meta['braid']}, "
            f"{meta['date']}{shapes})", "",
            *confusion.table(c), ""]


def _loadavg(v: list[float] | None) -> str:
    return "/".join(f"{x:.2f}" for x in v) if v else "?"


def relay_capacity_section(data: dict[str, Any]) -> list[str]:
    """proxy/bench/capacity.py: what one relay holds on one core."""
    params, res = data["params"], data["results"]
    h = res["headline"]
    lines = ["## Relay capacity (proxy/bench/capacity.py)", "",
             f"({_env(params)}, {params.get('date', '?')}; {params['machine_cores']} cores; {params['pinning']}; "
             f"{params['clients']} client boxes, each with its own key, connections spread over them in turn; "
             f"each connection a {params['request_bytes']}-byte request and {params['response_bytes']}-byte "
             f"response through braid-proxy client and server; open-file limit {params['nofile']}; "
             f"load average {_loadavg(params.get('loadavg_at_start'))} at the start, "
             f"{_loadavg(res.get('loadavg_at_end'))} at the end)", "",
             "CPU per connection is the relay process's utime + stime over the connections of the step, and net "
             f"of its idle use ({res.get('relay_idle_core_pct', 0):.2f} % of its core: the client boxes' spare "
             "connections, timers). A core's busy share counts everything on it: the relay's softirq work and any "
             "other load on the machine.", "",
             "| offered conn/s | achieved conn/s | failed | latency p50 ms | p99 ms | relay CPU us/conn "
             "| net of idle | relay process % of core 0 | core 0 busy % | core 1 busy % |", "|---" * 10 + "|"]
    for s in res["rate"]:
        mark = " (saturated)" if s["saturated"] else ""
        lines.append(f"| {s['offered_per_s']:.0f} | {s['achieved_per_s']:.0f}{mark} | {s['failed']} "
                     f"| {s['latency_median_ms']:.2f} | {s['latency_p99_ms']:.2f} | {s['relay_cpu_us_per_conn']:.0f} "
                     f"| {s['relay_cpu_us_per_conn_net']:.0f} | {s['relay_core_pct']:.1f} "
                     f"| {s['relay_core_busy_pct']:.1f} | {s['generator_core_busy_pct']:.1f} |")
    lines += ["", f"Held connections (each echoing {params['echo_bytes']} bytes every "
              f"{params['echo_interval_s']:g} s, held {params['hold_s']:g} s):", "",
              "| held | live | relay RSS MiB | RSS KiB/conn | relay core % holding | echoes/s |", "|---" * 6 + "|"]
    for x in res["hold"]:
        lines.append(f"| {x['n']} | {x.get('live', 0)} | {x.get('relay_rss_held_kib', 0) / 1024:.1f} "
                     f"| {x['relay_rss_kib_per_conn']:.1f} | {x.get('relay_core_pct_holding', 0):.2f} "
                     f"| {x.get('echoes_per_s', 0):.0f} |")
    lines += ["", f"Key file size (every configured key is tried on each hello; {params['keys_rate']:g} conn/s "
              "through one client box):", "", "| keys | relay CPU us/conn | net of idle | failed |", "|---" * 4 + "|"]
    lines += [f"| {k['keys']} | {k['relay_cpu_us_per_conn']:.0f} | {k['relay_cpu_us_per_conn_net']:.0f} "
              f"| {k['failed']} |" for k in res["keys"]]
    keys = sorted(res["keys"], key=lambda k: k["keys"])
    if len(keys) > 1 and keys[-1]["keys"] > keys[0]["keys"]:
        lo, hi = keys[0], keys[-1]
        per_key = (hi["relay_cpu_us_per_conn_net"] - lo["relay_cpu_us_per_conn_net"]) / (hi["keys"] - lo["keys"])
        lines += ["", f"Each configured key adds about {per_key:.1f} us of relay CPU to every connection "
                  f"({lo['keys']} to {hi['keys']} keys)."]
    est = h["relay_core_conns_per_s_estimate"]
    lines += ["", f"Most carried: {h['max_conns_per_s']} conn/s, {h['limit']}; at "
              f"{h['relay_cpu_us_per_conn']:.0f} us of relay CPU per connection (net of idle, at the busiest step that "
              f"kept up) one core allows about {est} conn/s "
              "(process time only, not the kernel's softirq work). Held: "
              f"{h['max_held_live']} live connections at {h['held_rss_kib_per_conn']:.1f} KiB of relay RSS each.", ""]
    return lines


SECTIONS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "e1": e1_section, "e1b": e1b_section, "e2": e2_section, "e2-variable": e2_section, "e3": e3_section,
    "e3-braid-delaybal": e3_section, "e3-braid-bernoulli": e3_section,
    "e3-braid-hywf": e3_section, "e3-braid-default": e3_section,
    "bench-sched": bench_sched_section, "bench-pageload": bench_pageload_section,
    "bench-pageload-defences": bench_pageload_defences_section,
    "bench-pageload-repeat": bench_pageload_repeat_section,
    "simult-flows": simult_flows_section, "wf-deep-12ep": wf_deep_section, "wf-deep-30ep": wf_deep_section,
    "wf-kfp": wf_deep_section, "wf-captured-kfp": wf_deep_section, "wf-captured-deep": wf_deep_section,
    "wf-captured-rf": wf_deep_section,
    "wf-captured-df-curve": wf_deep_section, "wf-captured-df-200": wf_deep_section,
    "wf-captured-confusion": wf_confusion_section, "wf-captured-confusion-df": wf_confusion_section,
    "wf-captured-web-kfp": wf_deep_section, "wf-captured-web-deep": wf_deep_section,
    "wf-captured-web-tiktok-rf": wf_deep_section, "wf-captured-web-df-hywf": wf_deep_section,
    "wf-captured-web-df-hywf-ap": wf_deep_section, "wf-captured-web-kfp-ncons": wf_deep_section,
    "wf-captured-web-df-hywf-ncons100": wf_deep_section,
    "wf-captured-web-confusion": wf_confusion_section,
    "wf-wire-check": wf_wire_check_section, "wf-wire-check-long": wf_wire_check_section,
    "wf-tor": wf_tor_section, "wf-loaders": wf_loaders_section,
    "relay-capacity": relay_capacity_section}


# The privacy goal's overview (braid_eval.analysis.privacy_goal) comes
# before the first fingerprinting section.
GOAL_BEFORE = "wf-deep-12ep"


def summarize(out: Path) -> tuple[str, list[str]]:
    """The Markdown page and the experiments whose results were missing."""
    lines = ["# braid results", "",
             f"Generated by `python3 -m braid_eval.analysis.summary` from the result files under `{out.name or out}/`: "
             "every figure is a measurement, with the mode, kernel and braid commit that produced it. "
             "Each experiment's section ends with its published counterpart, kept apart.", ""]
    missing, files = [], {}
    for name in SECTIONS:
        path = find(out, name)
        if path is None:
            missing.append(name)
            continue
        try:
            files[name] = json.loads(path.read_text())
        except ValueError as err:
            raise SystemExit(f"summary: {path}: not an {name} result file ({err!r})")
    for name, section in SECTIONS.items():
        if name == GOAL_BEFORE:
            lines += goal_section((data for n, data in files.items() if SECTIONS[n] is wf_deep_section),
                                  files.get("bench-pageload-defences"),
                                  [files["bench-pageload-repeat"]] if "bench-pageload-repeat" in files else [])
        if name not in files:
            continue
        try:
            lines += section(files[name])
        except (ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"summary: {find(out, name)}: not an {name} result file ({err!r})")
    if missing:
        lines += [f"Missing (no result file under {out.name or out}/): {', '.join(missing)}.", ""]
    return "\n".join(lines), missing


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    p.add_argument("--out", type=Path, default=Path("out"),
                   help="directory holding the result files (e1/e1.json or e1.json, ..., bench-sched.json)")
    p.add_argument("--page", type=Path, help="where the page goes (default: OUT/summary.md)")
    args = p.parse_args()
    if not args.out.is_dir():
        p.error(f"--out: {args.out} is not a directory")
    text, missing = summarize(args.out)
    page = args.page or args.out / "summary.md"
    page.write_text(text)
    if args.page:
        print(f"summary: wrote {page} from {args.out}/")
    else:
        print(text)
    if missing:
        print(f"summary: missing {', '.join(missing)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Website-fingerprinting evaluation of what each network's observer sees:
collect traces, run the attacks, write the report.

Commands::

    python3 -m braid_wf quick                       # seconds: synthetic corpus,
                                                         # attacks vs chance, simulated hywf
    python3 -m braid_wf synth --out out/wf/synth --sites 50 --instances 30 --unmonitored 500
    python3 -m braid_wf evaluate --data DIR [--defense hywf | --protected DIR]
                                      [--open-world] [--full] --report out/wf/report.md
    python3 -m braid_wf collect --out out/wf --condition hywf --sites 50 --instances 30
                                      # in braid's VM (kernel/vm run -- ...); --host on the
                                      # host kernel (default scheduler, unshaped links);
                                      # --condition tor-hywf: Tor mode, through a private
                                      # Tor network and the braid bridge
    python3 -m braid_wf costs --root out/wf     # page-load time, overhead vs default
    python3 -m braid_wf histograms --data out/wf/hywf/all --out ap.json
                                      # adaptive padding's delay histograms fitted on loads,
                                      # for braid-proxy's padding_histograms (collect's too)
    python3 -m braid_wf defenses [--full] [--data DIR] [--budget 0.4] [--n-chp 100] [--ncons 20]
                                      [--attacks kfp,df,tiktok,rf] [--json F] [--plot F] [--jobs N]
                                      # none / hywf / AP / hywf+AP / FRONT side by side (k-FP by
                                      # default), with measured overhead (simulated defences; quick
                                      # by default)
    python3 -m braid_wf wirecheck --root out/wf --conditions hywf hywf-ap [--attacks kfp,df]
                                      # each attack on network 1's captures beside the same loads
                                      # protected by the simulator (braid_wf.wirecheck)
    python3 -m braid_wf collect --host --condition single --loader chromium --out out/wfl
    python3 -m braid_wf loadercheck --root out/wfl --json results/wf-loaders.json
                                      # the synthetic loader's traces against headless
                                      # Chromium's on the same pages (braid_wf.loadercheck)
    python3 -m braid_wf confusion --data out/wfc/single/all --attack kfp --json F
                                      # which sites the attack confuses, and whether they are
                                      # alike in objects and bytes (braid_wf.confusion)

``evaluate`` reads any dataset in the WF literature's format (Wang's or
Hayes's layout: ``<site>-<instance>`` and ``<n>`` files of
``time<TAB>direction*size`` lines), so published traces can be evaluated
the same way. Progress goes to stderr, the Markdown report to ``--report``
(and stdout).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from braid_eval.analysis.provenance import installed_version
from braid_testbed.websites import PROFILES
from braid_wf import collection, conditions, confusion, loadercheck, wirecheck
from braid_wf.attacks import ALL_ATTACKS, ATTACK_NAMES, ATTACKS, DEEP_ATTACKS
from braid_wf.compare import BASE_RATE, DefenseResult, compare, plot, table, to_json
from braid_wf.conditions import CONDITIONS, Condition
from braid_wf.deep import require_jax
from braid_wf.defences import catalog as defense_catalog
from braid_wf.defences import hywf_sim
from braid_wf.defences.adaptive_padding import (
    PADDING_MODEL,
    fit_histograms,
    histograms_from_json,
    histograms_to_json,
)
from braid_wf.evaluate import Score, evaluate
from braid_wf.parallel import default_jobs
from braid_wf.synth import synthetic_dataset
from braid_wf.trace import Dataset, Trace, load_dataset, save_dataset

# Thesis Table 6.1 (closed world, Wang's dataset), TPR %, per attack.
THESIS_CLOSED = {
# The thesis has no results for the deep attacks (DF, Tik-Tok, RF).
    "orig": {"kfp": "90.7±0.3", "knn": "91.0±0.3", "cumul": "90.2±0.6"},
    "model_orig": {"kfp": "90.8±0.3", "knn": "82.6±1.9", "cumul": "75.9±1.3"},
    "model_prot": {"kfp": "36.3±0.6", "knn": "15.3±1.7", "cumul": "12.4±0.4"},
}
# Table 6.2 (open world, Wang's dataset, k-FP): overhead / TPR / FPR %.
THESIS_OPEN = {"model_orig": "0 / 88.7 / 0.2", "model_prot": "0 / 14.7 / 1.0", "orig": "—"}
ROW_NAMES = {"orig": "Orig. traces (trained on orig.)", "model_orig": "{d} model, orig. traces",
             "model_prot": "{d} model, prot. traces"}


def log(msg: str) -> None:
    print(f"[wf {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def network1(split: Callable[[Trace, np.random.Generator], tuple[Trace, Trace]]
             ) -> Callable[[Trace, np.random.Generator], Trace]:
    """What network 1's observer sees of a load split this way."""
    return lambda tr, rng: split(tr, rng)[0]


def closed_table(results: dict[str, dict[str, Score]], defense: str, title: str) -> str:
    attacks = list(results)
    head = "| | " + " | ".join(f"{ATTACK_NAMES[a]} (braid) | {ATTACK_NAMES[a]} (thesis)" for a in attacks) + " |"
    lines = [f"### {title}", "", "Closed world, TPR % (mean ± sd over splits); thesis column: Table 6.1 "
             "(its defence rows are HyWF), Wang's dataset.",
             "", head, "|---" * (1 + 2 * len(attacks)) + "|"]
    for row in results[attacks[0]]:
        cells = [f"{results[a][row].tpr_text} | {THESIS_CLOSED[row].get(a, '—')}" for a in attacks]
        lines.append(f"| {ROW_NAMES[row].format(d=defense)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def open_table(results: dict[str, dict[str, Score]], defense: str, ov: float, title: str) -> str:
    note = (" Overhead n/a: captured traces are one network's part of a load; `wf costs` "
            "measures the bytes against `default`." if ov != ov else "")
    lines = [f"### {title}", "", "Open world: overhead / TPR / FPR %; thesis column: Table 6.2 "
             f"(HyWF rows), Wang's dataset, k-FP.{note}",
             "", "| | attack | braid ov. / TPR / FPR | thesis |", "|---|---|---|---|"]
    for a, rows in results.items():
        for row, sc in rows.items():
            ovt = "0" if row == "orig" else (f"{100 * ov:.0f}" if ov == ov else "n/a")
            lines.append(f"| {ROW_NAMES[row].format(d=defense)} | {ATTACK_NAMES[a]} | {ovt} / {sc.tpr_text} / "
                         f"{sc.fpr_text} | {THESIS_OPEN[row] if a == 'kfp' else '—'} |")
    return "\n".join(lines) + "\n"


def run_eval(orig: Dataset, args: argparse.Namespace, protected: Dataset | None, title: str,
             shuffle: bool = False) -> str:
    protect = network1(hywf_sim.SPLITS[args.defense]) if args.defense and protected is None else None
    if getattr(args, "label", None):
        defense = args.label
    elif protected is not None:
        defense = args.protected.parent.name  # the condition: out/wf/<condition>/wan1
    else:
        defense = {"hywf": "HyWF", "even": "Even split", "single": "Single network"}.get(args.defense or "", "")
    out = []
    for world in (["closed", "open"] if args.open_world else ["closed"]):
        results = {}
        for a in args.attacks:
            log(f"{world} world, {a}, {len(orig.traces)} traces{' (labels shuffled)' if shuffle else ''}")
            results[a] = evaluate(orig, a, repeats=args.repeats, quick=not args.full,
                                  open_world=world == "open", protect=protect, protected=protected,
                                  copies=args.copies, shuffle_labels=shuffle, seed=args.seed, progress=log)
        if world == "closed":
            out.append(closed_table(results, defense, title))
        else:
            # Captured traces are one network's part of a load: their bytes
            # over the whole load's say nothing of the defence's cost, which
            # `wf costs` measures against `default` (n/a here).
            ov = float("nan") if protected is not None else 0.0
            out.append(open_table(results, defense, ov, title))
    return "\n".join(out)


def cmd_quick(args: argparse.Namespace) -> int:
    """Synthetic corpus: undefended accuracy, shuffled labels, simulated HyWF."""
    start = time.monotonic()
    sites, inst = args.sites, args.instances
    log(f"synthetic corpus: {sites} sites x {inst} loads, {args.unmonitored} unmonitored")
    ds = synthetic_dataset(sites, inst, args.unmonitored, seed=args.seed)
    args.defense = "hywf"
    report = [f"# WF quick check (synthetic loads, not braid's captures; {sites} sites x {inst} loads, "
              f"chance = {100 / sites:.1f} %)\n", run_eval(ds, args, None, "Attacks vs simulated HyWF")]
    args.defense = None
    args.open_world = False
    report.append(run_eval(ds, args, None, "Shuffled training labels (must be at chance)", shuffle=True))
    text = "\n".join(report) + f"\n_{time.monotonic() - start:.0f} s_\n"
    emit(text, args.report)
    return 0


def emit(text: str, path: Path | None) -> None:
    print(text)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        log(f"report written to {path}")


def load_limited(path: Path, args: argparse.Namespace) -> Dataset:
    """A dataset cut to --max-sites / --max-instances / --max-unmonitored (see limits)."""
    return load_dataset(path, max_sites=args.max_sites, max_instances=args.max_instances,
                        max_unmonitored=args.max_unmonitored)


def cmd_evaluate(args: argparse.Namespace) -> int:
    orig = load_limited(args.data, args)
    log(f"{args.data}: {len(orig.traces)} traces, {orig.monitored} monitored sites, "
        f"{sum(1 for x in orig.labels if x < 0)} unmonitored")
    protected = load_limited(args.protected, args) if args.protected else None
    title = f"{args.data}" + (f" vs {args.protected}" if protected else (f", simulated {args.defense}"
                                                                          if args.defense else ""))
    emit(run_eval(orig, args, protected, title), args.report)
    return 0


def cmd_wirecheck(args: argparse.Namespace) -> int:
    """Each attack on each condition's captures of network 1 beside the
    simulator's protection of the same loads (braid_wf.wirecheck)."""
    start = time.monotonic()
    originals_dir = args.originals or args.root / "hywf" / "all"
    originals = load_limited(originals_dir, args)
    hist = (histograms_from_json(args.padding_histograms.read_text()) if args.padding_histograms
            else wirecheck.proxy_histograms())
    params = defense_catalog.DefenseParams(budget=args.padding_budget, n_chp=args.n_chp, histograms=hist)
    meta = {**wirecheck_setup(args), "sites": originals.monitored, "repeats": args.repeats,
            "braid": installed_version(), "date": time.strftime("%Y-%m-%d")}
    earlier, earlier_structures = args.earlier  # read and checked with the arguments
    checks: list[wirecheck.Check] = []

    def save(structures: Sequence[wirecheck.Structure] = ()) -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(wirecheck.to_json(
                wirecheck.merged(earlier, checks), meta,
                wirecheck.structures_merged(earlier_structures, structures)), indent=1) + "\n")

    wires = {c: load_limited(args.root / c / "wan1", args) for c in args.conditions}
    # attack by attack, in the order given: the fast ones first finish every condition
    for attack in args.attacks:
        for condition, wire in wires.items():
            log(f"{condition}, {attack}: wire and simulated, {args.repeats} splits")
            checks.append(wirecheck.check(condition, originals, wire, attack, params=params,
                                          repeats=args.repeats, quick=not args.full, seed=args.seed,
                                          progress=log))
            save()
    structures = [s for c in args.conditions
                  if (s := wirecheck.structure(c, args.root, originals_dir, originals.names, params, args.seed,
                                               link_mbit=collection.link_rate_mbit(
                                                   collection.description(args.root / c) or {})))]
    save(structures)
    size = "published" if args.full else "quick-mode"
    text = "\n".join([f"# The simulators against the wire ({args.root})", "",
                      f"Closed world, defence-aware model on network 1's protected test traces, mean ± sd "
                      f"over the splits; {size} attacks; the same loads and splits in both "
                      "columns; undefended: trained and tested on the unsplit loads.", "",
                      *wirecheck.table(checks), "",
                      "How the loads cross the networks, on the wire / simulated (medians over loads); the "
                      "wire is captured past each network's link, and the last column passes the simulated "
                      "networks through links of the collection's rate:", "",
                      *wirecheck.structure_table(structures), "",
                      f"_{time.monotonic() - start:.0f} s_", ""])
    emit(text, args.report)
    return 0 if all(c.holds for c in checks) else 1


def wirecheck_setup(args: argparse.Namespace) -> dict[str, Any]:
    """What must be the same for checks of two runs to sit in one table."""
    return {"root": str(args.root), "originals": str(args.originals or args.root / "hywf" / "all"),
            "full": args.full, "padding_budget": args.padding_budget, "n_chp": args.n_chp,
            "hywf_split": hywf_sim.SPLIT_MODEL}


def updated_checks(path: Path, args: argparse.Namespace
                   ) -> tuple[list[wirecheck.Check], list[wirecheck.Structure]]:
    """The checks and structures of an earlier ``--json`` file that this
    run updates; ValueError when it is not one or was made differently."""
    try:
        data = json.loads(path.read_text())
        before = data["meta"]
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"wirecheck: --update {path}: not a wirecheck --json file ({err})") from err
    differ = [f"{k} {before.get(k)!r} there, {v!r} here" for k, v in wirecheck_setup(args).items()
              if before.get(k) != v]
    if differ:
        raise ValueError(f"wirecheck: --update {path}: made differently ({'; '.join(differ)})")
    return wirecheck.from_json(data), wirecheck.structures_from_json(data)


def cmd_synth(args: argparse.Namespace) -> int:
    ds = synthetic_dataset(args.sites, args.instances, args.unmonitored, seed=args.seed, profile=args.profile)
    save_dataset(ds, args.out)
    log(f"wrote {len(ds.traces)} traces to {args.out}")
    return 0


def cost_table(root: Path, baseline: str = "default") -> str:
    """Page-load time and bytes on the wire per collected condition, against
    ``baseline`` (the targets: 0 % overhead, load time <= 1.2x)."""
    rows = {}
    for cond in sorted(d.name for d in root.iterdir() if (d / "loads.jsonl").exists()):
        loads = {}
        for line in (root / cond / "loads.jsonl").read_text().splitlines():
            r = json.loads(line)
            loads[r["file"]] = float(r["seconds"])  # a retried load: the last one counts
        data = load_dataset(root / cond / "all")
        rows[cond] = (loads, dict(zip(data.names, (t.total_bytes for t in data.traces), strict=True)))
    if not rows:
        raise SystemExit(f"{root}: no collected conditions (<condition>/loads.jsonl)")
    lines = ["| condition | loads | page-load median / p90, s | vs " + baseline + " | bytes on the wire vs "
             + baseline + " |", "|---|---|---|---|---|"]
    base = rows.get(baseline)
    for cond, (loads, size) in rows.items():
        secs = np.asarray(list(loads.values()))
        ratio = ov = "n/a"
        if base is not None:
            common = sorted(set(loads) & set(base[0]))
            if common:
                ratio = f"{np.median([loads[n] for n in common]) / np.median([base[0][n] for n in common]):.2f}x"
            common = sorted(set(size) & set(base[1]))
            if common:
                ov = f"{100 * (sum(size[n] for n in common) / sum(base[1][n] for n in common) - 1):+.1f} %"
        lines.append(f"| {cond} | {len(secs)} | {np.median(secs):.3f} / {np.percentile(secs, 90):.3f} | "
                     f"{ratio} | {ov} |")
    return "\n".join(lines) + "\n"


def cmd_histograms(args: argparse.Namespace) -> int:
    """Fit adaptive padding's H_B / H_G on a dataset's loads and write them
    as braid-proxy reads them (``padding_histograms``)."""
    ds = load_limited(args.data, args)
    hist = fit_histograms(ds.traces)
    args.out.write_text(histograms_to_json(hist))
    log(f"{args.data}: {len(ds.traces)} loads fitted; written to {args.out}")
    rng = np.random.default_rng(args.seed)
    for d, end in ((1, "client (out)"), (-1, "proxy (in)")):
        for kind in ("burst", "gap"):
            h = getattr(hist, kind)[d]
            draws = h.sample(rng, 10_000)
            finite = draws[np.isfinite(draws)]
            print(f"{end:13} H_{kind[0].upper()} ({kind}): median {1000 * np.median(finite):.2f} ms, "
                  f"10-90 % {1000 * np.percentile(finite, 10):.2f}-{1000 * np.percentile(finite, 90):.2f} ms, "
                  f"p_infinity {h.p_infinity:.3f}")
    return 0


def cmd_costs(args: argparse.Namespace) -> int:
    emit(cost_table(args.root, args.baseline), args.report)
    return 0


# Corpus sizes of `wf defenses`: quick (the host test, seconds) and full.
DEFENSES_QUICK = (8, 10, 40)
DEFENSES_FULL = (50, 30, 500)
# FRONT for braid_wf.synth's loads (median 0.42 s): the paper's W of 1-14 s
# (Tor loads of tens of seconds) scaled down, N for an overhead near AP's
# budget. Another corpus's W is scaled by its median load against
# SYNTH_LOAD_S, so that FRONT spreads its dummies over the loads as it does
# over the synthetic ones.
SYNTH_FRONT_N = 400
SYNTH_FRONT_W_S = (0.05, 0.7)
SYNTH_LOAD_S = 0.42
DEEP_CHECKPOINTS = Path("out/wf-checkpoints")


def front_window(ds: Dataset) -> tuple[float, float]:
    """FRONT's W for ``ds``: SYNTH_FRONT_W_S scaled by its median load duration."""
    scale = float(np.median([t.duration for t in ds.traces])) / SYNTH_LOAD_S
    return SYNTH_FRONT_W_S[0] * scale, SYNTH_FRONT_W_S[1] * scale


def captured_corpus(data: Path, how: dict[str, Any], sites: int, monitored: int, unmonitored: int) -> str:
    """A collected dataset in words: what carried its loads and who
    observes them."""
    where = (f"host kernel {how['kernel']}" if how.get("host") else f"braid's kernel {how['kernel']} in its VM")
    seen = {"all": "the load as one network carries it", "wan1": "network 1's captures",
            "wan2": "network 2's captures"}.get(data.name, data.name)
    return (f"captured corpus (`braid-wf collect`, condition `{how['condition']}`, {how['loader']} loader, "
            f"through braid-proxy on the {where}, {how['links']} links; {seen}), {sites} "
            f"{how['profile']} sites, "
            f"{monitored} monitored loads, {unmonitored} unmonitored")


def cmd_defenses(args: argparse.Namespace) -> int:
    """Trace-level defences side by side on one corpus (synthetic unless --data)."""
    start = time.monotonic()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if args.data:
        ds = load_limited(args.data, args)
        sites, inst, unmon = ds.monitored, None, sum(1 for x in ds.labels if x < 0)
        how = collection.description(args.data)
        what = captured_corpus(args.data, how, sites, len(ds.traces) - unmon, unmon) if how else f"{args.data}"
        if args.front_w is None:
            args.front_w = front_window(ds)
            log(f"FRONT's W {args.front_w[0]:.3g}-{args.front_w[1]:.3g} s: the synthetic corpus's, scaled to "
                "these loads' median duration")
    else:
        how = None
        args.front_w = args.front_w or SYNTH_FRONT_W_S
        sites, inst, unmon = (DEFENSES_FULL if args.full else DEFENSES_QUICK)
        sites, inst, unmon = (args.sites or sites, args.instances or inst,
                              unmon if args.unmonitored is None else args.unmonitored)
        ds = synthetic_dataset(sites, inst, unmon, seed=args.seed, jobs=args.jobs, profile=args.profile)
        what = (f"synthetic corpus (braid_wf.synth: simulated loads, not wire captures), {sites} {args.profile} "
                f"sites x {inst} loads, {unmon} unmonitored")
    corpus_s = time.monotonic() - start
    log(f"{what}: {len(ds.traces)} traces in {corpus_s:.1f} s ({args.jobs} workers); "
        f"defences {', '.join(args.defenses)}; attacks {', '.join(args.attacks)}")
    devices = None
    if any(a in DEEP_ATTACKS for a in args.attacks):
        import jax

        devices = [str(d) for d in jax.devices()]
        log(f"JAX {jax.__version__} on {', '.join(devices)}; "
            + (f"training saved after every epoch in {args.checkpoints}" if args.checkpoints
               else "no checkpoints"))
    params = defense_catalog.DefenseParams(budget=args.budget, idle=args.idle, n_chp=args.n_chp, ncons=args.ncons,
                                           front_n=args.front_n, front_w=(args.front_w[0], args.front_w[1]))
    open_world = any(lab < 0 for lab in ds.labels)
    mon = ds.monitored
    head = (f"# WF defences side by side ({what})\n\n"
            f"Defences simulated on the traces (defenses/); observer: network 1; attacker trained on "
            f"originals + {args.copies}x protected (thesis protocol), {args.repeats} splits, "
            f"{'full' if args.full else 'quick'} attacks"
            + (f", deep attacks {args.epochs} epochs" if args.epochs else "")
            + (f", learning curve every {args.curve_every} epochs" if args.curve_every else "")
            + (f", RF's TAM over {args.tam_seconds} s" if args.tam_seconds else "")
            + f"; chance (closed) {100 / max(mon, 1):.1f} %. "
            f"AP: histograms fitted on this corpus, budget {args.budget}, idle {args.idle} s; "
            f"hywf ncons {args.ncons}; hywf-ap n_chp {args.n_chp}; "
            f"FRONT N {args.front_n}, W {args.front_w[0]:.3g}-{args.front_w[1]:.3g} s."
            + (f" Open world: precision at base rate {args.base_rate:g} (monitored share of loads); "
               "recall = TPR." if open_world else "") + "\n\n")
    meta = {"command": "defenses", "started": started, "corpus": what, "data": str(args.data) if args.data else None,
            "collection": how,
            "sites": sites, "instances": inst, "unmonitored": unmon, "traces": len(ds.traces),
            "defences": args.defenses, "attacks": args.attacks, "attack_names": [ATTACK_NAMES[a] for a in args.attacks],
            "full": args.full, "repeats": args.repeats, "copies": args.copies, "seed": args.seed,
            "epochs": args.epochs, "curve_every": args.curve_every, "tam_seconds": args.tam_seconds,
            "base_rate": args.base_rate,
            "open_world": open_world, "jobs": args.jobs, "deadline_s": args.deadline, "jax_devices": devices,
            "params": {"budget": args.budget, "idle": args.idle, "n_chp": args.n_chp, "ncons": args.ncons,
                       "front_n": args.front_n, "front_w": list(args.front_w)},
            "hywf_split": hywf_sim.SPLIT_MODEL, "padding_model": PADDING_MODEL, "corpus_s": round(corpus_s, 2),
            "version": installed_version()}

    def write(rows: list[DefenseResult], done: bool, final: bool = False) -> None:
        text = head + table(rows, args.attacks, args.base_rate) + f"\n_{time.monotonic() - start:.0f} s_\n"
        if final:
            emit(text, args.report)
        elif args.report:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            args.report.write_text(text)
        if args.json:
            doc = {"meta": {**meta, "elapsed_s": round(time.monotonic() - start, 1), "complete": done},
                   "results": to_json(rows, args.attacks, args.base_rate)}
            args.json.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.json.with_name(args.json.name + ".tmp")
            tmp.write_text(json.dumps(doc, indent=1) + "\n")
            tmp.replace(args.json)
        if final and args.plot:
            plot(rows, args.attacks, args.plot, f"WF attacks vs defences: {what}"[:150], args.base_rate)
            log(f"plot written to {args.plot}")

    latest: list[DefenseResult] = []

    def on_cell(rows: list[DefenseResult]) -> None:
        latest[:] = rows
        write(rows, done=False)

    try:
        rows = compare(ds, args.defenses, params, attacks=args.attacks, repeats=args.repeats, quick=not args.full,
                       open_world=open_world, copies=args.copies, seed=args.seed, jobs=args.jobs,
                       epochs=args.epochs, tam_seconds=args.tam_seconds, deadline=args.deadline, start=start,
                       base_rate=args.base_rate, curve_every=args.curve_every, checkpoints=args.checkpoints,
                       progress=log, on_cell=on_cell)
    except KeyboardInterrupt:
        log("interrupted: writing the cells done so far"
            + ("; the same command goes on from the deep attacks' last saved epochs"
               if args.checkpoints and any(a in DEEP_ATTACKS for a in args.attacks) else ""))
        meta["interrupted"] = True
        write(latest, done=False, final=True)
        return 130
    write(rows, done=True, final=True)
    return 0


def _defense_list(text: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    if not names:
        raise argparse.ArgumentTypeError(f"no defence named; choose from {', '.join(defense_catalog.NAMES)}")
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(f"a defence is named twice in {text!r}")
    for name in names:
        try:
            defense_catalog.parse_spec(name)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return names


def _window(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--front-w: expected W_MIN,W_MAX in seconds, got {text!r}")
    if not 0 < lo <= hi:
        raise argparse.ArgumentTypeError(f"--front-w: need 0 < W_MIN <= W_MAX, got {text!r}")
    return lo, hi


def cmd_collect(args: argparse.Namespace) -> int:
    """Loads through braid-proxy (or Tor, in Tor mode's conditions) on a
    testbed, both WANs captured, one trace per load and WAN (and their
    union, what one observer of an unsplit load would see). Resumable:
    loads whose traces exist are skipped."""
    cond = CONDITIONS[args.condition]
    sched = cond.scheduler
    if args.loader == "chromium" and (cond.tor or args.one_connection or not args.host):
        raise SystemExit(f"--loader chromium: loads through braid-proxy with the browser's own connections, on the "
                         f"host kernel (--host; Chromium stops with a breakpoint trap on braid's VM's emulated CPU), "
                         f"not {args.condition}{' with --one-connection' if args.one_connection else ''}"
                         f"{'' if args.host else ' in the VM'}")
    if args.padding_histograms:
        if not cond.padded:
            raise SystemExit(f"--padding-histograms: condition {args.condition} does not pad")
        # Refused here, not by both braid-proxy ends after the testbed is up.
        histograms_from_json(args.padding_histograms.read_text())
        args.padding_histograms = args.padding_histograms.resolve()
    if cond.tor and args.one_connection:
        raise SystemExit(f"--one-connection: condition {args.condition} carries every load on tor's one "
                         "connection to the bridge already")
    if args.host and (sched != "default" or cond.tor):
        raise SystemExit(f"condition {args.condition} needs braid's kernel and its shaped links; "
                         "run it through kernel/vm without --host")
    if not args.host:
        from braid_testbed.topology import kernel_has_netem
        if not kernel_has_netem():
            raise SystemExit("shaped links need netem (braid's kernel); use --host on the host kernel")
    label = args.condition + ("-1conn" if args.one_connection else "") + \
        ("-chromium" if args.loader == "chromium" else "")
    todo = collection.plan(args.out, label, args.sites, args.instances, args.unmonitored, args.gap_ms)
    collection.describe(todo.root, {
        "condition": args.condition, "loader": args.loader, "host": args.host,
        "links": collection.links_description(None if args.host else args.rate_mbit, args.delay_ms),
        "one_connection": args.one_connection, "seed": args.seed, "profile": args.profile, "gap_ms": args.gap_ms,
        "sites": args.sites, "instances": args.instances, "unmonitored": args.unmonitored})
    log(f"{label}: {len(todo.loads) - len(todo.todo)} of {len(todo.loads)} loads already collected")
    if not todo.todo:
        return 0
    if cond.tor:
        from braid_wf import tor_collect
        return tor_collect.collect(todo, sched, args, log)
    return _collect_through_braid_proxy(todo, cond, args)


def _collect_through_braid_proxy(todo: collection.Plan, cond: Condition, args: argparse.Namespace) -> int:
    from braid_eval.analysis.dss import WIRE_MSS
    from braid_eval.measure.proxy_pair import SERVER_PORT, BraidProxyPair
    from braid_testbed import LinkSpec, StandardTestbed, ip
    from braid_wf.corpus import browser_args, corpus_server, generator_args, load_pages, server_address

    spec = LinkSpec() if args.host else LinkSpec(rate_mbit=args.rate_mbit, delay_ms=args.delay_ms)
    clients = {ip("client", "wan1"), ip("client", "wan2")}
    tag = f"wf{args.condition[:3]}"
    with StandardTestbed(tag, wan1=spec, wan2=spec) as tb:
        if cond.multipath:
            tb.enable_kernel_pm()
        if cond.scheduler != "default":
            tb.set_scheduler(cond.scheduler)
        for node in ("client", "proxy"):
            for key, value in conditions.settings(cond, args.n_chp):
                tb[node].sysctl(f"net.mptcp.{key}", value)
        pad = conditions.padding_args(cond, args.padding_budget, args.padding_histograms)
        client_args = BraidProxyPair.DEFAULT_CLIENT_ARGS + pad
        meta = {"padding_histograms": str(args.padding_histograms)} if args.padding_histograms else {}
        served = (todo.root / "served.jsonl").resolve() if args.loader == "chromium" else None
        generator = generator_args(args.seed, args.profile)
        with (corpus_server(tb.server, server_address(), served, generator) as server,
              BraidProxyPair(tb, todo.root / "proxy-logs", client_args=client_args, server_args=pad) as pair):
            extra = (*generator, *(("--one-connection",) if args.one_connection else ()),
                     *(browser_args(served) if served else ()))
            failed = collection.collect_batches(
                todo, args.batch, lambda: (tb.capture_wan(1), tb.capture_wan(2)),
                lambda batch: load_pages(tb.client, server, pair.socks, batch, args.gap_ms, extra),
                clients, SERVER_PORT, WIRE_MSS, meta, log)
    return 1 if failed else 0


def cmd_loadercheck(args: argparse.Namespace) -> int:
    """The synthetic loader's traces against the browser's on the same
    loads (braid_wf.loadercheck)."""
    data = {k: load_limited(args.root / c / "all", args) for k, c in (("synthetic", args.synthetic),
                                                                        ("browser", args.browser))}
    checks = [loadercheck.check(args.root, args.synthetic, args.browser, data["synthetic"], data["browser"],
                                attack, repeats=args.repeats, quick=not args.full, seed=args.seed,
                                defense=args.defense or None, progress=log)
              for attack in args.attacks]
    meta = {"root": str(args.root), "synthetic": args.synthetic, "browser": args.browser,
            "browser_version": loadercheck.browser_version(args.root / args.browser / "loads.jsonl"),
            "repeats": args.repeats, "full": args.full, "braid": installed_version(),
            "date": time.strftime("%Y-%m-%d")}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "checks": [c.to_json() for c in checks]}, indent=1) + "\n")
    text = "\n".join([f"# The synthetic loader against a browser ({args.root})", "",
                      *loadercheck.table(checks), ""])
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    return 0


def cmd_confusion(args: argparse.Namespace) -> int:
    """Which sites one attack confuses on a corpus (braid_wf.confusion)."""
    ds = load_limited(args.data, args)
    how = collection.description(args.data)
    seed = args.generator_seed if args.generator_seed is not None else confusion.generator_seed_of(how)
    profile = args.profile or (how["profile"] if how else "small")
    log(f"{args.data}: {ds.monitored} monitored sites; site shapes "
        + (f"from the generator's seed {seed}, {profile} sites" if seed is not None
           else "unknown (no collection.json)"))
    deep = {"epochs": args.epochs, "tam_seconds": args.tam_seconds} if args.attack in DEEP_ATTACKS else {}
    started = time.monotonic()
    result = confusion.confusion(ds, args.attack, quick=not args.full, seed=args.seed, generator_seed=seed,
                                 profile=profile,
                                 progress=log, n_jobs=args.jobs, **deep)
    monitored = sum(1 for label in ds.labels if label >= 0)
    corpus = (captured_corpus(args.data, how, ds.monitored, monitored, 0)
              if how else f"{args.data}, {ds.monitored} sites, {monitored} monitored loads")
    meta = {"data": str(args.data), "corpus": corpus, "attack": args.attack, "full": args.full, "seed": args.seed,
            "generator_seed": seed, "profile": profile, "epochs": args.epochs, "max_instances": args.max_instances,
            "braid": installed_version(), "date": time.strftime("%Y-%m-%d"),
            "elapsed_s": round(time.monotonic() - started, 1)}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "confusion": result.to_json()}, indent=1) + "\n")
    emit("\n".join([f"# Which sites {ATTACK_NAMES[args.attack]} confuses ({args.data})", "",
                    *confusion.table(result, args.top)]), args.report)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m braid_wf.cli", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    sub = p.add_subparsers(dest="cmd", required=True)

    def limits(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--max-sites", type=int, help="use only the first N monitored sites")
        sp.add_argument("--max-instances", type=int, help="use at most N loads per site")
        sp.add_argument("--max-unmonitored", type=int, help="use at most N unmonitored loads")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--attacks", type=lambda s: s.split(","), default=list(ATTACKS),
                        help="comma-separated of kfp,knn,cumul,df,tiktok,rf (default kfp,knn,cumul; the deep "
                        "attacks df, tiktok and rf need the wf-deep extra and are slow on a CPU)")
        sp.add_argument("--repeats", type=int, default=3, help="random splits (default 3; thesis 5)")
        sp.add_argument("--copies", type=int, default=2,
                        help="simulated protections per training trace (thesis 7; default 2)")
        sp.add_argument("--full", action="store_true", help="full-size attacks (1000 trees, full SVM grid)")
        sp.add_argument("--open-world", action="store_true", help="also the open world (needs unmonitored loads)")
        sp.add_argument("--seed", type=int, default=1, help="seed of splits and synthetic loads (default 1)")
        sp.add_argument("--report", type=Path, help="write the Markdown report here too")

    q = sub.add_parser("quick", help="synthetic corpus: attacks work, shuffled labels at chance")
    common(q)
    q.add_argument("--sites", type=int, default=10, help="synthetic monitored sites (default 10)")
    q.add_argument("--instances", type=int, default=12, help="synthetic loads per site (default 12)")
    q.add_argument("--unmonitored", type=int, default=60, help="synthetic unmonitored loads (default 60)")
    e = sub.add_parser("evaluate", help="attacks on a dataset directory (WF format)")
    common(e)
    e.add_argument("--data", type=Path, required=True, help="original (undefended) traces")
    e.add_argument("--defense", choices=sorted(hywf_sim.SPLITS), help="protect training/test traces by simulation")
    e.add_argument("--protected", type=Path, help="captured protected traces of the same loads (same names)")
    e.add_argument("--label", help="the defence's name in the table (default: HyWF, or the "
                   "condition directory of --protected)")
    limits(e)
    s = sub.add_parser("synth", help="write a simulated dataset (not captures) in WF format")
    s.add_argument("--out", type=Path, required=True, help="directory for the WF-format dataset")
    s.add_argument("--sites", type=int, default=50, help="monitored sites (default 50)")
    s.add_argument("--instances", type=int, default=30, help="loads per site (default 30)")
    s.add_argument("--unmonitored", type=int, default=500, help="unmonitored loads (default 500)")
    s.add_argument("--seed", type=int, default=1, help="corpus seed (default 1)")
    s.add_argument("--profile", choices=PROFILES, default="small", help="how sites are made (default small)")
    c = sub.add_parser("collect", help="capture loads through braid-proxy on the testbed")
    c.add_argument("--out", type=Path, default=Path("out/wf"),
                   help="datasets root; the condition's traces go to OUT/CONDITION (default out/wf)")
    c.add_argument("--condition", choices=sorted(CONDITIONS), default="default",
                   help="scheduler and padding at both ends; tor-*: Tor mode, through a private Tor network "
                        "and the braid bridge (default: default)")
    c.add_argument("--host", action="store_true", help="host kernel: default scheduler, unshaped links")
    c.add_argument("--sites", type=int, default=50, help="monitored sites (default 50)")
    c.add_argument("--instances", type=int, default=30, help="loads per monitored site (default 30)")
    c.add_argument("--unmonitored", type=int, default=0, help="unmonitored sites, one load each (default 0)")
    c.add_argument("--batch", type=int, default=50, help="loads per capture (default 50)")
    c.add_argument("--gap-ms", type=int, default=1500, help="pause between loads, ms (default 1500)")
    c.add_argument("--one-connection", action="store_true",
                   help="each load over one connection (HTTP/2-like; padding then spans the load); "
                        "stored as CONDITION-1conn")
    c.add_argument("--loader", choices=("synthetic", "chromium"), default="synthetic",
                   help="who loads the pages: websites.py's loader (default), or headless Chromium loading "
                        "them as web pages (stored as CONDITION-chromium)")
    c.add_argument("--rate-mbit", type=float, default=20, help="each WAN's rate (default 20)")
    c.add_argument("--delay-ms", type=float, default=10, help="each WAN's one-way delay (default 10)")
    c.add_argument("--seed", type=int, default=1, help="corpus and load-variation seed (default 1)")
    c.add_argument("--profile", choices=PROFILES, default="small",
                   help="how the corpus's sites are made: small (2-36 objects) or web (shaped like today's "
                   "home pages, 66 objects and 2.6 MB a median one; websites.py's doc; default small)")
    c.add_argument("--padding-budget", type=float, default=conditions.PADDING_BUDGET,
                   help="the padded conditions (ap, hywf-ap, hywf-ap-long): braid's adaptive padding at both "
                   "ends, padding bytes at most this many times each end's data bytes (default 0.4)")
    c.add_argument("--padding-histograms", type=Path,
                   help="the padded conditions: delay histograms for both ends (JSON, as `wf "
                   "histograms` writes; default: braid-proxy's built-in ones)")
    c.add_argument("--n-chp", type=int, default=conditions.N_CHP,
                   help="hywf-ap and hywf-ap-long: the kernel's p-drift at both ends, mean packets between redraws of "
                   "the split (net.mptcp.hywf_nchp; default 100, the thesis's)")
    w = sub.add_parser("wirecheck", help="attacks on captured protected traces vs the simulator on the same loads",
                       description=wirecheck.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common(w)
    w.add_argument("--root", type=Path, default=Path("out/wf"), help="collect's --out (default out/wf)")
    w.add_argument("--conditions", nargs="+", default=["hywf"],
                   help="collected conditions to check (default hywf; e.g. hywf hywf-ap hywf-ap-1conn)")
    w.add_argument("--originals", type=Path,
                   help="the unpadded loads, both networks merged (default ROOT/hywf/all)")
    w.add_argument("--padding-budget", type=float, default=conditions.PADDING_BUDGET,
                   help="padded conditions: the budget they were collected with (default 0.4, collect's)")
    w.add_argument("--padding-histograms", type=Path,
                   help="padded conditions: the histograms they were collected with (default braid-proxy's)")
    w.add_argument("--n-chp", type=int, default=conditions.N_CHP,
                   help="hywf-ap: the p-drift it was collected with (default 100, collect's)")
    w.add_argument("--json", type=Path, help="write the checks as JSON here (rewritten after each)")
    w.add_argument("--update", type=Path, metavar="JSON",
                   help="keep the checks of this earlier --json file (same loads and simulator) that this run "
                   "does not redo, e.g. --attacks kfp --repeats 12 for more splits of one attack")
    limits(w)
    lc = sub.add_parser("loadercheck", help="the synthetic loader's traces against a browser's on the same pages",
                        description=loadercheck.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common(lc)
    lc.set_defaults(attacks=["kfp", "cumul"], repeats=5)
    lc.add_argument("--root", type=Path, default=Path("out/wfl"), help="collect's --out (default out/wfl)")
    lc.add_argument("--synthetic", default="single", help="the synthetic loader's condition (default single)")
    lc.add_argument("--browser", default="single-chromium",
                    help="the same condition loaded with --loader chromium (default single-chromium)")
    lc.add_argument("--defense", choices=(*loadercheck.DEFENSES, ""), default="hywf",
                    help="also each attack on network 1 under this simulated split, for both loaders "
                    "(default hywf; '' for none)")
    lc.add_argument("--json", type=Path, help="write the comparison as JSON here")
    limits(lc)
    cf = sub.add_parser("confusion", help="which sites an attack confuses, and whether they look alike",
                        description=confusion.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cf.add_argument("--data", type=Path, required=True, help="the loads (WF format, e.g. collect's OUT/COND/all)")
    cf.add_argument("--attack", choices=ALL_ATTACKS, default="kfp", help="the attack (default kfp)")
    cf.add_argument("--full", action="store_true", help="the attack at full size (1000 trees; deep: as published)")
    cf.add_argument("--seed", type=int, default=1, help="seed of the split and the attack (default 1)")
    cf.add_argument("--generator-seed", type=int,
                    help="the site generator's seed, for the sites' shapes (default: the corpus's "
                    "collection.json, when its loads are websites.py's sites)")
    cf.add_argument("--profile", choices=PROFILES,
                    help="the site generator's profile, for the sites' shapes (default: the corpus's, else small)")
    cf.add_argument("--epochs", type=int, help="a deep attack's epochs (default the paper's 30)")
    cf.add_argument("--tam-seconds", type=float, help="RF: the time its TAM spans (default 80 s)")
    cf.add_argument("--jobs", type=int, default=default_jobs(), help="k-FP's threads (default: all CPUs)")
    cf.add_argument("--top", type=int, default=15, help="confused pairs in the report (default 15)")
    cf.add_argument("--json", type=Path, help="write the tally as JSON here")
    cf.add_argument("--report", type=Path, help="write the Markdown report here too")
    limits(cf)
    h = sub.add_parser("histograms", help="fit adaptive padding's delay histograms on a dataset's loads",
                       description="Fit WTF-PAD's H_B (between bursts) and H_G (in bursts) per direction on the "
                       "loads of a WF-format dataset (e.g. collect's OUT/CONDITION/all) and write them in the "
                       "JSON braid-proxy reads (padding_histograms). Prints each histogram's spread.")
    h.add_argument("--data", type=Path, required=True, help="the loads to fit on (WF format)")
    h.add_argument("--out", type=Path, required=True, help="the histograms file to write")
    limits(h)
    h.add_argument("--seed", type=int, default=1, help="seed of the printed spread's draws (default 1)")
    k = sub.add_parser("costs", help="page-load time and bandwidth overhead per collected condition")
    k.add_argument("--root", type=Path, default=Path("out/wf"), help="collect's --out")
    k.add_argument("--baseline", default="default", help="condition the others are compared with (default: default)")
    k.add_argument("--report", type=Path, help="write the Markdown table here too")
    d = sub.add_parser("defenses", help="none / hywf / AP / hywf+AP / FRONT side by side with overhead",
                       description="Simulated trace-level defences (defenses/) against the attacks, with the "
                       "bandwidth overhead measured on the corpus. Quick by default (8 sites x 10 loads + 40 "
                       "unmonitored, 200 trees); --full: 50 x 30 + 500, 1000 trees. The open world is "
                       "evaluated whenever the corpus has unmonitored loads.")
    common(d)
    d.set_defaults(attacks=["kfp"])
    d.add_argument("--defenses", type=_defense_list, default=["none", "hywf", "ap", "hywf-ap", "front"],
                   help=f"comma-separated of {','.join(defense_catalog.NAMES)} (default none,hywf,ap,hywf-ap,front); "
                   "a name may carry settings of its own, NAME:FIELD=VALUE with FIELD one of "
                   f"{','.join(defense_catalog.SETTINGS)}, so that one run compares a defence at several "
                   "settings: hywf,hywf:ncons=100,hywf:ncons=300")
    d.add_argument("--data", type=Path, help="a dataset in WF format instead of the synthetic corpus")
    d.add_argument("--sites", type=int, help="synthetic monitored sites (quick 8, full 50)")
    d.add_argument("--profile", choices=PROFILES, default="small",
                   help="how the synthetic corpus's sites are made (websites.py; default small)")
    d.add_argument("--instances", type=int, help="synthetic loads per site (quick 10, full 30)")
    d.add_argument("--unmonitored", type=int, help="synthetic unmonitored loads (quick 40, full 500; 0: closed only)")
    limits(d)
    d.add_argument("--budget", type=float, default=0.4,
                   help="AP: max dummy bytes per real byte of each end (default 0.4, the target's overhead bound)")
    d.add_argument("--idle", type=float, default=defense_catalog.DefenseParams.idle,
                   help="no padding this many seconds after the last real packet (default 1)")
    d.add_argument("--n-chp", type=int, default=hywf_sim.N_CHP,
                   help="hywf-ap's (and hywf-drift's) p-drift: mean packets between p redraws "
                   "(thesis 100; 0 = off); plain hywf does not drift")
    d.add_argument("--ncons", type=int, default=hywf_sim.NCONS,
                   help="the hywf splits' mean burst in packets, as the kernel's hywf_ncons sysctl "
                   f"(default {hywf_sim.NCONS}, the thesis's)")
    d.add_argument("--front-n", type=int, default=SYNTH_FRONT_N,
                   help=f"FRONT: max dummies per end, N (default {SYNTH_FRONT_N})")
    d.add_argument("--jobs", type=int, default=default_jobs(),
                   help="worker processes for the corpus, defence simulation and features, and k-FP's "
                   "threads (default: all CPUs)")
    d.add_argument("--json", type=Path, help="write the results as JSON here (rewritten after every cell)")
    d.add_argument("--plot", type=Path, help="plot accuracy against overhead here (.png, .svg, .pdf)")
    d.add_argument("--epochs", type=int, help="the deep attacks' training epochs (default: the papers' 30; "
                   "quick 10)")
    d.add_argument("--curve-every", type=int, default=0, metavar="N",
                   help="deep attacks: also score the model on the test loads every N epochs and after the "
                   "last (a learning curve in the JSON; the training is the same; default 0: off)")
    d.add_argument("--checkpoints", type=Path, default=DEEP_CHECKPOINTS, metavar="DIR",
                   help="deep attacks: save each cell's training here after every epoch; the same command "
                   "started again goes on from there, and a finished cell is not trained again (default "
                   f"{DEEP_CHECKPOINTS}; tens of MB a cell)")
    d.add_argument("--no-checkpoints", dest="checkpoints", action="store_const", const=None,
                   help="deep attacks: train from the first epoch, save nothing")
    d.add_argument("--tam-seconds", type=float,
                   help="RF: the time its 1800-slot TAM spans (default the paper's 80 s)")
    d.add_argument("--deadline", type=float,
                   help="seconds from the start: skip a cell whose estimated end is later (closed world first)")
    d.add_argument("--base-rate", type=float, default=BASE_RATE,
                   help=f"open world: share of loads to monitored sites for precision (default {BASE_RATE})")
    d.add_argument("--front-w", type=_window,
                   help=f"FRONT: W_MIN,W_MAX in s (default {SYNTH_FRONT_W_S[0]},{SYNTH_FRONT_W_S[1]}: the paper's "
                   f"1-14 s scaled to the synthetic corpus's loads of {SYNTH_LOAD_S:g} s median; with --data, "
                   "scaled again to its loads' median duration)")
    args = p.parse_args(argv)
    if args.cmd == "defenses":
        try:
            defense_catalog.check_params(
                defense_catalog.DefenseParams(budget=args.budget, idle=args.idle, n_chp=args.n_chp,
                                              ncons=args.ncons, front_n=args.front_n),
                names={f: "--" + f.replace("_", "-") for f in defense_catalog.SETTINGS})
        except ValueError as err:
            p.error(f"defenses: {err}")
        if args.jobs < 1 or (args.epochs is not None and args.epochs < 1) or not 0 < args.base_rate < 1 \
                or args.repeats < 1 or args.copies < 1 or args.curve_every < 0:
            p.error("defenses: --jobs, --epochs, --repeats, --copies >= 1, --curve-every >= 0 and "
                    "0 < --base-rate < 1 are required")
    if getattr(args, "attacks", None):
        bad = [a for a in args.attacks if a not in ALL_ATTACKS]
        if bad:
            p.error(f"unknown attack(s) {bad}; choose from {', '.join(ALL_ATTACKS)}")
        if any(a in DEEP_ATTACKS for a in args.attacks):
            try:
                require_jax()
            except ImportError as err:
                p.error(str(err))
    if args.cmd == "wirecheck":
        if args.repeats < 1 or args.padding_budget < 0 or args.n_chp < 0:
            p.error("wirecheck: --repeats >= 1, --padding-budget >= 0 and --n-chp >= 0 are required")
        try:
            for condition in args.conditions:
                wirecheck.simulator_of(condition)
            args.earlier = updated_checks(args.update, args) if args.update else ([], [])
        except ValueError as err:
            p.error(str(err))
    if args.cmd == "confusion":
        if args.top < 1 or args.jobs < 1 or (args.epochs is not None and args.epochs < 1):
            p.error("confusion: --top, --jobs and --epochs >= 1 are required")
        if args.attack in DEEP_ATTACKS:
            try:
                require_jax()
            except ImportError as err:
                p.error(str(err))
    if args.cmd == "loadercheck" and args.repeats < 1:
        p.error("loadercheck: --repeats >= 1 is required")
    if args.cmd == "evaluate" and args.defense and args.protected:
        p.error("--defense (simulated) and --protected (captured) are alternatives")
    if args.cmd == "quick":
        args.defense = "hywf"
        return cmd_quick(args)
    try:
        return {"evaluate": cmd_evaluate, "synth": cmd_synth, "collect": cmd_collect,
                "costs": cmd_costs, "defenses": cmd_defenses, "histograms": cmd_histograms,
                "wirecheck": cmd_wirecheck, "loadercheck": cmd_loadercheck,
                "confusion": cmd_confusion}[args.cmd](args)
    except (FileNotFoundError, ValueError) as err:  # bad dataset paths or files
        raise SystemExit(f"wf {args.cmd}: {err}")


if __name__ == "__main__":
    sys.exit(main())

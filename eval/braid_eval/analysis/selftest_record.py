"""Record upstream's simult_flows.sh runs (kernel/selftests) as result data.

Each run's log (what ``kernel/selftests --sched NAME simult_flows.sh``
printed) gives, per test, the transfer time and the limit upstream computes
from the links' rates and delays; this writes them, per scheduler, with
the provenance of the run, for RESULTS.md (``braid_eval.analysis.summary``):

    kernel/selftests --sched default simult_flows.sh > default.log
    kernel/selftests --sched bernoulli simult_flows.sh > bernoulli.log
    python3 -m braid_eval.analysis.selftest_record --out results/simult-flows.json \\
        default=default.log bernoulli=bernoulli.log
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from braid_eval.analysis.provenance import installed_version, provenance

# "03 balanced bwidth with unbalanced delay   7541 max 7906   [ OK ]", or on
# failure "... transfer slower than expected! runtime 7928 ms, expected
# 7906 ms[...] max 7906   [FAIL]" (one runtime per side that timed it);
# "[IGNO] (flaky)" is a failure of a test upstream marks flaky.
ROW = re.compile(r"^(?P<n>\d\d) (?P<rest>.*?)\s+max (?P<max>\d+)\s+"
                 r"\[\s*(?P<verdict>OK|FAIL|IGNO)\s*\](?: \(flaky\))?\s*$")
RUNTIME = re.compile(r"runtime (\d+) ms")
TRAILING_MS = re.compile(r"^(?P<name>.*?\D)\s*(?P<ms>\d+)$")
KERNEL = re.compile(r"^selftests: \S+ under net\.mptcp\.scheduler=\S+(?: net\.\S+=\S+)* in (\S+)$", re.M)


def parse(text: str) -> list[dict[str, Any]]:
    """One entry per test: number, name, slowest side's time, limit, ok."""
    rows = []
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        rest = m["rest"]
        times = [int(t) for t in RUNTIME.findall(rest)]
        if times:
            name = rest.split("transfer slower than expected!")[0].strip()
        else:
            # a name longer than its column runs into the number
            t = TRAILING_MS.match(rest.rstrip())
            if not t:
                continue
            name, times = t["name"].strip(), [int(t["ms"])]
        rows.append({"n": int(m["n"]), "test": name, "ms": max(times), "max_ms": int(m["max"]),
                     "ok": m["verdict"] == "OK"})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    p.add_argument("--out", type=Path, required=True, help="the result file to write (JSON)")
    p.add_argument("logs", nargs="+", metavar="SCHED=LOG", help="a scheduler and its run's log")
    args = p.parse_args(argv)
    results: dict[str, list[dict[str, Any]]] = {}
    kernels = set()
    for item in args.logs:
        sched, sep, log = item.partition("=")
        if not sep or not sched or not log:
            p.error(f"{item!r}: give SCHED=LOG, e.g. bernoulli=bernoulli.log")
        try:
            text = Path(log).read_text()
        except OSError as err:
            p.error(f"{log}: {err.strerror}")
        rows = parse(text)
        if not rows:
            p.error(f"{log}: no simult_flows.sh result line (is it the output of kernel/selftests?)")
        results[sched] = rows
        kernels.update(KERNEL.findall(text))
    params = {"test": "simult_flows.sh", "schedulers": list(results), **provenance()}
    if kernels:  # the guest's kernel, not the recording host's
        params["kernel"] = ", ".join(sorted(kernels))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"params": params, "results": results}, indent=2) + "\n")
    print(f"selftest_record: {len(results)} schedulers into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

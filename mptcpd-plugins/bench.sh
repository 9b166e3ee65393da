#!/bin/sh
# Failover benchmark, gwsteer vs the in-kernel path manager: experiment E3
# (eval/braid_eval/experiments/failover.py). Arguments go to it: --full, --outages,
# --runs, --mbit, --out (default out/e3 in the repository); --help lists them.
# Root (network namespaces); the host kernel is enough.
set -e
cd "$(dirname "$0")"
make -s gwsteer.so gwsteer-check
cd ..
PYTHONPATH="$PWD/eval${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m braid_eval.experiments.failover "$@"

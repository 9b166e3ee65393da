#!/bin/sh
# braid-proxy benchmark (not a test): braid-proxy vs direct MPTCP vs
# microsocks, side by side in network namespaces. Needs root. Options are
# passed to bench/bench.py (--help lists them).
set -eu
cd "$(dirname "$0")"
exec python3 bench/bench.py "$@"

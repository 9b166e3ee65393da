#!/bin/sh
# braid-proxy benchmark (not a test): braid-proxy vs direct MPTCP vs a
# shadowsocks-libev pair vs microsocks, side by side in network namespaces.
# Needs root. Options are passed to bench/bench.py (--help lists them).
#
#   proxy/bench.sh [OPTIONS]         on the host kernel (no netem: veth RTT)
#   proxy/bench.sh --vm [OPTIONS]    setup latency in braid's VM kernel, each
#                                    WAN netem-delayed (default 10 ms RTT)
set -eu
# No cd: a relative --json path is the caller's.
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --vm ]; then
    shift
    # Build on the host: the guest's CPU is emulated (TCG) and slow.
    bin=$(dirname "$here")/out/proxy-bin
    mkdir -p "$bin"
    (cd "$here" && go build -o "$bin/" ./cmd/braid-proxy ./cmd/braid-loadgen)
    export BRAID_PROXY_BIN="$bin"
    exec "$(dirname "$here")/kernel/vm" run --timeout "${BRAID_BENCH_VM_TIMEOUT:-1200}" -- \
        python3 "$here/bench/bench.py" --setup-only --wan-delay-ms 5 --setup-conns 150 "$@"
fi
exec python3 "$here/bench/bench.py" "$@"

#!/bin/bash
# braid-proxy test suite: gofmt, go vet, unit + loopback end-to-end tests,
# a short run of every fuzz target, and (as root) the network-namespace
# end-to-end tests. Exits non-zero on the first failure.
#
#   proxy/test.sh                 everything (~3-4 minutes)
#   FUZZTIME=30s proxy/test.sh    longer fuzzing
#   SKIP_NETNS=1 proxy/test.sh    no namespace tests
#   SKIP_RACE=1 proxy/test.sh     no race-detector pass
set -euo pipefail
cd "$(dirname "$0")"
FUZZTIME=${FUZZTIME:-50000x}  # executions per target (count, not wall time: no
# engine time-outs on a loaded machine); FUZZTIME=30s for wall-clock runs
# The end-to-end handshake fuzzer pays a loopback connection per input
# (~0.4 ms): fewer executions keep it to a few seconds.
E2E_FUZZTIME=${E2E_FUZZTIME:-5000x}

step() { printf '\n=== %s\n' "$*"; }

step "gofmt"
bad=$(gofmt -l .)
if [ -n "$bad" ]; then
    echo "gofmt would change:"; echo "$bad"; exit 1
fi

step "go vet"
go vet ./...

step "go test (unit + loopback end-to-end)"
go test -count=1 ./...

if [ "${SKIP_RACE:-0}" != 1 ]; then
    step "go test -race (short mode)"
    go test -race -short -count=1 ./...
fi

# fuzz_one PKG TARGET LOG: one fuzz target's run, its output in LOG.
fuzz_one() {
    local pkg=$1 target=$2 log=$3 ft=$FUZZTIME attempt
    [ "$target" = FuzzServerHandshake ] && ft=$E2E_FUZZTIME
    # -parallel 1: one worker per target; fuzzing is a smoke test here.
    # A loaded machine can make the fuzz coordinator itself time out
    # ("context deadline exceeded", no failing input): retry that once.
    for attempt in 1 2; do
        if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$ft" -parallel 1 "$pkg" >"$log" 2>&1; then
            return 0
        fi
        grep -q 'Failing input written' "$log" && return 1
        grep -q 'context deadline exceeded' "$log" || return 1
        echo "    (fuzz engine timed out without a finding; retrying)" >>"$log.retries"
    done
    return 1
}

# Two targets at a time: one fuzz worker and its coordinator use about
# 1.2 cores, so a second target in parallel halves the wall time on a
# 2-core machine at the same number of executions.
FUZZ_JOBS=${FUZZ_JOBS:-2}
step "fuzz targets, $FUZZTIME each, $FUZZ_JOBS at a time"
fuzzlogs=$(mktemp -d)
trap 'rm -rf "$fuzzlogs"' EXIT
targets=()
for pkg in $(go list ./...); do
    for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
        targets+=("$pkg $target")
    done
done
pids=()
for i in "${!targets[@]}"; do
    read -r pkg target <<<"${targets[$i]}"
    if [ "${#pids[@]}" -ge "$FUZZ_JOBS" ]; then
        wait -n || true
        pids=($(jobs -rp))
    fi
    fuzz_one "$pkg" "$target" "$fuzzlogs/$i.log" && echo 0 >"$fuzzlogs/$i.rc" || echo 1 >"$fuzzlogs/$i.rc" &
    pids=($(jobs -rp))
done
wait
failed=0
for i in "${!targets[@]}"; do
    echo "--- ${targets[$i]}"
    [ -f "$fuzzlogs/$i.log.retries" ] && cat "$fuzzlogs/$i.log.retries"
    if [ "$(cat "$fuzzlogs/$i.rc")" = 0 ]; then
        tail -n 1 "$fuzzlogs/$i.log"
    else
        cat "$fuzzlogs/$i.log"
        failed=1
    fi
done
[ $failed = 0 ] || exit 1

if [ "${SKIP_NETNS:-0}" = 1 ]; then
    step "network-namespace tests SKIPPED (SKIP_NETNS=1)"
elif [ "$(id -u)" != 0 ]; then
    step "network-namespace tests SKIPPED (need root)"
else
    step "network-namespace end-to-end tests"
    python3 -m pytest -q -p no:cacheprovider tests/
fi
step "all proxy tests passed"

#!/bin/bash
# braid-proxy test suite: gofmt, go vet, unit + loopback end-to-end tests,
# a short run of every fuzz target, and (as root) the network-namespace
# end-to-end tests. Exits non-zero on the first failure.
#
#   proxy/test.sh                 everything (~2 minutes on 2 cores)
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

# Every package, the loopback end-to-end tests first: the longest package
# (mostly waiting on deadlines), started first, runs while the others take
# go test's second slot in turn (race-built binaries each sleep 1 s at exit)
# instead of after them.
e2e=braid/proxy/internal/e2e
gopkgs=("$e2e" $(go list ./... | grep -vx "$e2e"))
# -vet=off: go vet above ran every analyser over the same packages and test
# files (go test's own vet pass is a subset; no file has a race build tag).
# -parallel 8: only the e2e tests that wait for a server's deadline call
# t.Parallel (internal/e2e/doc.go); they idle meanwhile, so more of them at
# once than the 2 cores' default of 2 costs no CPU and saves their waits.
step "go test (unit + loopback end-to-end)"
go test -count=1 -vet=off -parallel 8 "${gopkgs[@]}"

# -p: at least 4 test binaries at once. A race-built binary sleeps 1 s at
# exit (GORACE atexit_sleep_ms, for late race reports), so go test's default
# of one per core left most of this stage idle (0.4 of 2 cores busy): more
# of them overlap their sleeps, not their work.
if [ "${SKIP_RACE:-0}" != 1 ]; then
    step "go test -race (short mode)"
    nproc=$(nproc)
    go test -race -short -count=1 -vet=off -parallel 8 -p $((nproc > 4 ? nproc : 4)) "${gopkgs[@]}"
fi

# Each package's fuzz-instrumented test binary is built once, one package
# at a time (go build itself uses every core), and its targets run from it:
# `go test -fuzz` per target would link a binary per target, and two of them
# at once compile the same instrumented dependencies twice on a cold cache.
# The binary runs as `go test -fuzz` runs it: in the package's directory
# (testdata/fuzz), with go's fuzz cache for the package.
fuzzlogs=$(mktemp -d)
trap 'rm -rf "$fuzzlogs"' EXIT
fuzzcache=$(go env GOCACHE)/fuzz

# fuzz_one PKG DIR BIN TARGET LOG: one fuzz target's run, its output in LOG.
fuzz_one() {
    local pkg=$1 dir=$2 bin=$3 target=$4 log=$5 ft=$FUZZTIME attempt
    [ "$target" = FuzzServerHandshake ] && ft=$E2E_FUZZTIME
    # -parallel 1: one worker per target; fuzzing is a smoke test here.
    # A loaded machine can make the fuzz coordinator itself time out
    # ("context deadline exceeded", no failing input): retry that once.
    for attempt in 1 2; do
        if (cd "$dir" && "$bin" -test.paniconexit0 -test.timeout=10m0s -test.run='^$' \
            -test.fuzz="^${target}\$" -test.fuzztime="$ft" -test.parallel=1 \
            -test.fuzzcachedir="$fuzzcache/$pkg") >"$log" 2>&1; then
            # Built as go test -fuzz builds it, or fuzzing is blind.
            ! grep -q 'not built with coverage instrumentation' "$log"
            return
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
# Packages with a fuzz target in a test file of this build (gofmt puts
# every "func Fuzz" at a line's start); their binaries list the targets.
targets=()
while read -r pkg dir files; do
    [ -n "$files" ] && (cd "$dir" && grep -q '^func Fuzz' $files) || continue
    bin=$fuzzlogs/bin/${pkg//\//_}.test
    go test -c -fuzz '^Fuzz' -o "$bin" "$pkg"
    for target in $(cd "$dir" && "$bin" -test.list '^Fuzz' | grep '^Fuzz' || true); do
        targets+=("$pkg $dir $bin $target")
    done
done < <(go list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)
[ "${#targets[@]}" -gt 0 ] || { echo "no fuzz targets found"; exit 1; }
pids=()
for i in "${!targets[@]}"; do
    read -r pkg dir bin target <<<"${targets[$i]}"
    if [ "${#pids[@]}" -ge "$FUZZ_JOBS" ]; then
        wait -n || true
        pids=($(jobs -rp))
    fi
    fuzz_one "$pkg" "$dir" "$bin" "$target" "$fuzzlogs/$i.log" && echo 0 >"$fuzzlogs/$i.rc" || echo 1 >"$fuzzlogs/$i.rc" &
    pids=($(jobs -rp))
done
wait
failed=0
for i in "${!targets[@]}"; do
    read -r pkg dir bin target <<<"${targets[$i]}"
    echo "--- $pkg $target"
    [ -f "$fuzzlogs/$i.log.retries" ] && cat "$fuzzlogs/$i.log.retries"
    if [ "$(cat "$fuzzlogs/$i.rc")" = 0 ]; then
        # The last progress line (executions) and PASS.
        grep '^fuzz: elapsed' "$fuzzlogs/$i.log" | tail -n 1
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

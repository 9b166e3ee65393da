#!/bin/sh
# braid-proxy's network-namespace tests that depend on braid's own kernel
# (6.12 + braid patches, under the VM that kernel/vm boots): the ones marked
# braid_kernel, which need its config (netfilter NAT for the transparent
# redirect, netem for shaped WANs) or its schedulers (hywf). Every
# namespace test also runs on the host kernel (proxy/test.sh); braid-proxy's
# own logic does not change with the kernel, and under TCG each test's
# testbed alone takes ~30 s to build. Needs root and the cached kernel
# (kernel/build). scripts/test runs it through scripts/test-vm, which boots
# one VM for every VM suite.
#
#   proxy/vm-test.sh                          the braid_kernel tests (~3 min, boot included)
#   BRAID_PROXY_VM_TESTS="not nothing" proxy/vm-test.sh   every namespace test (~9.5 min)
#   BRAID_PROXY_VM_TIMEOUT=900 proxy/vm-test.sh
#
# On the host it builds the Go binaries (the guest sees the host's
# filesystem, and its CPU is emulated (TCG), so building inside would take
# minutes; braid-pt is for the VM stage's Tor suite), then boots the VM
# and runs itself inside; BRAID_VM_PREPARE_ONLY=1 stops after the build.
# The bulk test moves BRAID_PROXY_BULK_MIB (default here 32) MiB each way
# instead of 512: every byte is copied and
# AES-GCM-sealed by emulated instructions, and the checks (byte-exact, both
# WANs carry a share) do not need a gigabyte; the host run keeps the full
# 1 GiB. Its WANs are shaped to BRAID_PROXY_BULK_WAN_MBIT (default here 6)
# Mbit/s each: the emulated CPU relays ~16 Mbit/s a direction, and a
# CPU-bound stream never fills one subflow, so MPTCP's default scheduler has
# no reason to use the second. The concurrency test opens its 1,000
# connections 100 at a time (BRAID_PROXY_CONCURRENT): 1,000 at once take
# longer than the proxies' 10 s handshake timeouts under emulation; and it
# opens 300 of them (BRAID_PROXY_LOAD_CONNS), not 1,000: protocol v2's
# handshake (four X25519 operations) runs on the emulated CPU.
set -eu
cd "$(dirname "$0")/.."
bin=$PWD/out/proxy-bin
export BRAID_PROXY_BIN="$bin"
export BRAID_PROXY_BULK_MIB="${BRAID_PROXY_BULK_MIB:-32}"
export BRAID_PROXY_CONCURRENT="${BRAID_PROXY_CONCURRENT:-100}"
export BRAID_PROXY_LOAD_CONNS="${BRAID_PROXY_LOAD_CONNS:-300}"
export BRAID_PROXY_BULK_WAN_MBIT="${BRAID_PROXY_BULK_WAN_MBIT:-6}"
export PYTHONPATH="$PWD/eval:$PWD/kernel"
if [ "${BRAID_IN_VM:-0}" != 1 ]; then
	mkdir -p "$bin"
	(cd proxy && go build -o "$bin/" ./cmd/braid-proxy ./cmd/braid-loadgen ./cmd/braid-pt)
	[ "${BRAID_VM_PREPARE_ONLY:-0}" = 1 ] && exit 0
	exec kernel/vm run --timeout "${BRAID_PROXY_VM_TIMEOUT:-900}" -- proxy/vm-test.sh
fi
exec python3 -m pytest -v -p no:cacheprovider --durations=0 -m "${BRAID_PROXY_VM_TESTS:-braid_kernel}" proxy/tests

#!/bin/sh
# braid-openvpn's namespace tests in braid's kernel (6.12 + braid patches,
# the VM that kernel/vm boots, TCG-emulated CPU): the same tests as on the
# host (proxy/openvpn/test.sh), checking that braid's kernel config carries
# them (tun, TCPOPTSTRIP, MASQUERADE, MPTCP endpoints). Transfers are
# smaller and the down/up test paces at 8 Mbit/s: every byte is encrypted by
# emulated instructions. scripts/vm-suites runs it inside the suite's VM;
# alone:
#
#   proxy/openvpn/vm-test.sh                   (~5 min, boot included)
#   BRAID_OVPN_VM_TIMEOUT=1200 proxy/openvpn/vm-test.sh
#
# On the host it builds braid-proxy (for the braid-proxy-over-tunnels test;
# the guest sees the host's filesystem), then boots the VM and runs itself
# inside; BRAID_VM_PREPARE_ONLY=1 stops after the build.
set -eu
cd "$(dirname "$0")/../.."
bin=$PWD/out/proxy-bin
export BRAID_PROXY_BIN="$bin"
export BRAID_OVPN_BULK_MIB="${BRAID_OVPN_BULK_MIB:-16}"
export BRAID_OVPN_PACE_MBIT="${BRAID_OVPN_PACE_MBIT:-8}"
export BRAID_OVPN_PACED_S="${BRAID_OVPN_PACED_S:-30}"
export PYTHONPATH="$PWD/eval:$PWD/kernel:$PWD/proxy/openvpn:$PWD/proxy/openvpn/tests"
if [ "${BRAID_IN_VM:-0}" != 1 ]; then
	mkdir -p "$bin"
	(cd proxy && go build -o "$bin/" ./cmd/braid-proxy ./cmd/braid-loadgen)
	[ "${BRAID_VM_PREPARE_ONLY:-0}" = 1 ] && exit 0
	exec kernel/vm run --timeout "${BRAID_OVPN_VM_TIMEOUT:-1200}" -- proxy/openvpn/vm-test.sh
fi
# In the suite (scripts/vm-suites) the wire check that needs braid's
# kernel at run time: the full tunnel (OpenVPN over MPTCP in a tun device,
# NATed out). The host stage runs them all; the per-gateway tunnels need
# nothing of braid's kernel that its build does not check (TCPOPTSTRIP,
# tun, MPTCP in its config fragment), and cost 85 s here under TCG.
# BRAID_OVPN_VM_TESTS="" runs everything here.
exec python3 -m pytest -v -s -p no:cacheprovider --durations=0 \
	-k "${BRAID_OVPN_VM_TESTS-full_tunnel}" proxy/openvpn/tests

#!/bin/sh
# gwsteer's integration tests (tests/test_integration.py) inside braid's own
# kernel (6.12 + braid's patches), booted under TCG by kernel/vm: the tests
# test.sh runs against the host kernel, against the kernel braid ships.  The
# config-parity and bad-input tests check our parsers and validation, not the
# kernel, and stay on the host (under TCG the bad-input test alone, a dozen
# interpreter starts, takes over three minutes).
# The tests added for issue 17 (restart pickup, prefer_best flags, a missing
# source, the IPv6 gateway) run on the host only for now, to keep the VM
# budget where it was; set VM_TESTS="not bad_input" to run them in the VM too.
# On the host it builds the plugin (BRAID_VM_PREPARE_ONLY=1 stops there:
# scripts/test-vm then runs this inside one VM for every suite), boots the
# VM and runs itself inside; the kernel must be built or cached
# (kernel/build). Fails on any test failure, or when the VM exceeds
# VM_TIMEOUT seconds (boot included; time spent waiting for another VM is
# not counted).
set -eu
cd "$(dirname "$0")"
if [ "${BRAID_IN_VM:-0}" != 1 ]; then
	make -s all
	[ "${BRAID_VM_PREPARE_ONLY:-0}" = 1 ] && exit 0
	# kernel/vm runs the command in this directory, inside the guest.
	exec ../kernel/vm run --timeout "${VM_TIMEOUT:-720}" -- ./test-vm.sh
fi
VM_TESTS="${VM_TESTS:-not bad_input and not restart and not prefer_best and not missing_source and not ipv6}"
exec python3 -m pytest -q -rfE -p no:cacheprovider --durations=0 \
	-k "$VM_TESTS" tests/test_integration.py

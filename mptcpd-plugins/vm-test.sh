#!/bin/sh
# gwsteer against braid's own kernel (6.12 + braid's patches), booted under
# TCG by kernel/vm: one integration test, the one that exercises every
# kernel interface gwsteer uses (PM netlink events, subflow creation per
# gateway, source routing, sock_diag backup flags, data on both paths).
# test.sh runs the whole suite (tests/test_integration.py and the rest)
# against the host kernel; gwsteer's logic does not depend on which kernel
# runs it, and under TCG every test costs 30x its host time (the full set
# took 520 s of the VM stage), so the VM stage keeps only what needs braid's
# kernel, and the tests marked srv6 (gwsteer-route's SRv6 routes, which a
# host kernel may lack: there they are skipped). VM_TESTS selects others
# (a pytest -k expression over test_integration.py and test_route.py), e.g.
# VM_TESTS="not bad_input" for every test but the parser ones.
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
	exec ../kernel/vm run --timeout "${VM_TIMEOUT:-720}" -- ./vm-test.sh
fi
VM_TESTS="${VM_TESTS:-one_subflow_per_healthy_gateway or srv6}"
exec python3 -m pytest -q -rfE -p no:cacheprovider --durations=0 \
	-k "$VM_TESTS" tests/test_integration.py tests/test_route.py

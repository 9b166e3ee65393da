#!/bin/sh
# braid's deployment: ansible-lint (production profile) and --syntax-check,
# and (as root) the invalid-inventory checks and a converge of two throwaway
# Debian 12 root filesystems (client box, proxy) through the chroot
# connection, run twice, with their results checked in the targets and in
# network namespaces (host kernel), then booted with their own systemd
# (systemd-nspawn) to start the units, and docs/deploy.md's manual,
# package-based steps run on two fresh booted systems
# (tests/test_manual_deploy.py); the three run concurrently. The Debian
# rootfs is debootstrap'd once and cached (~/.cache/braid/ansible or
# $BRAID_CACHE; ~2 minutes the first time); then the stage takes ~7 minutes
# on an idle 2-core machine.
#
#   ansible/test.sh                 everything
#   BRAID_ANSIBLE_ARTIFACTS=DIR ansible/test.sh   with ansible/build-artifacts DIR's output
#   SKIP_CONVERGE=1 ansible/test.sh lint and syntax only
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export PYTHONPATH="$repo/eval:$repo/proxy/openvpn${PYTHONPATH:+:$PYTHONPATH}"
cd "$here"
start=$(date +%s)
. "$here/tests/backstop.sh"

run_lint() {
	python3 -m pytest -q -p no:cacheprovider tests/test_lint.py
}

if [ "${SKIP_CONVERGE:-0}" = 1 ]; then
	echo "=== ansible-lint and syntax checks"
	run_lint
	echo "=== converge tests SKIPPED (SKIP_CONVERGE=1)"
elif [ "$(id -u)" != 0 ]; then
	echo "=== ansible-lint and syntax checks"
	run_lint
	echo "=== converge tests SKIPPED (need root: chroot targets, namespaces)"
else
	# Three independent parts run side by side, each with its own log
	# (printed when all are done): ansible-lint, the invalid inventories,
	# the converge. Ansible's runs wait on process starts more than they
	# compute, so even two cores overlap them well. The artifacts are
	# built once for all of them. braid's Debian package is built from the
	# same artifacts and tested (packaging/test.sh) alongside: it installs
	# into its own copy of the same cached Debian root filesystem.
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	# Built here unless the caller built them (scripts/test does, before
	# it starts this stage beside others that rebuild mptcpd-plugins).
	if [ -z "${BRAID_ANSIBLE_ARTIFACTS:-}" ]; then
		echo "=== building the artifacts"
		"$here/build-artifacts" "$work/artifacts" >/dev/null
		export BRAID_ANSIBLE_ARTIFACTS="$work/artifacts"
	fi
	# set +e: the part's own status goes to its .rc file, a failure too.
	part() {
		name=$1
		shift
		(
			set +e
			"$@" >"$work/$name.log" 2>&1
			echo $? >"$work/$name.rc"
		) &
	}
	echo "=== lint, invalid inventories, converge of a client box and a proxy (chroot targets, then booted), concurrently"
	part lint run_lint
	# Bounded: every playbook run has its own limit; these are the backstops
	# (a first run includes debootstrap; the other part waits on its lock),
	# stretched like the tests' own limits when this stage runs starved.
	part invalid timeout "$(backstop 1500)" python3 -m pytest -q -rs -p no:cacheprovider tests/test_invalid_inventory.py
	# The guide's manual path runs in the converge's process: the UIDs
	# booted.py gives the containers' mptcpd are unique within one process.
	part converge timeout "$(backstop 1500)" python3 -m pytest -q -rs -s -p no:cacheprovider --durations=3 tests/test_converge.py \
		tests/test_manual_deploy.py
	part packaging timeout "$(backstop 900)" "$repo/packaging/test.sh"
	wait
	failed=0
	for name in lint invalid converge packaging; do
		echo "=== $name"
		cat "$work/$name.log"
		[ "$(cat "$work/$name.rc")" = 0 ] || failed=1
	done
	[ "$failed" = 0 ] || exit 1
fi
echo "=== ansible tests passed ($(($(date +%s) - start))s)"

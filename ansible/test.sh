#!/bin/sh
# braid's deployment: ansible-lint (production profile) and --syntax-check,
# then (as root) the invalid-inventory cases and a converge of two throwaway
# Debian 12 root filesystems (client box, proxy) through the chroot
# connection, run twice, with their results checked in the targets and in
# network namespaces (host kernel). The Debian rootfs is debootstrap'd once
# and cached (~/.cache/braid/ansible or $BRAID_CACHE; ~2 minutes the first
# time), so a run takes a few minutes.
#
#   ansible/test.sh                 everything
#   SKIP_CONVERGE=1 ansible/test.sh lint and syntax only
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export PYTHONPATH="$repo/eval${PYTHONPATH:+:$PYTHONPATH}"
cd "$here"
start=$(date +%s)

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
	# ansible-lint (~35 s, mostly waiting) runs beside the chroot tests
	# instead of before them; its output is printed when both are done.
	lint_log=$(mktemp)
	trap 'rm -f "$lint_log"' EXIT
	run_lint >"$lint_log" 2>&1 &
	lint_pid=$!
	echo "=== invalid inventories, converge of a client box and a proxy (chroot targets)"
	# Bounded: every playbook run has its own limit; this is the backstop
	# (a first run includes debootstrap).
	converge_rc=0
	timeout 1500 python3 -m pytest -q -rs -p no:cacheprovider --durations=5 \
		tests/test_invalid_inventory.py tests/test_converge.py || converge_rc=$?
	lint_rc=0
	wait "$lint_pid" || lint_rc=$?
	echo "=== ansible-lint and syntax checks (ran alongside)"
	cat "$lint_log"
	[ "$converge_rc" = 0 ] && [ "$lint_rc" = 0 ] || exit 1
fi
echo "=== ansible tests passed ($(($(date +%s) - start))s)"

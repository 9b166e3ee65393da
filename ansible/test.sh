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

echo "=== ansible-lint and syntax checks"
python3 -m pytest -q -p no:cacheprovider tests/test_lint.py

if [ "${SKIP_CONVERGE:-0}" = 1 ]; then
	echo "=== converge tests SKIPPED (SKIP_CONVERGE=1)"
elif [ "$(id -u)" != 0 ]; then
	echo "=== converge tests SKIPPED (need root: chroot targets, namespaces)"
else
	echo "=== invalid inventories, converge of a client box and a proxy (chroot targets)"
	# Bounded: every playbook run has its own limit; this is the backstop
	# (a first run includes debootstrap).
	timeout 1500 python3 -m pytest -q -rs -p no:cacheprovider tests/test_invalid_inventory.py tests/test_converge.py
fi
echo "=== ansible tests passed ($(($(date +%s) - start))s)"

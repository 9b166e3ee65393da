#!/bin/bash
# braid-openvpn: settings/PKI/refusal tests, then (as root) both transports
# end to end in network namespaces on the host kernel with real openvpn
# processes (the default MPTCP scheduler, no netem; about 40 s).
#
#   proxy/openvpn/test.sh              everything
#   SKIP_NETNS=1 proxy/openvpn/test.sh settings tests only
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PYTHONPATH="$repo/eval:$here:$here/tests${PYTHONPATH:+:$PYTHONPATH}"
cd "$repo"
start=$(date +%s)

echo "=== braid-openvpn settings, PKI and refusals"
timeout 120 python3 -m pytest -q -p no:cacheprovider proxy/openvpn/tests/test_settings.py

if [ "${SKIP_NETNS:-0}" = 1 ]; then
    echo "=== braid-openvpn namespace tests SKIPPED (SKIP_NETNS=1)"
elif [ "$(id -u)" != 0 ]; then
    echo "=== braid-openvpn namespace tests SKIPPED (need root)"
else
    echo "=== braid-openvpn end to end (namespaces, real openvpn, TCPOPTSTRIP middlebox)"
    # Every wait inside has its own limit; this is the backstop.
    timeout 300 python3 -m pytest -q -rs -s -p no:cacheprovider proxy/openvpn/tests/test_tunnels_netns.py
fi
echo "=== braid-openvpn tests passed ($(($(date +%s) - start)) s)"

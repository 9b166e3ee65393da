#!/bin/bash
# braid's Tor mode: the controller's unit tests, then (as root) tor through
# the braid bridge on a private Tor network in network namespaces (host
# kernel, MPTCP with the `default` scheduler; about 30-40 s, most of it the
# network's first consensus and the client's bootstrap).
#
#   proxy/tor/test.sh              everything
#   SKIP_NETNS=1 proxy/tor/test.sh unit tests only
#   BRAID_KEEP_TOR_LOGS=1          keep the network's logs (path printed on failure)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PYTHONPATH="$repo/eval:$here${PYTHONPATH:+:$PYTHONPATH}"
cd "$repo"

echo "=== braid-tor unit tests"
python3 -m pytest -q -p no:cacheprovider proxy/tor/tests/test_torrc.py

if [ "${SKIP_NETNS:-0}" = 1 ]; then
    echo "=== private Tor network tests SKIPPED (SKIP_NETNS=1)"
elif [ "$(id -u)" != 0 ]; then
    echo "=== private Tor network tests SKIPPED (need root)"
else
    # With braid's adaptive padding at both ends (budget 0.4) unless
    # BRAID_TOR_PADDING says otherwise (empty: off): Tor must bootstrap and
    # fetch byte-exact through a padded transport. The unpadded
    # transport carries Tor in the VM stage (test_tor_hywf.py).
    export BRAID_TOR_PADDING="${BRAID_TOR_PADDING-0.4}"
    echo "=== tor through the braid bridge on a private Tor network (padding: ${BRAID_TOR_PADDING:-off})"
    # Bounded: the network, bootstrap and every fetch have their own limits;
    # this is the backstop.
    timeout 600 python3 -m pytest -q -rs -p no:cacheprovider proxy/tor/tests/test_tor_bridge.py
fi
echo "=== braid-tor tests passed"

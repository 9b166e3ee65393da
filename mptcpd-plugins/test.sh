#!/bin/sh
# Build gwsteer, run the C and Python unit tests, lint/type-check the
# Python, then the host network-namespace integration tests (root).
# Exits non-zero on any failure.  Takes about two minutes.
set -eu
cd "$(dirname "$0")"

echo "== build (-Wall -Wextra -Werror)"
make -s clean
make -s all

echo "== C unit tests"
./test_gwsteer
./test_plugin

echo "== ruff"
ruff check gwsteer braid_status tests gwsteer-route gwsteer-cli braid

echo "== mypy --strict"
# gwsteer and braid_status are type-checked on their own (their tests import each other as top-level modules)
MYPYPATH=../eval mypy --config-file /dev/null --strict --ignore-missing-imports gwsteer braid_status tests

echo "== doctests"
python3 -m doctest gwsteer/config.py gwsteer/ss.py

echo "== pytest (config parity + host-netns integration)"
if [ "$(id -u)" -ne 0 ]; then
        echo "integration tests need root (network namespaces)" >&2
        exit 1
fi
timeout 420 python3 -m pytest -q -p no:cacheprovider --durations=8 tests

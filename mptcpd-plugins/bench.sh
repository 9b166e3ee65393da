#!/bin/sh
# Failover benchmark (gwsteer vs in-kernel PM); see bench.py.
set -e
cd "$(dirname "$0")"
make -s gwsteer.so
exec python3 bench.py "$@"

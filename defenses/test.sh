#!/bin/sh
# braid's trace-level WF defence simulators (defenses/): host-only unit
# tests, a few seconds. The privacy evaluation that uses them is tested in
# eval/tests/host/test_wf.py (`wf defenses` quick mode).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export PYTHONPATH="$repo/eval:$repo/defenses${PYTHONPATH:+:$PYTHONPATH}"
cd "$repo"
start=$(date +%s)
echo "=== defenses: simulator tests"
python3 -m pytest -q -p no:cacheprovider defenses/tests
echo "=== defenses: passed ($(($(date +%s) - start)) s)"

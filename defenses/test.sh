#!/bin/sh
# braid's trace-level WF defence simulators and the deep attacks
# (defenses/): host-only tests, about two minutes (the deep attacks' quick
# training). The privacy evaluation that uses them is tested in
# eval/tests/host/test_wf.py (`wf defenses` quick mode).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export PYTHONPATH="$repo/eval:$repo/defenses${PYTHONPATH:+:$PYTHONPATH}"
cd "$repo"
start=$(date +%s)
echo "=== defenses: the deep attacks' extra (JAX, CPU)"
python3 -m pip install -q --root-user-action=ignore --disable-pip-version-check \
	-r defenses/requirements-deep.txt
echo "=== defenses: simulator and attack tests"
python3 -m pytest -q -rP -p no:cacheprovider --durations=5 defenses/tests
echo "=== defenses: passed ($(($(date +%s) - start)) s)"

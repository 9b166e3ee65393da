#!/bin/sh
# The deep WF attacks (DF, Tik-Tok, RF) and k-FP against none / hywf /
# hywf-ap / front / ap at full scale, on a machine with a GPU: run from the
# repository root; needs python3 with numpy, scikit-learn, matplotlib, jax
# (with its CUDA plugin) and optax. Writes into "$OUT" (default out/wf-gpu):
# wf-defenses.json (rewritten after every cell), wf-defenses.md,
# wf-defenses.png and the log, gpu-table.log.
#
# The corpus is the synthetic one (braid_wf/synth.py), generated here from
# its seed, or the dataset in DATA (a `braid-wf collect` directory such as
# out/wfc/single/all, copied to the GPU machine). Cells run closed world first (none, hywf, hywf-ap, front, ap;
# each attack in turn), then the open world; a cell that would end after
# DEADLINE seconds is skipped, and timeout stops the run LIMIT seconds in
# (SIGINT: the cells done so far are written). Each deep attack's learning
# curve is scored every CURVE_EVERY (4) epochs. Environment overrides:
# DATA, SITES, INSTANCES, UNMONITORED, EPOCHS, CURVE_EVERY, DEADLINE, LIMIT,
# JOBS, TAM_SECONDS.
set -eu
OUT=${OUT:-out/wf-gpu}
mkdir -p "$OUT"
PYTHONPATH=$PWD/eval:$PWD/defenses:$PWD/kernel
PYTHONUNBUFFERED=1
export PYTHONPATH PYTHONUNBUFFERED
log=$OUT/gpu-table.log
{
	date -u +%Y-%m-%dT%H:%M:%SZ
	nvidia-smi -L || echo "nvidia-smi: no GPU listed"
	python3 -c 'import jax; print(jax.__version__, jax.devices())'
} 2>&1 | tee "$log"
if [ -n "${DATA:-}" ]; then
	set -- --data "$DATA"
else
	set -- --sites "${SITES:-100}" --instances "${INSTANCES:-100}" --unmonitored "${UNMONITORED:-5000}"
fi
set -x
timeout -s INT -k 30 "${LIMIT:-450}" python3 -m braid_wf defenses --full "$@" \
	--defenses none,hywf,hywf-ap,front,ap --attacks df,tiktok,rf,kfp \
	--epochs "${EPOCHS:-12}" --curve-every "${CURVE_EVERY:-4}" --tam-seconds "${TAM_SECONDS:-80}" --repeats 1 --copies 1 --base-rate 0.1 \
	--jobs "${JOBS:-$(nproc)}" --deadline "${DEADLINE:-400}" \
	--json "$OUT/wf-defenses.json" --report "$OUT/wf-defenses.md" --plot "$OUT/wf-defenses.png" \
	2>&1 | tee -a "$log"

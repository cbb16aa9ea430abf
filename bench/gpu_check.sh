#!/usr/bin/env bash
# Issue 28 on a lent GPU machine in one command: the engine with a Parakeet-TDT-0.6B-shaped model, the
# cache-aware streaming FastConformer and the bundled model (random weights for the first two, built with
# NeMo's modules from our configs in bench/gpu_models.py: no download), 1-128 streams, greedy/beam, with and
# without per-stream biasing, and ONE Table-III-shaped table (bench/gpu_check.py). docs/deploy.md ("GPU
# measurements") has the device call.
#
# Usage (repository root):  OUT=/some/dir bash bench/gpu_check.sh [bench/gpu_check.py arguments]
# Needs .gpucheck/whl from bench/gpu_pack.sh (carried): installed with the machine's own PyTorch into
# $GPU_CHECK_SITE (default /tmp/gpucheck-site). Without .gpucheck/whl (the CPU dry run, tests/tools/test_gpu_check.py)
# nothing is installed and $PY (default python3) must have NeMo already.
# Writes $OUT/gpu_check.log, $OUT/gpu_check.md (the table) and $OUT/gpu_check.json (every row).
set -uo pipefail
PACK=${GPU_CHECK_PACK:-.gpucheck}
PY=${PY:-python3}
OUT=${OUT:-bench/out}
SITE=${GPU_CHECK_SITE:-/tmp/gpucheck-site}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
log() { echo "[$(date -u +%T) +${SECONDS}s] $*"; }
export PYTHONUNBUFFERED=1

if compgen -G "$PACK/whl/*.whl" > /dev/null; then
  log "install $(ls "$PACK"/whl/*.whl | wc -l) carried wheels into $SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    "$PACK"/whl/*.whl || { log "FAILED: wheels"; exit 1; }
  export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  log "no $PACK/whl: using $PY as it is"
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
# for a failed import: the versions that NeMo's import path depends on (the machine's and the carried ones)
PYTHONPATH="$PYTHONPATH" "$PY" -m pip list 2>/dev/null | grep -iE \
  "^(torch|numpy|pyarrow|pandas|transformers|huggingface.hub|lightning|pytorch.lightning|triton|nemo.toolkit) " || true
log "gpu_check"
"$PY" bench/gpu_check.py --out "$OUT" "$@"
status=$?
log "done (exit $status)"
exit "$status"

#!/usr/bin/env bash
# Fine-tune the embedded model on a lent GPU within a fixed time budget: synthesise new training speech
# there (espeak-ng and flite from .gpu/debs, on every core), encode it with the frozen Whisper encoder on
# the GPU, train the head (frame projection, top blocks, prediction network, joint) from the shipped
# model's weights, and write the trained weights as <= 15 MiB shards to $OUT, with the logs.
#
# It needs only what such a machine has (python3 with PyTorch, SentencePiece, NumPy, SciPy, tqdm, PyYAML):
# the model is built by training/plain.py, not NeMo. Prepare .gpu/ first with training/gpu_pack.sh.
# Back here: `python -m training.plain join --shards $OUT/weights_*.pt --out <ckpt.pt>`, then
# `python -m training.export --init models/captions-embedded.nemo --ckpt <ckpt.pt> --int8 --out ...` and
# the evaluation of models/MODEL_CARD.md. The recipe never needs this script: training/train.py on CPU
# trains the same weights, only slower.
#
# Usage (repo root):  OUT=/some/dir bash training/gpu_train.sh
# Budget knobs (seconds / minutes): SYNTH_S=170 TRAIN_MIN=3.5, or TOTAL_S (the whole run: training gets what
# synthesis and encoding left); DEVICE=cuda; LR=2e-4; BATCH_FRAMES=36000. Carried Piper speech
# (.gpu/piper, see gpu_pack.sh) joins the training set PIPER_REPEAT times per epoch (default 5). The
# sentences are spoken TEXT_REPEAT times over (default 2), each time in newly drawn voices, as far as
# SYNTH_S allows: run 6 had spoken every carried sentence once within 150 s.
set -uo pipefail
OUT=${OUT:-training/work/gpu_out}
WORK=${GPU_WORK:-/tmp/gpu_train}
PACK=${GPU_PACK:-.gpu}
MODEL=${MODEL:-models/captions-embedded.nemo}
SYNTH_S=${SYNTH_S:-170}
TRAIN_MIN=${TRAIN_MIN:-3.5}
DEVICE=${DEVICE:-cuda}
LR=${LR:-2e-4}
BATCH_FRAMES=${BATCH_FRAMES:-36000}
EVAL_EVERY=${EVAL_EVERY:-150}
WORKERS=${WORKERS:-$(nproc)}
FEATURE_BATCH=${FEATURE_BATCH:-128}
PIPER_REPEAT=${PIPER_REPEAT:-5}
TEXT_REPEAT=${TEXT_REPEAT:-2}
mkdir -p "$OUT" "$WORK"
exec > >(tee -a "$OUT/gpu_train.log") 2>&1
log() { echo "[$(date -u +%T) +${SECONDS}s] $*"; }
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=10

log "setup"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$PACK"/whl/*.whl || { log "FAILED: wheels"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
# shellcheck source=training/gpu_tts_env.sh
GPU_PACK="$PACK" source training/gpu_tts_env.sh
python3 - <<'PY' || { log "FAILED: environment"; exit 1; }
import subprocess, torch, soundfile, sentencepiece, yaml, scipy
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
for cmd in (["espeak-ng", "-w", "/tmp/probe_e.wav", "probe"], ["flite", "-voice", "slt", "-t", "probe", "-o", "/tmp/probe_f.wav"]):
    subprocess.run(cmd, check=True)
print("tts ok:", soundfile.info("/tmp/probe_e.wav").duration, soundfile.info("/tmp/probe_f.wav").duration)
PY

log "synthesise (${SYNTH_S} s on ${WORKERS} workers)"
for _ in $(seq 1 "$TEXT_REPEAT"); do cat "$PACK/text/sentences.txt"; done > "$WORK/sentences.txt"
python3 -m training.synth --text "$WORK/sentences.txt" --out "$WORK/train" --n 10000000 \
  --voices espeak,flite --workers "$WORKERS" --deadline-s "$SYNTH_S" --prefix g --seed 7 \
  || { log "FAILED: synthesis"; exit 1; }

log "encode (Whisper, frozen) on $DEVICE"
python3 -m training.features --plain --device "$DEVICE" --batch "$FEATURE_BATCH" --model "$MODEL" \
  --manifest "$WORK"/train/manifest_g0.json --out "$WORK/cache/train_full.pt" || { log "FAILED: encode"; exit 1; }
python3 -m training.features --plain --device "$DEVICE" --batch 64 --model "$MODEL" \
  --manifest "$PACK/dev/manifest.json" --out "$WORK/cache/dev_full.pt" || { log "FAILED: encode dev"; exit 1; }

if [ -f "$PACK/piper/manifest.json" ]; then  # carried Piper speech, a few hours: repeated per epoch
  python3 -m training.features --plain --device "$DEVICE" --batch 64 --model "$MODEL" \
    --manifest "$PACK/piper/manifest.json" --out "$WORK/cache/piper.pt" || { log "FAILED: encode piper"; exit 1; }
  for i in $(seq 1 "$PIPER_REPEAT"); do ln -sf piper.pt "$WORK/cache/piper_rep$i.pt"; done
fi

if [ -n "${TOTAL_S:-}" ]; then  # what is left of the whole budget, less ~45 s to load the data and finish
  TRAIN_MIN=$(python3 -c "print(max(0.5, ($TOTAL_S - $SECONDS - 45) / 60))")
fi
log "train (${TRAIN_MIN} min)"
python3 -m training.train --plain --device "$DEVICE" --init "$MODEL" --train "$WORK/cache/train_full.pt" "$WORK/cache/piper_rep*.pt" \
  --eval "$WORK/cache/dev_full.pt" --work "$WORK/run" --minutes "$TRAIN_MIN" --time-schedule --steps 1000000 \
  --lr "$LR" --warmup 50 --batch-frames "$BATCH_FRAMES" --eval-every "$EVAL_EVERY" --eval-first --bf16-joint \
  --time-masks 2 --save-every-s 60
status=$?
cp "$WORK/run/log.jsonl" "$OUT/train_log.jsonl" 2>/dev/null
[ "$status" = 0 ] || log "training exited with $status (the last saved checkpoint is returned)"

log "shards"
python3 -m training.plain shards --ckpt "$WORK/run/ckpt.pt" --out "$OUT" || { log "FAILED: shards"; exit 1; }
log "done"

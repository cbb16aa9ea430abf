#!/bin/sh
# Synthesise and cache more training utterances, one piece of $N at a time (one core), from sentence $FROM
# up to $TO. A piece whose cache exists is skipped, so the loop can be stopped and started again; a running
# `training.train --train 'training/work/cache/train_*.pt'` picks up each new cache at its next epoch.
#   FROM=16000 TO=60000 sh training/more_data.sh
set -e
export PYTHONPATH=. OMP_NUM_THREADS=1
N=${N:-2000}
skip=${FROM:-16000}
while [ "$skip" -lt "${TO:-60000}" ]; do
  if [ ! -e "training/work/cache/train_u$skip.pt" ]; then
    .venv/bin/python -m training.synth --text training/work/text/train.txt --out training/work/train \
        --n "$N" --skip "$skip" --prefix u --workers 1
    .venv/bin/python -m training.features --model training/work/init.nemo \
        --manifest "training/work/train/manifest_u$skip.json" --out "training/work/cache/train_u$skip.pt"
  fi
  skip=$((skip + N))
done

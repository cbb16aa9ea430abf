#!/usr/bin/env bash
# Prepare .gpu/ (git-ignored): what training/gpu_train.sh needs on a device machine that has PyTorch but
# no registry access: the espeak-ng and flite Debian packages with their libraries (unpacked there by
# training/gpu_tts_env.sh, never into /), the soundfile wheel for its Python 3.12, the sentences to speak
# and a small held-out dev set (festival voices, FLAC) for the trainer's periodic WER. About 30 MB.
# Optionally (PIPER_MANIFEST=...): Piper speech synthesised here, as Ogg Opus within PIPER_MB, because the
# Piper voice itself (61 MB) does not fit in what a device call carries (64 MiB with the checkout).
#
# Usage (repo root, after the text and dev-set stages of models/MODEL_CARD.md):
#   bash training/gpu_pack.sh [train.txt] [dev manifest]
#   PIPER_MANIFEST=<synth.py --voices piper manifest> PIPER_MB=13 bash training/gpu_pack.sh
set -euo pipefail
TEXT=${1:-training/work/text/train.txt}
DEV=${2:-training/work/dev_festival/manifest_v300.json}
PACK=${GPU_PACK:-.gpu}
NEW_FROM=${NEW_FROM:-102000}  # sentences before this were spoken for runs 1-5
OLD_N=${OLD_N:-30000}         # then this many already-spoken sentences, in new voices
DEV_N=${DEV_N:-100}
PY=${PY:-.venv/bin/python}
mkdir -p "$PACK/debs" "$PACK/whl" "$PACK/text" "$PACK/dev"

DEBS="espeak-ng espeak-ng-data libespeak-ng1 libpcaudio0 libsonic0 flite libflite1 libasound2 libpulse0
  libsndfile1 libflac12 libogg0 libopus0 libvorbis0a libvorbisenc2 libmp3lame0 libmpg123-0 libasyncns0
  libx11-6 libx11-xcb1 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libsystemd0 libcap2 libgcrypt20
  libgpg-error0 liblz4-1 liblzma5 libzstd1 libdbus-1-3"
(cd "$PACK/debs" && for p in $DEBS; do ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download -q "$p"; done)

for w in soundfile==0.13.1 cffi==2.1.1 pycparser==3.12; do
  ls "$PACK/whl/${w%%==*}"-* >/dev/null 2>&1 || "$PY" -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$PACK/whl" "$w"
done

# unspoken sentences first, then already-spoken ones: a time-limited synthesis speaks the new ones
{ tail -n +"$((NEW_FROM + 1))" "$TEXT"; head -n "$OLD_N" "$TEXT"; } > "$PACK/text/sentences.txt"

"$PY" -m training.pack_audio --manifest "$DEV" --out "$PACK/dev" --format flac --limit "$DEV_N"
if [ -n "${PIPER_MANIFEST:-}" ]; then
  "$PY" -m training.pack_audio --manifest "$PIPER_MANIFEST" --out "$PACK/piper" --format opus --mb "${PIPER_MB:-13}"
fi
du -sh "$PACK"/* "$PACK"

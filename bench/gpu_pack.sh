#!/usr/bin/env bash
# Prepare .gpucheck/ (git-ignored) for bench/gpu_check.sh on a lent GPU machine, which has PyTorch but no
# registry access: the wheels of bench/gpu_requirements.txt for its Python 3.12 on x86-64 (NeMo 3.0.0 and the
# packages it imports that the machine lacks), about 15 MB. Run here, in the repository root, once:
#   bash bench/gpu_pack.sh
# Then the device call (docs/deploy.md, "GPU measurements") names .gpucheck in `carry`. What travels is the
# working tree plus .gpucheck; this script prints both sizes, which must stay under 64 MiB together.
set -euo pipefail
PACK=${GPU_CHECK_PACK:-.gpucheck}
PY=${PY:-.venv/bin/python}
REQS=${REQS:-bench/gpu_requirements.txt}
mkdir -p "$PACK/whl"
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
grep -vE '^\s*(#|$)' "$REQS" | while read -r req; do
  name=${req%%==*}
  pattern=$(echo "$name" | tr '-' '_')
  if ls "$PACK/whl/" 2>/dev/null | grep -qi "^${pattern}-${req##*==}-"; then
    continue
  fi
  if ! "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${PLATFORMS[@]}" -d "$PACK/whl" "$req" 2>/dev/null; then
    # no wheel on the index (antlr4-python3-runtime 4.9.3 is a source archive): build a pure-Python one
    "$PY" -m pip wheel -q --no-deps -w "$PACK/whl" "$req"
  fi
done
echo "wheels: $(ls "$PACK"/whl/*.whl | wc -l), $(du -sh "$PACK" | cut -f1)"
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null \
  | awk '{s += $1} END {print s}')
pack_bytes=$(du -sb "$PACK" | cut -f1)
echo "working tree that travels: $((tree_bytes / 1048576)) MiB; with $PACK: $(((tree_bytes + pack_bytes) / 1048576)) MiB (limit 64)"
if [ $((tree_bytes + pack_bytes)) -ge $((64 * 1048576)) ]; then
  echo "TOO LARGE for a device call: the largest files that travel:"
  git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c '%s %n' 2>/dev/null | sort -n | tail -5
  exit 1
fi

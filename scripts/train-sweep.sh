#!/usr/bin/env bash
# The mini reproduction of the paper's Fig. 8a: validation loss against the focal temperature t at equal tokens,
# with exactly the bundled models' data, size, seed and steps (t = 1.0 and 0.4 are the bundled standard and
# focal-t0.4 runs). usage: scripts/train-sweep.sh [DATA_DIR] [OUT_DIR] [TEMPS...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
data=${1:-out/data}
out=${2:-out/train}
shift $(( $# > 2 ? 2 : $# ))
temps=("$@")
[ ${#temps[@]} -gt 0 ] || temps=(0.3 0.5 0.6)
focal=${FOCAL:-build/cli/focal}
common=(--data "$data" --hidden 192 --layers 4 --heads 6 --kv-heads 2 --intermediate 512 --context 2048
        --seq-len 256 --batch 8 --steps 1200 --lr 3e-3 --warmup 100 --eval-every 100 --task-frac 0.25 --seed "${SEED:-1}")
for t in "${temps[@]}"; do
  run="$out/focal-t$t"
  if [ -f "$run/trainer_state.json" ] && grep -q '"step": 1200' "$run/trainer_state.json"; then continue; fi
  resume=()
  [ -f "$run/trainer_state.json" ] && resume=(--resume)
  echo "== train focal t=$t"
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} $focal train "${common[@]}" --attn focal --temp "$t" --out "$run" "${resume[@]}"
done

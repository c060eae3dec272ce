#!/usr/bin/env bash
# Trains the three bundled models (same data, seed, steps and size; only attention differs), evaluates them and
# exports bf16 copies into assets/models/. usage: scripts/train-bundled.sh [DATA_DIR] [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
data=${1:-out/data}
out=${2:-out/train}
focal=${FOCAL:-build/cli/focal}
common=(--data "$data" --hidden 192 --layers 4 --heads 6 --kv-heads 2 --intermediate 512 --context 2048
        --seq-len 256 --batch 8 --steps 1200 --lr 3e-3 --warmup 100 --eval-every 100 --task-frac 0.25 --seed "${SEED:-1}")
mkdir -p "$out"
# RUNS selects a subset (default all three); SEED another seed (default 1).
for run in ${RUNS:-standard focal-t0.4 focal-learned}; do
  case $run in
    standard) attn=(--attn standard) ;;
    focal-t0.4) attn=(--attn focal --temp 0.4) ;;
    focal-learned) attn=(--attn learned --tau-mode prefix_mean) ;;
  esac
  if [ ! -f "$out/$run/trainer_state.json" ] || ! grep -q '"step": 1200' "$out/$run/trainer_state.json"; then
    resume=()
    [ -f "$out/$run/trainer_state.json" ] && resume=(--resume)
    echo "== train $run"
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} $focal train "${common[@]}" "${attn[@]}" --out "$out/$run" "${resume[@]}"
  fi
done

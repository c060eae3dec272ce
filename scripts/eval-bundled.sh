#!/usr/bin/env bash
# Evaluates trained runs (validation loss, retrieval accuracy and relevant-token mass by context length) into
# RUN/eval.h5 and RUN/eval.txt. usage: scripts/eval-bundled.sh [DATA_DIR] RUN_DIR...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
data=${1:-out/data}
shift || true
focal=${FOCAL:-build/cli/focal}
for run in "$@"; do
  echo "== eval $run"
  $focal eval "$run" --data "$data" --val-seq-len 256 --val-sequences 64 --max-tasks "${MAX_TASKS:-20}" \
    -o "$run/eval.h5" | tee "$run/eval.txt"
done

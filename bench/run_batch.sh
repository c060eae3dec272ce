#!/usr/bin/env bash
# focal batch benchmarks (docs/performance.md, issue 15):
#  1. batch_bench: focal batch (all-head metrics, statistics, rows, file) against a plain forward over the same
#     tokens, wall and CPU time (THREADS threads);
#  2. the same batch as `mpirun -np 2` with 1 thread per rank against one process with 2 threads (wall, and CPU
#     seconds of all processes).
#   usage: bench/run_batch.sh MODEL CORPUS [N_DOCS=40] [MAX_TOKENS=256] [THREADS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/run_batch.sh MODEL CORPUS [N_DOCS] [MAX_TOKENS] [THREADS]}
corpus=${2:?usage: bench/run_batch.sh MODEL CORPUS [N_DOCS] [MAX_TOKENS] [THREADS]}
n=${3:-40}
t=${4:-256}
threads=${5:-2}
OMP_NUM_THREADS=$threads build/bench/batch_bench "$model" "$corpus" "$n" "$t" 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { /usr/bin/time -f "%e s wall, %U+%S s CPU" "$@" 2>&1 >/dev/null | tail -1; }
for rep in 1 2 3; do
  one=$(run env OMP_NUM_THREADS=2 build/cli/focal batch "$model" --data "$corpus" --limit "$n" --max-tokens "$t" \
        --quiet -o "$out/one.h5")
  two=$(run mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 build/cli/focal batch "$model" --data "$corpus" \
        --limit "$n" --max-tokens "$t" --quiet -o "$out/two.h5")
  echo "rep $rep: -np 1 x 2 threads: ${one};  -np 2 x 1 thread: ${two}"
done

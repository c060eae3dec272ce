#!/usr/bin/env bash
# Prefill benchmark, focalscope CPU runtime vs a PyTorch eager LLaMA that materialises attention
# (bench/pytorch_prefill.py, Debian python3-torch), same weights, same thread count, one run.
# usage: bench/run_prefill.sh [THREADS] [REPS]   (models are generated under out/bench/; results on stdout)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
threads=${1:-$(nproc)}
reps=${2:-3}
focal=build/cli/focal
mkdir -p out/bench
[ -f out/bench/small/config.json ] || $focal init out/bench/small --vocab 2000 --hidden 256 --layers 4 --heads 8 \
  --kv-heads 2 --intermediate 704 --context 2048 --attn focal --temp 0.4 >/dev/null
[ -f out/bench/h1024/config.json ] || $focal init out/bench/h1024 --vocab 8000 --hidden 1024 --layers 8 --heads 16 \
  --kv-heads 4 --intermediate 2816 --context 2048 --attn focal --temp 0.4 >/dev/null
for m in small h1024; do
  echo "== $m, $threads threads =="
  echo "-- focalscope (build/bench/prefill_bench) --"
  OMP_NUM_THREADS=$threads build/bench/prefill_bench out/bench/$m 256,1024,2048 "$reps"
  echo "-- PyTorch eager (bench/pytorch_prefill.py) --"
  /usr/bin/python3 bench/pytorch_prefill.py --model out/bench/$m --T 256,1024,2048 --threads "$threads" --reps "$reps"
done

#!/usr/bin/env bash
# SmolLM2-135M benchmark (the real pretrained model, GGUF Q4_1 dequantised to fp32 at load):
#  1. prefill tokens/s at T = 512 and 2048: focalscope plain / all-head metrics / metrics + every head of one layer
#     captured (build/bench/prefill_bench), against PyTorch eager fp32 (bench/pytorch_prefill.py) on the same
#     dequantised weights (exported by scripts/gguf_to_hf.py), same thread count, one run;
#  2. peak RSS (/usr/bin/time -v) of `focal capture` at T = 8192 with metrics for every layer x head.
# usage: bench/run_smollm2.sh [THREADS] [REPS]     (needs the venv of tests/hf/setup_venv.sh; results on stdout)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
threads=${1:-$(nproc)}
reps=${2:-3}
gguf="$(scripts/fetch-smollm2.sh)"
mkdir -p out/bench
[ -f out/bench/smollm2-hf/config.json ] || .venv/bin/python scripts/gguf_to_hf.py "$gguf" out/bench/smollm2-hf >/dev/null
echo "== SmolLM2-135M ($gguf), $threads threads; load: $(uptime)"
echo "-- focalscope (build/bench/prefill_bench; capture = all 9 heads of layer 15) --"
OMP_NUM_THREADS=$threads build/bench/prefill_bench "$gguf" 512,2048 "$reps" 9
echo "-- PyTorch eager fp32 (bench/pytorch_prefill.py, same weights) --"
/usr/bin/python3 bench/pytorch_prefill.py --model out/bench/smollm2-hf --T 512,2048 --threads "$threads" --reps "$reps"
echo "-- peak memory: focal capture, T = 8192, --store metrics (every layer x head) --"
/usr/bin/python3 -c "print(' The cat sat on the mat.' * 1170 + ' A')" > out/bench/prompt-8k.txt
OMP_NUM_THREADS=$threads /usr/bin/time -v build/cli/focal capture "$gguf" --prompt-file out/bench/prompt-8k.txt \
  --store metrics -o out/bench/smollm2-8k.h5 2>&1 | grep -E "wrote|Maximum resident|Elapsed"
echo "load after: $(uptime)"

#!/usr/bin/env bash
# GPU benchmark of the CUDA backend: prefill tokens/s (plain, all-head metrics, capture) at several T with the CPU
# backend as the peer, memory-bound kernels against cudaMemcpy device-to-device bandwidth, and the GEMM path against
# cublasSgemm. Needs an NVIDIA GPU and a build with FOCAL_CUDA on (the default where nvcc is found).
# usage: bench/gpu/run.sh [SIZE] [T,T,..] [REPS]     SIZE: 1b (default, ~0.9B parameters) | 100m
#        results on stdout; paste them with the command and the GPU name into docs/performance.md ("GPU").
#        On a lent machine without the Debian build dependencies use bench/gpu/pack.sh + bench/gpu/device-check.sh.
set -euo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
size=${1:-1b}
Ts=${2:-512,2048,8192}
reps=${3:-5}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFOCAL_CUDA=ON >/dev/null
cmake --build build -j"$(nproc)" --target focal gpu_bench
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
mkdir -p out/bench
case "$size" in
  1b)
    [ -f out/bench/gpu1b/config.json ] || build/cli/focal init out/bench/gpu1b --vocab 32000 --hidden 2048 \
      --layers 16 --heads 16 --kv-heads 4 --intermediate 5632 --context 8192 --attn focal --temp 0.4 >/dev/null
    model=out/bench/gpu1b ;;
  100m)
    [ -f out/bench/h1024/config.json ] || build/cli/focal init out/bench/h1024 --vocab 8000 --hidden 1024 \
      --layers 8 --heads 16 --kv-heads 4 --intermediate 2816 --context 8192 --attn focal --temp 0.4 >/dev/null
    model=out/bench/h1024 ;;
  *) echo "usage: bench/gpu/run.sh [1b|100m] [T,T,..] [REPS]" >&2; exit 2 ;;
esac
build/bench/gpu_bench "$model" "$Ts" "$reps"

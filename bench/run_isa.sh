#!/usr/bin/env bash
# Every kernel level against its peer on the same machine (issue 37, item 3): focalscope's native kernels capped
# with FOCAL_QUANT_ISA=avx2 against llama.cpp built for AVX2 only (bench/llamacpp/build.sh --avx2), and the native
# level against llama.cpp's native build. For each level: SmolLM2-135M Q4_1 prefill (T = 512) and decode, then
# the 8B Q4_K file of bench/run_big.sh (decode only), decode in rounds that alternate the tools (a shared machine's
# bandwidth drifts by tens of percent within minutes: compare neighbouring rows). With --mixes, each level also
# decodes the 8B shape as Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K and Q8_0 (bench/run_big.sh's files, made by
# make_big_model --mix if missing) and prefills the Q4_K_M file at T = 128; --only-mixes: those alone. The AVX2
# level also holds OpenBLAS to its AVX2 kernels (OPENBLAS_CORETYPE=Haswell), as on an AVX2-only CPU. On a CPU
# without AVX-512 the native level is AVX2: one level is measured (against llama.cpp's native build, which is then
# an AVX2 build) and the log says so. Takes about 15 minutes on 2 cores (--mixes: about 24 more; one level: about
# half); the two llama.cpp builds take about 16 minutes each the first time. FOCAL_ISA_LEVELS="native" (or
# "avx2") measures that level alone, and builds only its peer; FOCAL_MIXES="q4_k_m q8_0" (say) decodes those mixes
# alone (default: all six). Before and after each level a plain read of ~1 GB (quant_matvec_bench's) logs the memory's
# rate: a shared VM's moves by half within minutes, and the 8B decode with it.
# usage: bench/run_isa.sh [THREADS] [ROUNDS] [--mixes | --only-mixes]
set -euo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
threads=${1:-2}
rounds=${2:-2}
mixes=""
only_mixes=""
case "${3:-}" in
  --mixes) mixes=1 ;;
  --only-mixes) mixes=1 only_mixes=1 ;;
  "") ;;
  *) echo "run_isa.sh: unknown option '$3' (see --help)" >&2; exit 2 ;;
esac
cache="${FOCAL_CACHE:-/root/.cache/focalscope}"
levels="native avx2"
one_level=""  # set: the CPU has no AVX-512, so its native level is AVX2
grep -q avx512f /proc/cpuinfo || { levels="native"; one_level=1; }
case "${FOCAL_ISA_LEVELS:-}" in
  native | avx2) [ -n "$one_level" ] || levels="$FOCAL_ISA_LEVELS" ;;
  "") ;;
  *) echo "run_isa.sh: FOCAL_ISA_LEVELS='$FOCAL_ISA_LEVELS' is not native or avx2" >&2; exit 2 ;;
esac
lb_native=""
lb_avx2=""
[ "$levels" = avx2 ] || lb_native="$(bench/llamacpp/build.sh | tail -1)"
[ "$levels" = native ] || lb_avx2="$(bench/llamacpp/build.sh --avx2 | tail -1)"
smol="$(scripts/fetch-smollm2.sh)"
big="$cache/big/llama3-8b-shape-q4_k.gguf"
[ -n "$only_mixes" ] || [ -f "$big" ] || { mkdir -p "$cache/big"; build/bench/make_big_model --gguf "$big"; }
mix_list="${FOCAL_MIXES:-q2_k q3_k_m q4_k_m q5_k_m q6_k q8_0}"
for mix in $mix_list; do
  case "$mix" in
    q2_k | q3_k_m | q4_k_m | q5_k_m | q6_k | q8_0) ;;
    *) echo "run_isa.sh: FOCAL_MIXES names '$mix'; the mixes are q2_k q3_k_m q4_k_m q5_k_m q6_k q8_0" >&2; exit 2 ;;
  esac
done
if [ -n "$mixes" ]; then
  for mix in q4_k_m $mix_list; do
    f="$cache/big/llama3-8b-shape-$mix.gguf"
    [ -f "$f" ] || { mkdir -p "$cache/big"; build/bench/make_big_model --gguf "$f" --mix "$mix"; }
  done
fi
# Files just written are still being written back (gigabytes): the first run after make_big_model on 2026-12-05
# measured the 8B decode 15–25 % slower for both tools than a rerun minutes later. Wait for the writes first.
sync
export OMP_NUM_THREADS=$threads
isa="AVX2"; grep -q avx512_vnni /proc/cpuinfo && isa="AVX-512 VNNI"
echo "== $(date -u '+%F %H:%M') $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) ($isa), $threads threads, load: $(uptime | sed 's/.*average: //')"
[ -n "$one_level" ] && echo "(no AVX-512 on this CPU: its native level is AVX2, so the two levels are one; measured once)"
# lb_prefill MODEL T REPS: llama-bench's prefill row. llama.cpp 0.3.36's prompt processing through its AMX repack
# crashes on Intel CPUs with AMX (as in run_big.sh): the row then comes from --repack 0, and the log says so.
lb_prefill() {
  "$lb" -m "$1" -t "$threads" -p "$2" -n 0 -r "$3" -o md 2>/dev/null | grep -E "pp$2" && return
  echo "(llama-bench failed with its defaults; again with --repack 0)"
  "$lb" -m "$1" -t "$threads" -p "$2" -n 0 -r "$3" --repack 0 -o md 2>/dev/null | grep -E "pp$2"
}
# mem_probe: the rate of a plain read of 0.98 GB (quant_matvec_bench's "read" row, 8 of the 8B's layers as Q4_K).
mem_probe() {
  echo "-- memory: plain read $(OMP_NUM_THREADS=$threads build/bench/quant_matvec_bench --type q4_k --layers 8 --reps 3 |
    sed -n 's/^read *[0-9.]* s *\([0-9.]*\) GB\/s.*/\1 GB\/s/p') ($threads threads, 0.98 GB) --"
}
for level in $levels; do
  # The AVX2 level stands for an AVX2-only CPU: OpenBLAS's sgemm (prefill) is held to its AVX2 kernels too.
  if [ "$level" = avx2 ]; then
    lb="$lb_avx2"; export FOCAL_QUANT_ISA=avx2 OPENBLAS_CORETYPE=Haswell
  else
    lb="$lb_native"; unset FOCAL_QUANT_ISA OPENBLAS_CORETYPE
  fi
  echo "=== level $level: focalscope FOCAL_QUANT_ISA=${FOCAL_QUANT_ISA:-(all the CPU has)}, sgemm: $(build/cli/focal --version | sed -n 's/^CPU GEMM: //p'); llama-bench $lb"
  mem_probe
  if [ -z "$only_mixes" ]; then
  echo "-- SmolLM2 prefill T = 512: focalscope, then llama-bench --"
  build/bench/weights_bench "$smol" --prefill 512 --decode 0 --reps 3 | grep prefill
  lb_prefill "$smol" 512 3
  for round in $(seq 1 "$rounds"); do
    echo "-- SmolLM2 decode, round $round: focalscope, then llama-bench --"
    build/bench/weights_bench "$smol" --prefill 0 --decode 64 --reps 5 | grep decode
    "$lb" -m "$smol" -t "$threads" -p 0 -n 64 -r 5 -o md 2>/dev/null | grep -E "tg64"
  done
  for round in $(seq 1 "$rounds"); do
    echo "-- 8B Q4_K decode, round $round: focalscope, then llama-bench --"
    build/bench/weights_bench "$big" --prefill 0 --decode 16 --reps 3 | grep decode
    "$lb" -m "$big" -t "$threads" -p 0 -n 16 -r 3 -o md 2>/dev/null | grep -E "tg16"
  done
  fi
  if [ -n "$mixes" ]; then
    f="$cache/big/llama3-8b-shape-q4_k_m.gguf"
    echo "-- 8B q4_k_m prefill T = 128: focalscope, then llama-bench --"
    build/bench/weights_bench "$f" --prefill 128 --decode 0 --reps 1 | grep prefill
    lb_prefill "$f" 128 1
    for mix in $mix_list; do
      f="$cache/big/llama3-8b-shape-$mix.gguf"
      for round in $(seq 1 "$rounds"); do
        echo "-- 8B $mix decode, round $round: focalscope, then llama-bench --"
        build/bench/weights_bench "$f" --prefill 0 --decode 16 --reps 1 | grep decode
        "$lb" -m "$f" -t "$threads" -p 0 -n 16 -r 2 -o md 2>/dev/null | grep -E "tg16"
      done
    done
  fi
  mem_probe
done
echo "load after: $(uptime | sed 's/.*average: //')"

#!/usr/bin/env bash
# Native weights against llama.cpp (issue 14), every number of one run on the same machine and thread count:
#  1. SmolLM2-135M Q4_1 (scripts/fetch-smollm2.sh): prefill tokens/s at T = 512 and 2048 and decode tokens/s of
#     build/bench/weights_bench against llama-bench on the same GGUF; peak RSS of `focal capture` at T = 512
#     (--store metrics);
#  2. a random-weight model of Llama-3-8B's exact shape written as Q4_K by build/bench/make_big_model: open time,
#     decode tokens/s against llama-bench (focalscope's default, the file read into memory, and --mmap), peak RSS
#     of `focal capture` at T = 2048 with metrics for every head and
#     the rows (probabilities and scores) of every head of layer 16;
#  3. the same shape as bf16 safetensors: open time and peak RSS of the same capture;
#  4. with --mixes, the same shape with the tensor types of llama.cpp's Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K and
#     Q8_0 files (make_big_model --mix): decode tokens/s against llama-bench, alternating (issue 37);
#     --only-mixes: these alone, 1-3 skipped.
# llama-bench comes from bench/llamacpp/build.sh (llama.cpp vendored in PyPI's llama-cpp-python sdist, built into
# the cache). The big models (4.5 GB and 16 GB) are written into ${FOCAL_CACHE:-/root/.cache/focalscope}/big, never
# into the repository. Takes about 20 minutes on 2 cores (--mixes: about 35 more, and 33 GB more of cache).
# usage: bench/run_big.sh [THREADS] [--skip-bf16] [--mixes | --only-mixes]
set -euo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
threads=${1:-2}
skip_bf16=""
mixes=""
only_mixes=""
for a in "${@:2}"; do
  case "$a" in
    --skip-bf16) skip_bf16=1 ;;
    --mixes) mixes=1 ;;
    --only-mixes) mixes=1 only_mixes=1 ;;
    *) echo "run_big.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
  esac
done
cache="${FOCAL_CACHE:-/root/.cache/focalscope}"
lb="$(bench/llamacpp/build.sh | tail -1)"
smol="$(scripts/fetch-smollm2.sh)"
mkdir -p "$cache/big" out/bench
big="$cache/big/llama3-8b-shape-q4_k.gguf"
bf16="$cache/big/llama3-8b-shape-bf16"
[ -n "$only_mixes" ] || [ -f "$big" ] || { build/bench/make_big_model --gguf "$big"; sync; }  # sync: run_isa.sh
export OMP_NUM_THREADS=$threads
rss() {  # peak RSS in MiB and wall seconds of a command
  /usr/bin/time -f "%M %e" -o out/bench/time.txt "$@" >/dev/null 2>out/bench/err.txt || { cat out/bench/err.txt; return 1; }
  awk '{printf "peak RSS %.0f MiB (%.2f GiB), %.1f s\n", $1/1024, $1/1048576, $2}' out/bench/time.txt
}
isa="AVX2"; grep -q avx512_vnni /proc/cpuinfo && isa="AVX-512 VNNI"
echo "== $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) ($isa), $threads threads, load: $(uptime | sed 's/.*average: //')"
if [ -z "$only_mixes" ]; then  # sections 1-3
echo "== SmolLM2-135M Q4_1 ($smol)"
echo "-- focalscope native --"; build/bench/weights_bench "$smol" --prefill 512,2048 --decode 64 --reps 3
echo "-- focalscope fp32 --"; build/bench/weights_bench "$smol" --weights fp32 --prefill 512,2048 --decode 64 --reps 3
echo "-- llama-bench --"
# llama.cpp 0.3.36's prompt processing through its repacked (AMX) buffers crashes on Intel CPUs with AMX (a
# segmentation fault at pp512, seen 2026-11-27): the prefill rows then come from --repack 0, and the log says so.
if ! "$lb" -m "$smol" -t "$threads" -p 512,2048 -n 64 -r 3 -o md 2>/dev/null | grep -E "^\|"; then
  echo "(llama-bench failed with its defaults; again with --repack 0)"
  "$lb" -m "$smol" -t "$threads" -p 512,2048 -n 64 -r 3 --repack 0 -o md 2>/dev/null | grep -E "^\|"
fi
# Decode again, the two tools alternating, because a shared machine's memory bandwidth drifts by tens of percent
# within minutes: only ratios of neighbouring runs mean something.
for round in 1 2 3; do
  echo "-- decode round $round: focalscope native (held in memory), native --mmap, then llama-bench --"
  build/bench/weights_bench "$smol" --prefill 0 --decode 64 --reps 5 | grep decode
  build/bench/weights_bench "$smol" --mmap --prefill 0 --decode 64 --reps 5 | grep decode
  "$lb" -m "$smol" -t "$threads" -p 0 -n 64 -r 5 -o md 2>/dev/null | grep -E "tg64"
done
/usr/bin/python3 -c "print(' The cat sat on the mat.' * 72)" > out/bench/prompt-512.txt
echo -n "-- focal capture T=505 --store metrics: "; rss build/cli/focal capture "$smol" --prompt-file out/bench/prompt-512.txt --store metrics -o out/bench/smol-512.h5
echo "== Llama-3-8B shape, Q4_K ($big, $(du -h "$big" | cut -f1))"
echo "-- focalscope native (open: read into memory as the page cache has the file, again warm, then --mmap) --"
build/bench/weights_bench "$big" --prefill 0 --decode 0 --reps 1
build/bench/weights_bench "$big" --prefill 0 --decode 0 --reps 1
build/bench/weights_bench "$big" --mmap --prefill 0 --decode 0 --reps 1
for round in 1 2 3; do  # the first focalscope repetition also maps the file's pages: the median skips it
  echo "-- decode round $round: focalscope native (held in memory), native --mmap, then llama-bench --"
  build/bench/weights_bench "$big" --prefill 0 --decode 16 --reps 3 | grep decode
  build/bench/weights_bench "$big" --mmap --prefill 0 --decode 16 --reps 3 | grep decode
  "$lb" -m "$big" -t "$threads" -p 0 -n 16 -r 3 -o md 2>/dev/null | grep -E "tg16"
done
/usr/bin/python3 -c "print('x' * 2046)" > out/bench/prompt-2048.txt
echo -n "-- focal capture T=2048, metrics all heads + rows of layer 16: "
rss build/cli/focal capture "$big" --prompt-file out/bench/prompt-2048.txt --layers 16 --budget 7G -o out/bench/big-q4k.h5
build/cli/focal inspect out/bench/big-q4k.h5 | head -1 || true
if [ -z "$skip_bf16" ]; then
  [ -f "$bf16/model.safetensors" ] ||
    { build/bench/make_big_model --bf16 "$bf16" --tokenizer assets/models/tokenizer.model; sync; }
  echo "== Llama-3-8B shape, bf16 safetensors ($bf16, $(du -sh "$bf16" | cut -f1))"
  echo "-- focalscope native (open) --"; build/bench/weights_bench "$bf16" --prefill 0 --decode 0 --reps 1
  /usr/bin/python3 -c "print(' The cat sat on the mat.' * 290)" > out/bench/prompt-bf16.txt
  echo -n "-- focal capture ~2048 tokens, metrics all heads + rows of layer 16: "
  rss build/cli/focal capture "$bf16" --prompt-file out/bench/prompt-bf16.txt --layers 16 --budget 18G -o out/bench/big-bf16.h5
  build/cli/focal inspect out/bench/big-bf16.h5 | head -1 || true
fi
fi
if [ -n "$mixes" ]; then
  for mix in q2_k q3_k_m q4_k_m q5_k_m q6_k q8_0; do
    f="$cache/big/llama3-8b-shape-$mix.gguf"
    [ -f "$f" ] || { build/bench/make_big_model --gguf "$f" --mix "$mix"; sync; }
    echo "== Llama-3-8B shape, $mix mix ($f, $(du -h "$f" | cut -f1))"
    for round in 1 2; do
      echo "-- decode round $round: focalscope native (held in memory), then llama-bench --"
      build/bench/weights_bench "$f" --prefill 0 --decode 16 --reps 1 | grep decode
      "$lb" -m "$f" -t "$threads" -p 0 -n 16 -r 2 -o md 2>/dev/null | grep -E "tg16"
    done
  done
fi
echo "load after: $(uptime | sed 's/.*average: //')"

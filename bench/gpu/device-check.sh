#!/usr/bin/env bash
# The GPU checks of a lent machine in one run, from the pack that bench/gpu/pack.sh made here (.devpack/pack.tar.xz,
# carried): the CPU-vs-CUDA parity test, the same greedy tokens on both devices, bench/gpu/run.sh's prefill and
# kernel figures (98M at T = 512, 2048, 8192; 787M at 512, 2048), and Llama-3-8B's shape as Q4_K on the GPU (weights
# uploaded as fp16): open, decode, a T = 2048 capture and the GPU memory peaks. Each step has its own time limit and
# the script goes on past a failed one; the log also goes to $OUT/device-check.log (or out/device-check.log).
# usage: bench/gpu/device-check.sh [REPS] [PARTS]   REPS default 3; PARTS a comma list of parity, small, big, 1b
#        (default all four)
set -uo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 2
reps=${1:-3}
parts=,${2:-parity,small,big,1b},
want() { [[ $parts == *",$1,"* ]]; }
[ -f .devpack/pack.tar.xz ] || { echo "device-check: .devpack/pack.tar.xz missing: run bench/gpu/pack.sh here first" >&2; exit 2; }
pack=/tmp/devpack
rm -rf $pack && mkdir -p $pack && tar -C $pack -xJf .devpack/pack.tar.xz || exit 2
out=${OUT:-$root/out}; mkdir -p "$out" out/bench
log=$out/device-check.log
exec > >(tee "$log") 2>&1
# cuBLAS is dlopen'ed as libcublas.so: point at the device image's copy (the CUDA toolkit or PyTorch's wheel)
cub=$(ldconfig -p | awk '/libcublas\.so/ {print $NF; exit}')
[ -n "$cub" ] || cub=$(find /usr/local /opt /usr/lib -name 'libcublas.so*' 2>/dev/null | grep -v stubs | head -1)
mkdir -p /tmp/devlib; [ -n "$cub" ] && ln -sf "$cub" /tmp/devlib/libcublas.so
cubdir=$(dirname "${cub:-/x}")
export LD_LIBRARY_PATH=$pack/lib:/tmp/devlib:$cubdir
focal=$pack/bin/focal
step() {  # step SECONDS COMMAND..: a command under a time limit, its exit status and time
  local t=$1; shift; echo; echo "== $(date -u +%T) $*"; local s=$SECONDS
  timeout "$t" "$@"; echo "-- rc=$? in $((SECONDS - s)) s"
}
gstep() {  # gstep SECONDS COMMAND..: step, and the whole GPU's memory.used peak (MiB) while it runs
  local f=/tmp/smi.txt; : > $f
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > $f & local p=$!
  step "$@"; kill $p 2>/dev/null; wait $p 2>/dev/null
  echo "-- GPU memory.used peak: $(sort -n $f | tail -1) MiB (at start: $(head -1 $f) MiB)"
}
echo "== $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader); $(nproc) cores; cublas: ${cub:-none}"
if want parity; then
  step 300 env FOCAL_HF_FIXTURES="$pack/hf_fixtures" "$pack/bin/cuda_parity_test" --gtest_brief=1
  for d in cpu cuda; do  # the generated text alone (stdout) goes to the file
    step 60 bash -c '"$1" generate assets/models/focal-t0.4 --prompt "Once upon a time" -n 64 --device "$2" > "$3"' \
      _ "$focal" $d out/bench/gen-$d.txt
  done
  if cmp -s out/bench/gen-cpu.txt out/bench/gen-cuda.txt; then echo "greedy 64 tokens: the same text on cpu and cuda"
  else echo "greedy 64 tokens DIFFER:"; cat out/bench/gen-cpu.txt out/bench/gen-cuda.txt; fi
fi
if want small; then
  "$focal" init out/bench/h1024 --vocab 8000 --hidden 1024 --layers 8 --heads 16 --kv-heads 4 --intermediate 2816 \
    --context 8192 --attn focal --temp 0.4 >/dev/null
  gstep 200 "$pack/bin/gpu_bench" out/bench/h1024 512,2048,8192 "$reps"
fi
if want big; then
  big=/tmp/llama3-8b-shape-q4_k.gguf
  step 200 "$pack/bin/make_big_model" --gguf $big
  # open (Q4_K dequantised and rounded to fp16 on the host, uploaded) and 32 greedy tokens: the load is the wall time
  # less the tokens' own line
  gstep 200 "$focal" generate $big --device cuda --prompt "The cat sat on the mat." -n 32
  python3 -c "print('x' * 2046)" > out/bench/prompt-2048.txt
  gstep 240 "$focal" capture $big --device cuda --prompt-file out/bench/prompt-2048.txt --layers 16 --budget 24G \
    -o out/bench/big-q4k.h5
  step 30 bash -c '"$1" inspect "$2" | head -6' _ "$focal" out/bench/big-q4k.h5
  rm -f $big
fi
if want 1b; then
  "$focal" init out/bench/gpu1b --vocab 32000 --hidden 2048 --layers 16 --heads 16 --kv-heads 4 --intermediate 5632 \
    --context 8192 --attn focal --temp 0.4 >/dev/null
  gstep 200 "$pack/bin/gpu_bench" out/bench/gpu1b 512,2048 "$reps"
fi
echo "== done $(date -u +%T)"

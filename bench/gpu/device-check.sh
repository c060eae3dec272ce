#!/usr/bin/env bash
# The GPU checks of a lent machine in one run, from the pack that bench/gpu/pack.sh made here (.devpack/pack.tar.xz,
# carried). Parts (each step has its own time limit; the script goes on past a failed one):
#   parity  cuda_parity_test (every case, exact and fast); the same greedy text on cpu and cuda (exact); fast's text
#   8b      Llama-3-8B's shape in bf16 safetensors (random weights): prefill with every head's metrics and the
#           one-layer capture, fast (T = 2048, 8192) and exact (T = 2048); fast against exact (attention rows,
#           metrics, NLL, greedy tokens); PyTorch's sdpa forward and transformers eager with output_attentions on
#           the same files (bench/gpu/torch_llama.py)
#   live    the app's propagate on the same 8B files at T = 4096 (live_bench)
#   q4k     the same shape as Q4_K GGUF: open, decode, the memory peak of a T = 8192 capture with every head's
#           metrics; then decode A/B (int8 x, FOCAL_CUDA_DECODE_X8=1, and x rounded in the product's kernel, =2; x in
#           two int8 digits, FOCAL_CUDA_DECODE_X16=1; launch by launch, FOCAL_CUDA_GRAPHS=0), fast against exact
#           (greedy tokens, NLL; and with int8 x, and two digits) (the file stays in /tmp for llamacpp)
#   long    the Q4_K file again: 32 decode steps after a 16 000-token prompt, attention split over the keys and
#           (FOCAL_CUDA_SPLIT_ATTN=0) one block per row and head
#   small   a 98M model (fp32 weights: fast is TF32) at T = 512, 2048, 8192, exact and fast (gpu_bench)
#   q4km    (not in the default parts) the same shape as a Q4_K_M mix (Q6_K output, half of ffn_down and attn_v),
#           then as Q5_K_M and Q8_0: decode with fp32 x, int8 x and two int8 digits (decode_q4km_*,
#           decode_q4km_x8_*, decode_q4km_x16_*; decode_q5km_*, decode_q80_*)
#   70b     (not in the default parts) the stretch target: Llama-3-70B's shape as Q4_K (~40 GB, made there) loads
#           and decodes 32 tokens (gpu_bench), with the GPU's memory peak
#   llamacpp  llama.cpp's CUDA llama-bench (tg128) on that file, alternating with our decode twice, from
#           .devpack/llama.tar.xz (pack.sh): a second call, on the machine the first left warm, since the two packs
#           and the working tree together pass the device tool's 64 MiB (without the first call's pack on the
#           machine, llama-bench alone, and the file made again)
#   smol    (not in the default parts) SmolLM2 fast against exact (attention rows of layer 15, metrics, NLL and 64
#           greedy tokens on ~512 tokens of real text; then cuda_parity_test's SmolLM2FastAgainstExact), from the
#           parts bench/gpu/smol-parts.sh cut here (.devpack/smol/K, one a call: the file passes the device tool's
#           64 MiB with the tree): each call says which parts are still to carry, the one that completes them runs it
# The parts run in this order: parity, 8b, live, q4k, long, small, q4km, 70b, smol, llamacpp (the issue's
# measurements first). Writes $OUT/device-check.log and $OUT/gpu-latest.json (the issue-32 keys; bench/gpu/results_json.py),
# the JSON again after every step, so that a call cut short by its time limit still brings back what was measured.
# usage: bench/gpu/device-check.sh [REPS] [PARTS]   REPS default 3; PARTS a comma list (default
#        parity,small,8b,live,q4k,long; then llamacpp in a second call; smol in the calls after it; q4km and 70b
#        when time is left)
set -uo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 2
reps=${1:-3}
parts=,${2:-parity,small,8b,live,q4k,long},
want() { [[ $parts == *",$1,"* ]]; }
pack=/tmp/devpack
if [ -f .devpack/pack.tar.xz ]; then
  rm -rf $pack && mkdir -p $pack && tar -C $pack -xJf .devpack/pack.tar.xz || exit 2
elif [ ! -x $pack/bin/focal ] && [ "$parts" != ",llamacpp," ]; then
  echo "device-check: .devpack/pack.tar.xz missing: run bench/gpu/pack.sh here first" >&2; exit 2
fi
out=${OUT:-$root/out}; mkdir -p "$out" out/bench
log=$out/device-check.log
exec > >(tee "$log") 2>&1
# cuBLAS is dlopen'ed as libcublas.so: point at the device image's copy (the CUDA toolkit or PyTorch's wheel)
cub=$(ldconfig -p | awk '/libcublas\.so/ {print $NF; exit}')
[ -n "$cub" ] || cub=$(find /usr/local /opt /usr/lib -name 'libcublas.so*' 2>/dev/null | grep -v stubs | head -1)
mkdir -p /tmp/devlib; [ -n "$cub" ] && ln -sf "$cub" /tmp/devlib/libcublas.so
cubdir=$(dirname "${cub:-/x}")
# NCCL (llama-bench links it): the device image's copy, from the CUDA toolkit or PyTorch's wheel
nccl=$(ldconfig -p | awk '/libnccl\.so\.2/ {print $NF; exit}')
[ -n "$nccl" ] || nccl=$(find /usr/local /opt /usr/lib -name 'libnccl.so.2*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$pack/lib:/tmp/devlib:$cubdir${nccl:+:$(dirname "$nccl")}
focal=$pack/bin/focal
step() {  # step SECONDS COMMAND..: a command under a time limit, its exit status and time
  local t=$1; shift; echo; echo "== $(date -u +%T) $*"; local s=$SECONDS
  timeout "$t" "$@"; echo "-- rc=$? in $((SECONDS - s)) s"
  python3 bench/gpu/results_json.py "$log" > "$out/gpu-latest.json" 2>/dev/null  # what is measured so far
}
gstep() {  # gstep SECONDS COMMAND..: step, and the whole GPU's memory.used peak (MiB) while it runs
  local f=/tmp/smi.txt; : > $f
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > $f & local p=$!
  step "$@"; kill $p 2>/dev/null; wait $p 2>/dev/null
  echo "-- GPU memory.used peak: $(sort -n $f | tail -1) MiB (at start: $(head -1 $f) MiB)"
}
echo "== $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader); $(nproc) cores; cublas: ${cub:-none}"
echo "result device \"$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)\""
if want parity; then
  step 240 env FOCAL_HF_FIXTURES="$pack/hf_fixtures" "$pack/bin/cuda_parity_test" --gtest_brief=1
  for d in cpu cuda; do  # the generated text alone (stdout) goes to the file
    step 60 bash -c '"$1" generate assets/models/focal-t0.4 --prompt "Once upon a time" -n 64 --device "$2" \
      --precision exact > "$3"' _ "$focal" $d out/bench/gen-$d.txt
  done
  if cmp -s out/bench/gen-cpu.txt out/bench/gen-cuda.txt; then echo "greedy 64 tokens, exact: the same text on cpu and cuda"
  else echo "greedy 64 tokens, exact, DIFFER:"; cat out/bench/gen-cpu.txt out/bench/gen-cuda.txt; fi
  step 60 bash -c '"$1" generate assets/models/focal-t0.4 --prompt "Once upon a time" -n 64 --device cuda \
    --precision fast > out/bench/gen-fast.txt' _ "$focal"
  echo "fast: $(cat out/bench/gen-fast.txt)"
fi
big=/tmp/llama3-8b-shape-bf16
if want 8b || want live; then
  step 150 "$pack/bin/make_big_model" --bf16 $big --tokenizer assets/models/tokenizer.model --context 16384
fi
if want 8b; then
  gstep 200 "$pack/bin/gpu_bench" $big 2048,8192 "$reps" --precision fast --capture-layer --no-cpu --no-kernels
  gstep 150 "$pack/bin/gpu_bench" $big 2048 1 --precision exact,fast --accuracy 512 --no-cpu --no-kernels
  gstep 200 python3 bench/gpu/torch_llama.py $big --sdpa 2048,8192 --eager 2048,8192 --reps "$reps"
fi
if want live; then  # the app's propagate (into the buffers of the result before the last), then with fresh buffers
  gstep 90 "$pack/bin/live_bench" $big 4096 3 --device cuda --precision fast
  gstep 90 bash -c '"$1" "$2" 4096 3 --device cuda --precision fast --no-recycle | sed "s/^result propagate_/result fresh_propagate_/"' \
    _ "$pack/bin/live_bench" $big
fi
rm -rf $big
if want q4k; then
  q4k=/tmp/llama3-8b-shape-q4_k.gguf
  step 150 "$pack/bin/make_big_model" --gguf $q4k --context 16384
  # decode (the quantized matrix-vector kernels) and its share of the copy bandwidth; results renamed decode_q4k_*
  gstep 150 bash -c '"$1" "$2" 0 3 --precision fast --decode 128 --no-cpu --no-kernels | sed "s/^result decode_/result decode_q4k_/"' \
    _ "$pack/bin/gpu_bench" $q4k
  # the memory peak of a T = 8192 capture with every head's metrics (before the A/B runs below, so that a run cut
  # short by the call's time limit still has it)
  python3 -c "print('x' * 8190)" > out/bench/prompt-8192.txt
  gstep 200 bash -c '"$1" capture "$2" --device cuda --prompt-file out/bench/prompt-8192.txt --layers 16 --heads 0 \
    --budget 64G -o out/bench/big-q4k.h5 | tee /tmp/capture.txt' _ "$focal" $q4k
  echo "result device_gib_q4k_T8192 $(sort -n /tmp/smi.txt | tail -1 | awk '{printf "%.2f", $1 / 1024}')"
  # focalscope's own count of what it held there (weights, activations, scratch, pool), beside nvidia-smi's whole
  echo "result device_held_gib_q4k_T8192 $(awk '/^device memory at peak:/ {print $5}' /tmp/capture.txt)"
  rm -f out/bench/big-q4k.h5
  # A/B in the same run: the decode product with x in int8 (opt-in, llama.cpp's way), results decode_q4k_x8_*, with
  # x rounded inside the product's kernel (no quantize launch), decode_q4k_x8k_*, and with x in two int8 digits
  # (16-bit x, twice the dp4a), decode_q4k_x16_*
  for v in X8=1:x8 X8=2:x8k X16=1:x16; do
    gstep 150 bash -c 'env FOCAL_CUDA_DECODE_$3 "$1" "$2" 0 2 --precision fast --decode 128 --no-cpu --no-kernels |
      sed "s/^result decode_/result decode_q4k_$4_/"' _ "$pack/bin/gpu_bench" $q4k ${v%%:*} ${v##*:}
  done
  # A/B: decode steps launch by launch instead of one CUDA graph a step (decode_q4k_nograph_*)
  gstep 150 bash -c 'FOCAL_CUDA_GRAPHS=0 "$1" "$2" 0 2 --precision fast --decode 128 --no-cpu --no-kernels |
    sed "s/^result decode_/result decode_q4k_nograph_/"' _ "$pack/bin/gpu_bench" $q4k
  # fast against exact on the Q4_K file: NLL, attention rows, 64 greedy tokens (accuracy_q4k_*); then fast with
  # int8 x in decode (accuracy_q4k_x8_*: the greedy tokens are what moves), and with two int8 digits
  for v in X8=0:q4k X8=1:q4k_x8 X16=1:q4k_x16; do
    gstep 150 bash -c 'env FOCAL_CUDA_DECODE_$3 "$1" "$2" 512 1 --precision exact,fast --accuracy 512 --no-cpu \
      --no-kernels | sed -e "s/^result accuracy_/result accuracy_$4_/" -e "s/^result prefill_/result $4_prefill_/"' \
      _ "$pack/bin/gpu_bench" $q4k ${v%%:*} ${v##*:}
  done
fi
if want long; then  # decode past a 16 000-token prompt (its fp32 KV cache 4 GiB) on the Q4_K file: attention split
  # over the keys (the default) against one block per row and head (FOCAL_CUDA_SPLIT_ATTN=0): decode_q4k_long_*,
  # decode_q4k_long_fused_*
  q4k=/tmp/llama3-8b-shape-q4_k.gguf
  [ -f $q4k ] || step 150 "$pack/bin/make_big_model" --gguf $q4k --context 16384
  for v in 1:long 0:long_fused; do
    gstep 120 bash -c 'FOCAL_CUDA_SPLIT_ATTN=$3 "$1" "$2" 0 1 --precision fast --decode 32 --decode-prompt 16000 \
      --no-cpu --no-kernels | sed "s/^result decode_/result decode_q4k_$4_/"' _ "$pack/bin/gpu_bench" $q4k ${v%%:*} ${v##*:}
  done
fi
if want small; then
  "$focal" init out/bench/h1024 --force --vocab 8000 --hidden 1024 --layers 8 --heads 16 --kv-heads 4 --intermediate 2816 \
    --context 8192 --attn focal --temp 0.4 >/dev/null
  gstep 150 "$pack/bin/gpu_bench" out/bench/h1024 512,2048,8192 "$reps" --no-cpu
fi
if want q4km; then  # (not in the default parts) the mixes: Q6_K's, Q5_K's and Q8_0's int8-x kernels beside Q4_K's
  for mix in q4_k_m:q4km q5_k_m:q5km q8_0:q80; do
    f=/tmp/llama3-8b-shape-${mix%%:*}.gguf tag=${mix##*:}
    step 150 "$pack/bin/make_big_model" --gguf $f --mix ${mix%%:*} --context 16384
    for v in X8=0:$tag X8=1:${tag}_x8 X16=1:${tag}_x16; do
      gstep 150 bash -c 'env FOCAL_CUDA_DECODE_$3 "$1" "$2" 0 2 --precision fast --decode 128 --no-cpu --no-kernels |
        sed "s/^result decode_/result decode_$4_/"' _ "$pack/bin/gpu_bench" $f ${v%%:*} ${v##*:}
    done
    rm -f $f
  done
fi
if want 70b; then
  q70=/tmp/llama3-70b-shape-q4_k.gguf
  step 300 "$pack/bin/make_big_model" --gguf $q70 --shape 70b --context 4096
  gstep 300 bash -c '"$1" "$2" 0 1 --precision fast --decode 32 --no-cpu --no-kernels | sed "s/^result decode_/result decode_70b_q4k_/"' \
    _ "$pack/bin/gpu_bench" $q70
  rm -f $q70
fi
if want smol; then  # SmolLM2's parts gather on the warm machine, one a call (bench/gpu/smol-parts.sh)
  sm=.devpack/smol
  n=$(awk '/^parts / {print $2}' $sm/0/manifest 2>/dev/null)
  have="" missing=""
  for ((k = 0; k < ${n:-1}; ++k)); do if [ -f $sm/$k/part ]; then have+=" $k"; else missing+=" $k"; fi; done
  if [ -z "$n" ] || [ -n "$missing" ]; then
    echo "smol: parts here:${have:- none}; still to carry:${missing}${n:+ of $n} (.devpack/smol/K, one a call)"
  else
    g=/tmp/smollm2.gguf
    for ((k = 0; k < n; ++k)); do cat $sm/$k/part; done > $g
    if [ "$(sha256sum $g | cut -d' ' -f1)" != "$(awk '/^sha256 / {print $2}' $sm/0/manifest)" ]; then
      echo "smol: the joined file's sha256 is not the manifest's: cut the parts again (bench/gpu/smol-parts.sh)"
    else
      gstep 150 bash -c '"$1" "$2" 0 1 --precision exact,fast --accuracy 512 --accuracy-text "$3" --no-cpu --no-kernels |
        sed "s/^result accuracy_/result accuracy_smol_/"' _ "$pack/bin/gpu_bench" $g $sm/0/text.txt
      step 120 env FOCAL_SMOLLM2_GGUF=$g "$pack/bin/cuda_parity_test" --gtest_filter=CudaParity.SmolLM2FastAgainstExact
    fi
    rm -f $g
  fi
fi
if want llamacpp; then
  q4k=/tmp/llama3-8b-shape-q4_k.gguf
  lb=/tmp/devllama
  if [ -f .devpack/llama.tar.xz ]; then
    rm -rf $lb && mkdir -p $lb && tar -C $lb -xJf .devpack/llama.tar.xz
    [ -f $q4k ] || step 150 $lb/bin/make_big_model --gguf $q4k --context 16384
    for round in 1 2; do  # alternating: ours, llama.cpp, ours, llama.cpp (the last of each is the result)
      [ -x "$pack/bin/gpu_bench" ] &&
        gstep 150 bash -c '"$1" "$2" 0 3 --precision fast --decode 128 --no-cpu --no-kernels | sed "s/^result decode_/result decode_q4k_/"' \
          _ "$pack/bin/gpu_bench" $q4k
      gstep 120 bash -c '"$1" -m "$2" -ngl 99 -p 0 -n 128 -r 3 | tee /tmp/llamabench.txt' _ $lb/bin/llama-bench $q4k
      echo "result llamacpp_cuda_tg128 $(awk -F'|' '/tg128/ {gsub(/ /, "", $(NF-1)); split($(NF-1), a, "±"); print a[1]}' /tmp/llamabench.txt)"
    done
  else
    echo "device-check: .devpack/llama.tar.xz missing: build llama.cpp (bench/llamacpp/build.sh --cuda), then pack.sh"
  fi
fi
echo "== done $(date -u +%T)"
python3 bench/gpu/results_json.py "$log" > "$out/gpu-latest.json" && echo "wrote $out/gpu-latest.json"

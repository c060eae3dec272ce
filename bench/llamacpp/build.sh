#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench` as a benchmark peer for focalscope: the CPU build, or with --cuda the CUDA build
# for a lent H100 / H200 (sm_90, no host-CPU tuning, so it runs on the device machine's CPU; carried there in
# .devpack by bench/gpu/pack.sh), or with --avx2 a CPU build limited to AVX2 + FMA + F16C (AVX-512 off), the peer
# of focalscope's FOCAL_QUANT_ISA=avx2 (issue 37). The CUDA compile takes about an hour on 2 cores: start it early, in the background.
# The llama.cpp source comes from PyPI: the llama-cpp-python sdist vendors it under vendor/llama.cpp
# (PyPI and Debian are the only registries reachable). Everything is downloaded, unpacked and built under
# ${FOCAL_CACHE:-/root/.cache/focalscope}/llama.cpp; nothing is written into the repository.
# Idempotent: if the binary already exists, its path is printed and nothing is rebuilt.
# Progress goes to stderr; the last stdout line is the absolute path of the llama-bench binary.
#   usage: bench/llamacpp/build.sh [--cuda | --avx2] [--help]
#   env:   FOCAL_CACHE (cache root), LLAMA_CPP_PY_VERSION (sdist version, default 0.3.36), JOBS (default 2)
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--cuda | --avx2] [--help]
Builds llama.cpp's llama-bench (CPU, -DGGML_NATIVE=ON, Release) from the source vendored in PyPI's
llama-cpp-python sdist, under \${FOCAL_CACHE:-/root/.cache/focalscope}/llama.cpp (outside the repo),
and prints the absolute path of the binary as the last line of stdout. Re-running is a no-op.
--cuda: the CUDA build (GGML_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=90, GGML_NATIVE=OFF) in build-cuda-VERSION.
--avx2: the CPU build with GGML_NATIVE=OFF, AVX2 + FMA + F16C and every AVX-512 flag off, in build-avx2-VERSION.
env: FOCAL_CACHE, LLAMA_CPP_PY_VERSION (default 0.3.36), JOBS (default 2)
USAGE
}
cuda=0
avx2=0
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --cuda) cuda=1 ;;
  --avx2) avx2=1 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac

ver=${LLAMA_CPP_PY_VERSION:-0.3.36}
jobs=${JOBS:-2}
root="${FOCAL_CACHE:-/root/.cache/focalscope}/llama.cpp"
src="$root/llama-cpp-python-$ver"
bld="$root/build-$ver"
[ $cuda = 1 ] && bld="$root/build-cuda-$ver"
[ $avx2 = 1 ] && bld="$root/build-avx2-$ver"
bin="$bld/bin/llama-bench"
log() { echo "[llamacpp/build] $*" >&2; }

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$root"
if [ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
  # pip: prefer the Debian one, else whatever python3 has; `pip download` is allowed even in an
  # externally-managed environment (PEP 668 only blocks installs).
  pip=()
  for py in /usr/bin/python3 python3; do
    if "$py" -m pip --version >/dev/null 2>&1; then pip=("$py" -m pip); break; fi
  done
  [ ${#pip[@]} -gt 0 ] || { log "no working pip (apt-get install python3-pip)"; exit 1; }
  dl="$root/sdist"
  mkdir -p "$dl"
  tgz="$dl/llama_cpp_python-$ver.tar.gz"
  if [ ! -f "$tgz" ]; then
    log "downloading llama-cpp-python==$ver sdist with ${pip[*]}"
    "${pip[@]}" download --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$dl" >&2
  fi
  [ -f "$tgz" ] || tgz=$(ls "$dl"/llama_cpp_python-"$ver".tar.gz "$dl"/llama-cpp-python-"$ver".tar.gz 2>/dev/null | head -1)
  [ -n "$tgz" ] && [ -f "$tgz" ] || { log "sdist not found in $dl"; exit 1; }
  log "unpacking $(basename "$tgz")"
  tmp=$(mktemp -d "$root/unpack.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  tar -xzf "$tgz" -C "$tmp"
  top=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -1)
  [ -f "$top/vendor/llama.cpp/CMakeLists.txt" ] || { log "no vendor/llama.cpp in the sdist"; exit 1; }
  rm -rf "$src"
  mv "$top" "$src"
fi

log "configuring in $bld"
backend=(-DGGML_NATIVE=ON -DGGML_CUDA=OFF)
[ $cuda = 1 ] && backend=(-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_CUDA=ON
  -DCMAKE_CUDA_ARCHITECTURES=90)
[ $avx2 = 1 ] && backend=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
  -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_CUDA=OFF)
cmake -S "$src/vendor/llama.cpp" -B "$bld" \
  -DCMAKE_BUILD_TYPE=Release \
  "${backend[@]}" \
  -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_HIP=OFF -DGGML_SYCL=OFF -DGGML_OPENCL=OFF \
  -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DBUILD_SHARED_LIBS=OFF >&2
log "building llama-bench (-j$jobs)"
nice -n 10 cmake --build "$bld" --target llama-bench -j"$jobs" >&2
[ -x "$bin" ] || { log "build finished but $bin is missing"; exit 1; }
echo "$bin"

#!/usr/bin/env bash
# Builds the CUDA binaries here (nvcc, sm_90) and packs them, with the shared libraries they need and the parity
# test's fixtures, into .devpack/pack.tar.xz (ignored by git; ~25 MB, under the device tool's 64 MiB), for a lent GPU
# machine whose image has CUDA but not this project's Debian libraries (HDF5, cairo, sentencepiece, OpenBLAS); and
# llama.cpp's CUDA llama-bench, when bench/llamacpp/build.sh --cuda has built it, into .devpack/llama.tar.xz.
# bench/gpu/device-check.sh runs the pack there.
# usage: bench/gpu/pack.sh [CUDA_ARCH]       (default 90: H100 / H200)
set -euo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
arch=${1:-90}
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DFOCAL_CUDA=ON -DFOCAL_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
cmake --build build-cuda -j"$(nproc)" --target focal gpu_bench live_bench cuda_parity_test make_big_model
fixtures=build-cuda/tests/hf_fixtures  # the parity test's HF fixtures (transformers 4.47.1 in .venv)
if [ -z "$(ls -A "$fixtures" 2>/dev/null)" ]; then
  tests/hf/setup_venv.sh >/dev/null
  .venv/bin/python tests/hf/make_fixtures.py --out "$fixtures" >/dev/null
fi
# llama.cpp's CUDA llama-bench (bench/llamacpp/build.sh --cuda), when it has been built: decode's named peer
lcpp=${FOCAL_CACHE:-/root/.cache/focalscope}/llama.cpp/build-cuda-${LLAMA_CPP_PY_VERSION:-0.3.36}/bin/llama-bench
rm -rf .devpack && mkdir -p .devpack/bin .devpack/lib
bins="build-cuda/cli/focal build-cuda/bench/gpu_bench build-cuda/bench/live_bench build-cuda/tests/cuda_parity_test
  build-cuda/bench/make_big_model"
cp $bins .devpack/bin/
# every library the binaries resolve here except glibc's own (the device's glibc is newer), the CUDA driver,
# cuBLAS (600 MB) and NCCL (llama-bench's, 218 MB): the device image has its own
for b in $bins; do ldd "$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|libresolv|ld-linux-x86-64|libcuda|libcublas|libcublasLt|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" .devpack/lib/; done
# the architecture fixtures cuda_parity_test names (not the 35 MB long-context one, nor the GGUF twins)
mkdir -p .devpack/hf_fixtures
for d in "$fixtures"/*/; do
  case "$(basename "$d")" in long_1024|gqa_untied) ;; *) cp -r "$d" .devpack/hf_fixtures/ ;; esac
done
grep -qx '/.devpack/' .git/info/exclude 2>/dev/null || echo '/.devpack/' >> .git/info/exclude
# the commit the pack was built from (with "+dirty" for uncommitted changes), for gpu-latest.json
echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo +dirty)" > .devpack/commit.txt
tar -C .devpack -cJf .devpack.tar.xz bin lib hf_fixtures && cp .devpack/commit.txt .devpack.commit.txt &&
  rm -rf .devpack && mkdir .devpack && mv .devpack.tar.xz .devpack/pack.tar.xz && mv .devpack.commit.txt .devpack/commit.txt
# llama-bench (stripped, statically linked to ggml: ~41 MB packed) and make_big_model travel apart, in
# .devpack/llama.tar.xz: with the pack and the working tree they pass the device tool's 64 MiB, so the peer runs in a
# second call (device-check.sh's part llamacpp), on the machine the first call left warm
if [ -x "$lcpp" ]; then
  rm -rf .devpack/llama && mkdir -p .devpack/llama/bin
  cp build-cuda/bench/make_big_model .devpack/llama/bin/ && cp "$lcpp" .devpack/llama/bin/ && strip .devpack/llama/bin/llama-bench
  tar -C .devpack/llama -cJf .devpack/llama.tar.xz bin && rm -rf .devpack/llama
  du -sh .devpack/llama.tar.xz
fi
du -sh .devpack/pack.tar.xz

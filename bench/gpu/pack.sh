#!/usr/bin/env bash
# Builds the CUDA binaries here (nvcc, sm_90) and packs them, with the shared libraries they need and the parity
# test's fixtures, into .devpack/pack.tar.xz (ignored by git; ~28 MB, under the device tool's 64 MiB), for a lent
# GPU machine whose image has CUDA but not this project's Debian libraries (HDF5, cairo, sentencepiece, OpenBLAS).
# bench/gpu/device-check.sh runs the pack there.
# usage: bench/gpu/pack.sh [CUDA_ARCH]       (default 90: H100 / H200)
set -euo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
arch=${1:-90}
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DFOCAL_CUDA=ON -DFOCAL_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
cmake --build build-cuda -j"$(nproc)" --target focal gpu_bench cuda_parity_test make_big_model
cmake --build build -j"$(nproc)" --target hf_fixtures 2>/dev/null || true   # the parity test's HF fixtures
rm -rf .devpack && mkdir -p .devpack/bin .devpack/lib
bins="build-cuda/cli/focal build-cuda/bench/gpu_bench build-cuda/tests/cuda_parity_test build-cuda/bench/make_big_model"
cp $bins .devpack/bin/
# every library the binaries resolve here except glibc's own (the device's glibc is newer), the CUDA driver and
# cuBLAS (600 MB; the device image has its own)
for b in $bins; do ldd "$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|libresolv|ld-linux-x86-64|libcuda|libcublas|libcublasLt)\.so' |
  while read -r lib; do cp -L "$lib" .devpack/lib/; done
# the architecture fixtures cuda_parity_test names (not the 35 MB long-context one, nor the GGUF twins)
mkdir -p .devpack/hf_fixtures
for d in build/tests/hf_fixtures/*/; do
  case "$(basename "$d")" in long_1024|gqa_untied) ;; *) cp -r "$d" .devpack/hf_fixtures/ ;; esac
done
grep -qx '/.devpack/' .git/info/exclude 2>/dev/null || echo '/.devpack/' >> .git/info/exclude
tar -C .devpack -cJf .devpack.tar.xz bin lib hf_fixtures && rm -rf .devpack && mkdir .devpack &&
  mv .devpack.tar.xz .devpack/pack.tar.xz
du -sh .devpack/pack.tar.xz

#!/usr/bin/env bash
# Configures and builds focalscope into build/ (Release). Extra arguments go to cmake's configure step.
# FOCAL_CUDA=AUTO|ON|OFF in the environment picks the CUDA backend (default AUTO: built when nvcc is found;
# CI sets ON so that a machine image without nvcc fails instead of quietly skipping the CUDA compile).
# FOCAL_MPI=AUTO|ON|OFF likewise for focal batch over MPI (CI sets ON: the MPI tests cannot silently vanish).
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_opt=()
[ -n "${FOCAL_CUDA:-}" ] && cuda_opt=(-DFOCAL_CUDA="$FOCAL_CUDA")  # unset: the cached choice (first time AUTO)
[ -n "${FOCAL_MPI:-}" ] && cuda_opt+=(-DFOCAL_MPI="$FOCAL_MPI")     # the same for MPI (focal batch's scale-out)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda_opt[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"

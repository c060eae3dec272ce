#!/usr/bin/env bash
# ctest driver of the Python package: builds python/ and installs it into the repo-root .venv (the pinned build tools
# of tests/python/setup_venv.sh, no build isolation, the persistent build tree python/build/), then runs the pytest
# suite with the `focal` CLI as the oracle. usage: run.sh FOCAL_BIN SOURCE_DIR OUT_DIR
# The CI build of the package is CPU-only (FOCALSCOPE_CUDA=OFF unless set) to keep it short; the CUDA code is compiled
# by the main build.
set -euo pipefail
focal=$1 src=$2 out=$3
venv=$src/.venv
"$src/tests/python/setup_venv.sh"
export FOCALSCOPE_CUDA=${FOCALSCOPE_CUDA:-OFF}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
start=$(date +%s)
(cd "$src" && "$venv/bin/pip" install --no-build-isolation --no-deps -q ./python)
echo "run.sh: built and installed the focalscope package in $(( $(date +%s) - start )) s"
rm -rf "$out" && mkdir -p "$out"
cd "$src"
FOCAL_CLI=$focal FOCAL_PY_OUT=$out PYTHONDONTWRITEBYTECODE=1 \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python

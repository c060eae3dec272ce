#!/usr/bin/env bash
# Installs what the tests need (Debian packages, the transformers 4.47.1 venv for the Hugging Face conformance
# tier), builds, and runs every test with ctest, then the Python capture example.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
tests/hf/setup_venv.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)")

#!/usr/bin/env bash
# Installs what the tests need (Debian packages, the transformers 4.47.1 venv for the Hugging Face conformance
# tier; the Python package's pinned build and test tools), builds, and runs every test with ctest (the Python
# package is built and tested by the python_package test).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
tests/hf/setup_venv.sh
tests/python/setup_venv.sh   # the Python package's build and test tools (pinned) in the same .venv
scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)")

#!/usr/bin/env bash
# The main job: install dependencies, build, make the demo model, capture focal (t = 0.4) vs standard attention
# on a prompt into out/demo.h5 and print the per-head summary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
scripts/build.sh
mkdir -p out
[ -f out/models/focal-random/config.json ] || scripts/make-demo-model.sh out/models
prompt="In the beginning God created the heaven and the earth. And the earth was without form, and void."
build/cli/focal capture out/models/focal-random --prompt "$prompt" --compare standard --layers 0-3 -o out/demo.h5
build/cli/focal inspect out/demo.h5
echo "capture written to $root/out/demo.h5 (read it from Python: /usr/bin/python3 examples/read_capture.py out/demo.h5)"

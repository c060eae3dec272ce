#!/usr/bin/env bash
# The main job without a display: install dependencies, build, then run the bundled focal model (t = 0.4) and the
# same model under standard attention on a prompt, sweep t, and write the capture, the sweep and a gallery of
# figures into out/demo (paths printed at the end).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
scripts/build.sh
build/cli/focal demo --model assets/models/focal-t0.4 --out out/demo
build/cli/focal inspect out/demo/capture.h5 | head -30

#!/usr/bin/env bash
# clang-tidy (checks and WarningsAsErrors in .clang-tidy: bugprone-*, performance-*) over the project's own C++
# sources, in parallel, from the compile commands of a configured build directory (default build/). Exits non-zero
# on any finding. Usage: scripts/run-clang-tidy.sh [BUILD_DIR] [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
jobs="${2:-$(nproc)}"
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[ -n "$tidy" ] || { echo "run-clang-tidy: clang-tidy 14 is not installed (apt-get install clang-tidy-14)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || { echo "run-clang-tidy: no $build/compile_commands.json (configure first)" >&2; exit 2; }
# Each source once (the emulated CUDA test compiles the runtime a second time), only files in the repository
# (not generated ones under the build directory), no CUDA (.cu) sources.
mapfile -t files < <(python3 - "$build" <<'PY'
import json, os, sys
root = os.getcwd()
seen = []
for e in json.load(open(os.path.join(sys.argv[1], "compile_commands.json"))):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    if not f.startswith(root + "/") or f.startswith(os.path.abspath(sys.argv[1]) + "/") or f.endswith(".cu"):
        continue
    if f not in seen:
        seen.append(f)
print("\n".join(seen))
PY
)
echo "run-clang-tidy: ${#files[@]} files, $jobs jobs"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -n 4 "$tidy" -p "$build" --quiet >"$log" 2>/dev/null || status=$?
if [ $status -ne 0 ] || grep -q "error:\|warning:" "$log"; then
  grep -E "(error|warning):" "$log" | sort -u >&2 || true
  echo "run-clang-tidy: findings above (fix them, or disable a noisy check in .clang-tidy with a reason)" >&2
  exit 1
fi
echo "run-clang-tidy: clean"

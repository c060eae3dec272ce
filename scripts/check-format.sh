#!/usr/bin/env bash
# Checks that the C/C++/CUDA files changed since BASE are formatted with .clang-format (clang-format 14).
# BASE: the first argument, else $FOCAL_FORMAT_BASE, else the merge-base with origin/main or main, else HEAD~1.
# --all checks every tracked file instead (CI: on a fresh clone of main the base would be the last commit alone).
# Files in .clang-format-ignore-list (the CUDA emulation headers) are skipped.
# --fix rewrites the files instead of failing. Exit status 1 lists the files that need formatting.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--help" ]; then sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
fix=0 all=0
if [ "${1:-}" = "--fix" ]; then fix=1; shift; fi
if [ "${1:-}" = "--all" ]; then all=1; shift; fi
cf=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$cf" ] || { echo "check-format: clang-format 14 is not installed (apt-get install clang-format-14)" >&2; exit 2; }
base="${1:-${FOCAL_FORMAT_BASE:-}}"
if [ -z "$base" ]; then
  for ref in origin/main main; do
    if git rev-parse -q --verify "$ref" >/dev/null && [ "$(git rev-parse "$ref")" != "$(git rev-parse HEAD)" ]; then
      base=$(git merge-base HEAD "$ref") && break
    fi
  done
fi
[ -n "$base" ] || base=$(git rev-parse -q --verify HEAD~1 || git hash-object -t tree /dev/null)
[ $all = 1 ] && base=$(git hash-object -t tree /dev/null)  # the empty tree: every tracked file is "changed"
mapfile -t files < <( (git diff --name-only --diff-filter=ACMR "$base" -- '*.cpp' '*.h' '*.inc' '*.cu' '*.cuh';
                       git ls-files --others --exclude-standard -- '*.cpp' '*.h' '*.inc' '*.cu' '*.cuh') | sort -u |
                     grep -v -x -f <(grep -v '^#' .clang-format-ignore-list | sed '/^$/d') || true)
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if [ $fix = 1 ]; then "$cf" --style=file -i "$f"
  elif ! "$cf" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) changed since ${base:0:12} are not clang-formatted:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix with: scripts/check-format.sh --fix $base" >&2
  exit 1
fi
if [ $all = 1 ]; then echo "check-format: all ${#files[@]} tracked C/C++/CUDA files are formatted"
else echo "check-format: ${#files[@]} changed file(s) since ${base:0:12} are formatted"; fi

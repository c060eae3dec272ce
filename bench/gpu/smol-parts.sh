#!/usr/bin/env bash
# Cuts SmolLM2's GGUF (scripts/fetch-smollm2.sh; 98 MB, more than the device tool carries in one call beside the
# working tree) into parts that each fit one call with the tree, for issue 32's fast-against-exact report on the
# device: .devpack/smol/0 .. N-1 (ignored by git), one folder per call. Folder 0 also holds the whole file's sha256
# and N (manifest) and ~6 KB of real English text for the prompt (Sherlock Holmes from Debian's
# golang-github-bkaradzic-go-lz4-dev, else the KJV from bible-kjv). Carry .devpack/smol/K in call K, on the machine
# the earlier calls left warm, with `bench/gpu/device-check.sh 1 smol`: the last call finds every part there,
# joins them, checks the sha256 and runs the comparison; the earlier ones say which parts are still missing.
# usage: bench/gpu/smol-parts.sh [N]   (default: the fewest parts that fit 62 MiB with the tracked tree)
set -euo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
smol="$(scripts/fetch-smollm2.sh | tail -1)"
size=$(stat -c %s "$smol")
tree=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
room=$((62 * 1024 * 1024 - tree))  # what one call has left for a part, under the tool's 64 MiB with 2 MiB spare
if [ "$room" -le $((8 * 1024 * 1024)) ]; then
  echo "smol-parts.sh: the tracked tree is $((tree / 1048576)) MiB: too little room left for parts of SmolLM2" >&2
  exit 1
fi
n=${1:-$(((size + room - 1) / room))}
case "$n" in '' | *[!0-9]* | 0) echo "smol-parts.sh: N must be a positive whole number, not '$n'" >&2; exit 2 ;; esac
part=$(((size + n - 1) / n))
if [ "$part" -gt "$room" ]; then
  echo "smol-parts.sh: $n parts of $((part / 1048576)) MiB do not fit beside the $((tree / 1048576)) MiB tree;" \
    "give a larger N (at least $(((size + room - 1) / room)))" >&2
  exit 2
fi
text=/usr/share/gocode/src/github.com/bkaradzic/go-lz4/testdata/pg1661.txt
tmp=.devpack/smol.tmp
rm -rf "$tmp" && mkdir -p "$tmp/0"
if [ -f "$text" ]; then
  (set +o pipefail; sed -n '/^ADVENTURE I\./,$p' "$text" | tr -d '\r' | head -c 6000) > "$tmp/0/text.txt"
elif command -v bible >/dev/null; then
  (set +o pipefail; bible "gen1:1-gen3:24" | sed 's/^[A-Za-z]* [0-9]*:[0-9]* *//' | head -c 6000) > "$tmp/0/text.txt"
else
  echo "smol-parts.sh: no text for the prompt: apt-get install golang-github-bkaradzic-go-lz4-dev (or bible-kjv)" >&2
  exit 1
fi
for ((k = 0; k < n; ++k)); do
  mkdir -p "$tmp/$k"
  dd if="$smol" of="$tmp/$k/part" bs=1M iflag=skip_bytes,count_bytes skip=$((k * part)) count="$part" status=none
done
printf 'parts %d\nsha256 %s\n' "$n" "$(sha256sum "$smol" | cut -d' ' -f1)" > "$tmp/0/manifest"
grep -qx '/.devpack/' .git/info/exclude 2>/dev/null || echo '/.devpack/' >> .git/info/exclude
rm -rf .devpack/smol && mv "$tmp" .devpack/smol
echo "SmolLM2 ($((size / 1048576)) MiB) in $n parts of up to $((part / 1048576)) MiB beside a $((tree / 1048576)) MiB tree;"
for ((k = 0; k < n; ++k)); do echo "  call $((k + 1)): carry .devpack/smol/$k, run bench/gpu/device-check.sh 1 smol"; done

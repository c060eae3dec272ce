#!/usr/bin/env bash
# What the damaged-file check (runtime/src/h5_guard.cpp, issue 36) adds to opening a large capture: writes a capture
# of about 1 GB (a random model of 7 layers x 8 heads, T tokens, two runs with fp32 probabilities and scores of every
# head), then opens it REPS times with `focal inspect` (which reads the whole file) with the check off (FOCAL_H5_CHECK=0) and on,
# alternating, after one warm-up read that fills the page cache; and times the check alone (h5_bytes_fuzz
# --time-check: the fork, the child's walk, the wait). Prints the medians and the check's share of an open.
#   usage: bench/run_h5_check.sh [REPS] [T]     (default 5, 1600 tokens)
#   env: FOCAL (default build/cli/focal), FUZZ (default build/tests/h5_bytes_fuzz)
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
reps="${1:-5}"
T="${2:-1600}"
focal="${FOCAL:-build/cli/focal}"
fuzz="${FUZZ:-build/tests/h5_bytes_fuzz}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$focal" init "$work/model" --vocab 512 --hidden 256 --layers 7 --heads 8 --kv-heads 2 --intermediate 512 \
  --context 2048 >/dev/null
# T token ids of the model's vocabulary (a fixed pseudo-random sequence; the file's size is what matters).
python3 -c "import random; r = random.Random(1); print(' '.join(str(r.randrange(3, 512)) for _ in range($T)))" \
  > "$work/ids.txt"
"$focal" capture "$work/model" --ids "$work/ids.txt" --temp 0.4 --compare standard --budget 8G -o "$work/big.h5" >/dev/null
size=$(stat -c %s "$work/big.h5")
echo "capture: $size bytes ($(python3 -c "print(f'{$size/1e9:.2f}')") GB), $T tokens"
FOCAL_H5_CHECK=0 "$focal" inspect "$work/big.h5" >/dev/null  # warm-up: the page cache holds the file
time_one() {  # time_one CHECK: seconds of one `focal inspect`; a copy under a new name, so the check is not cached
  cp --reflink=auto "$work/big.h5" "$work/open-$1.h5" 2>/dev/null || cp "$work/big.h5" "$work/open-$1.h5"
  local t0 t1
  t0=$(date +%s.%N)
  FOCAL_H5_CHECK="$1" "$focal" inspect "$work/open-$1.h5" >/dev/null
  t1=$(date +%s.%N)
  rm -f "$work/open-$1.h5"
  python3 -c "print($t1 - $t0)"
}
off=() on=() alone=()
for ((i = 0; i < reps; i++)); do
  off+=("$(time_one 0)")
  on+=("$(time_one 1)")
  alone+=("$("$fuzz" --time-check "$work/big.h5" | sed -n 's/.*the check took \([0-9.]*\) s/\1/p')")
done
python3 - "${off[*]}" "${on[*]}" "${alone[*]}" <<'PY'
import statistics, sys
off = [float(x) for x in sys.argv[1].split()]
on = [float(x) for x in sys.argv[2].split()]
alone = [float(x) for x in sys.argv[3].split()]
mo, mn = statistics.median(off), statistics.median(on)
print(f"focal inspect, check off: median {mo:.3f} s  ({' '.join(f'{x:.3f}' for x in off)})")
print(f"focal inspect, check on:  median {mn:.3f} s  ({' '.join(f'{x:.3f}' for x in on)})")
print(f"on - off: {100 * (mn - mo) / mo:+.1f} % ({(mn - mo) * 1000:+.0f} ms; within the noise of a loaded machine)")
ma = statistics.median(alone)
print(f"the check alone: median {ma * 1000:.1f} ms ({' '.join(f'{x * 1000:.1f}' for x in alone)}) = "
      f"{100 * ma / mo:.2f} % of an open with the check off")
PY

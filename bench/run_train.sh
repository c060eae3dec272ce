#!/usr/bin/env bash
# Training-step benchmark, focalscope CPU trainer (build/bench/train_bench) vs a PyTorch eager LLaMA trained with
# torch.optim.AdamW (bench/pytorch_train.py, Debian python3-torch), same weights, batch, seq_len and thread count,
# one run. Builds nothing: cmake --build build --target train_bench focal first.
# usage: bench/run_train.sh [THREADS] [BATCH] [SEQ_LEN] [STEPS]   (defaults 2 8 256 5; results on stdout)
# Tokens/s = predicted tokens, batch * (seq_len - 1) per step, over the median step time (2 warm-up steps).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
threads=${1:-2}
batch=${2:-8}
seq_len=${3:-256}
steps=${4:-5}
build=${FOCAL_BUILD:-build}
model=out/bench/train-small
for exe in "$build/cli/focal" "$build/bench/train_bench"; do
  [ -x "$exe" ] || { echo "run_train.sh: $exe not built (cmake --build $build --target train_bench focal)" >&2; exit 1; }
done
mkdir -p out/bench
[ -f $model/config.json ] || "$build/cli/focal" init $model --vocab 4096 --hidden 256 --layers 4 --heads 8 \
  --kv-heads 2 --intermediate 704 --context 1024 --attn focal --temp 0.4 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== train step, $model, threads $threads, batch $batch, seq_len $seq_len, $steps timed steps; $(uptime | sed 's/.*load/load/') =="
echo "-- focalscope ($build/bench/train_bench) --"
OMP_NUM_THREADS=$threads "$build/bench/train_bench" $model --batch "$batch" --seq-len "$seq_len" --steps "$steps" \
  --modes standard,focal --json "$tmp/focal.json"
echo "-- PyTorch eager (bench/pytorch_train.py) --"
OMP_NUM_THREADS=$threads /usr/bin/python3 bench/pytorch_train.py --model $model --threads "$threads" --batch "$batch" \
  --seq-len "$seq_len" --steps "$steps" --modes standard,focal --json "$tmp/torch.json"
echo "-- ratio (predicted tokens/s, focalscope / PyTorch) --"
/usr/bin/python3 - "$tmp/focal.json" "$tmp/torch.json" <<'EOF'
import json, sys
f = {r["mode"]: r for r in json.load(open(sys.argv[1]))}
t = {r["mode"]: r for r in json.load(open(sys.argv[2]))}
for mode in ("standard", "focal"):
    if mode in f and mode in t:
        a, b = f[mode]["tokens_per_s"], t[mode]["tokens_per_s"]
        print(f"{mode:9s} focalscope {a:9.1f} tok/s   PyTorch {b:9.1f} tok/s   ratio {a / b:.2f}x")
EOF

#!/usr/bin/env bash
# The harness of the retrieval comparison (docs/results.md): the training data, 12 trainings (standard, focal
# t = 0.4 and learned tau with seeds 1-3; focal t = 0.3, 0.5 and 0.7 with seed 1), their evaluations by context
# length and by number of distractor pairs, the tables, the figures and the training logs in docs/results/, and
# the bundled models (BUNDLE=1). Each stage skips what is done, and a killed training resumes from its last
# checkpoint, so the script can simply be run again.
# Each run has two stages (docs/results.md, "Third round"): one one-layer model drilled on the previous-token task
# (standard attention, seed 1, two threads: bit for bit the drilled layer S1 of docs/results.md), whose weights
# then start every run's two-layer model trained on associative recall with the run's own attention and seed.
#
# usage: scripts/showcase.sh [DATA_DIR] [OUT_DIR]        (defaults out/showcase-data and out/showcase)
#   STAGES="data train eval report"  the stages to run (default all four; add "bundle" or set BUNDLE=1 to write
#                                    the seed-1 models to assets/models/recall-*)
#   RUNS="standard-s1 ..."           a subset of the runs (default all 12, in the order below)
#   JOBS                             trainings at once (default: the number of cores), each on one thread, its
#                                    output in OUT_DIR/RUN.log (the trainer is deterministic for a thread count:
#                                    one thread per run gives the weights of docs/results.md however many run at once)
#   STEPS, DRILL_STEPS, RESULTS_DIR, IMG_DIR   a smoke test: STEPS=20 DRILL_STEPS=10 RESULTS_DIR=/tmp/r IMG_DIR=/tmp/r
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
data=${1:-out/showcase-data}
out=${2:-out/showcase}
focal=${FOCAL:-build/cli/focal}
stages=${STAGES:-data train eval report}
[ "${BUNDLE:-0}" = 1 ] && stages="$stages bundle"
jobs_max=${JOBS:-$(nproc)}
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || { echo "showcase: JOBS='$jobs_max' is not a positive number" >&2; exit 2; }
[ -x "$focal" ] || { echo "showcase: $focal is missing; build first (scripts/build.sh)" >&2; exit 1; }

# The regime (docs/results.md): one-token mqar keys, tasks of 96-128 tokens, previous-token drills mixed in, the loss
# on the answers only. Stage 1 (drill, shared): one layer, 500 steps on mqar tasks with only 2-4 queries among about
# 30 pairs (DATA_DIR-drill) and the drills, standard attention, seed 1, two threads (the trainer is deterministic for
# a given thread count). Stage 2: two layers of width 128 started from the drill (--init-from), 1500 steps on mqar
# tasks with 8-24 queries (DATA_DIR) and the drills. About 7 minutes per run on one thread.
steps=${STEPS:-1500}  # STEPS: fewer, for a smoke test of the harness
drill_steps=${DRILL_STEPS:-500}
shape=(--hidden 128 --heads 4 --kv-heads 4 --intermediate 384 --context 1024 --seq-len 128 --batch 32 --lr 3e-3
       --init-std 0.04 --task-frac 1 --task-kinds mqar,prev --task-loss answers)
common=(--data "$data" "${shape[@]}" --layers 2 --steps $steps --warmup 100 --eval-every 100 --eval-sequences 64)
drill=(--data "$data-drill" "${shape[@]}" --layers 1 --steps $drill_steps --warmup 50 --eval-every 250
       --attn standard --seed 1)
learned=(--attn learned --tau-mode prefix_mean --tau-min 1.7 --tau-max 5.66 --tau-lr-mult 0.1)
attn_of() {  # run name (without the seed) -> attention flags
  case $1 in
    standard) echo "--attn standard" ;;
    focal-t*) echo "--attn focal --temp ${1#focal-t}" ;;
    focal-learned) echo "${learned[*]}" ;;
    *) echo "showcase: unknown run '$1'" >&2; exit 1 ;;
  esac
}
all_runs="standard-s1 focal-t0.4-s1 focal-learned-s1 standard-s2 focal-t0.4-s2 focal-learned-s2
          standard-s3 focal-t0.4-s3 focal-learned-s3 focal-t0.3-s1 focal-t0.5-s1 focal-t0.7-s1"
runs=${RUNS:-$all_runs}
n_runs=$(echo $runs | wc -w)
has() { [[ " $stages " == *" $1 "* ]]; }
done_training() { [ -f "$1/trainer_state.json" ] && grep -q "\"step\": $steps\b" "$1/trainer_state.json"; }

if has data; then
  if [ ! -f "$data/manifest.json" ]; then
    echo "== data: scripts/data/build_data.py --out $data (about two minutes)"
    /usr/bin/python3 scripts/data/build_data.py --out "$data" --mqar-keys one-token --train-lengths 96:128 \
      --train-queries 8:24 --train-tasks 30000 --prev-tasks 6000
  fi
  if [ ! -f "$data-drill/manifest.json" ]; then
    echo "== data: scripts/data/build_data.py --out $data-drill (the drill stage's tasks, about two minutes)"
    /usr/bin/python3 scripts/data/build_data.py --out "$data-drill" --mqar-keys one-token --train-lengths 96:128 \
      --train-queries 2:4 --train-tasks 40000 --prev-tasks 6000
  fi
fi

mkdir -p "$out"
if has train; then
  if ! grep -qs "\"step\": $drill_steps\b" "$out/drill/trainer_state.json"; then
    resume=()
    [ -f "$out/drill/trainer_state.json" ] && resume=(--resume)
    echo "== drill: one layer, previous-token drill (shared by every run)"
    OMP_NUM_THREADS=2 "$focal" train "${drill[@]}" --out "$out/drill" "${resume[@]}"
  fi
  # Up to JOBS trainings at once, one thread each; the ETA counts the runs still to start.
  i=0
  todo=0
  for run in $runs; do done_training "$out/$run" || todo=$((todo + 1)); done
  t0=$(date +%s)
  started=0
  for run in $runs; do
    i=$((i + 1))
    dir="$out/$run"
    if done_training "$dir"; then continue; fi
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
      wait -n || { echo "showcase: a training failed (its log is in $out/RUN.log)" >&2; exit 1; }
    done
    el=$(( $(date +%s) - t0 ))
    finished=$(( started - $(jobs -rp | wc -l) ))
    eta=""
    [ $finished -gt 0 ] && eta=", ETA $(( el * (todo - finished) / finished ))s"
    start=(--init-from "$out/drill")
    [ -f "$dir/trainer_state.json" ] && start=(--resume)
    echo "== train $run ($i/$n_runs, ${el}s elapsed$eta): two layers from the drill, log $dir.log"
    # shellcheck disable=SC2046
    OMP_NUM_THREADS=1 "$focal" train "${common[@]}" $(attn_of "${run%-s*}") --seed "${run##*-s}" --out "$dir" \
      "${start[@]}" > "$dir.log" 2>&1 &
    started=$((started + 1))
  done
  while [ "$(jobs -rp | wc -l)" -gt 0 ]; do
    wait -n || { echo "showcase: a training failed (its log is in $out/RUN.log)" >&2; exit 1; }
  done
  echo "== trained $todo run(s) in $(( $(date +%s) - t0 ))s"
fi

if has eval; then
  for run in $runs; do
    dir="$out/$run"
    done_training "$dir" || { echo "showcase: $dir is not trained to step $steps; run the train stage" >&2; exit 1; }
    if [ ! -f "$dir/eval.h5" ]; then
      echo "== eval $run (by context length)"
      "$focal" eval "$dir" --data "$data" --val-seq-len 256 --val-sequences 64 --max-tasks 20 -o "$dir/eval.h5" \
        > "$dir/eval.txt"
    fi
    if [ ! -f "$dir/distract.h5" ]; then
      echo "== eval $run (by distractor pairs)"
      "$focal" eval "$dir" --data "$data" --tasks distract --val-sequences 1 --max-tasks 20 -o "$dir/distract.h5" \
        > "$dir/distract.txt"
    fi
  done
fi

if has report; then
  res=${RESULTS_DIR:-docs/results}  # RESULTS_DIR / IMG_DIR: elsewhere, e.g. for a smoke test with STEPS=20
  img=${IMG_DIR:-docs/img}
  mkdir -p "$res" "$img"
  echo "== report: tables, training logs and figures"
  /usr/bin/python3 scripts/results_tables.py "$out" --kinds mqar --layer 1 -o "$res/showcase-tables.md"
  for run in $all_runs; do
    [ -f "$out/$run/train_log.h5" ] && cp "$out/$run/train_log.h5" "$res/train_log-$run.h5"
  done
  three=(standard focal-t0.4 focal-learned)
  labels="standard,focal t=0.4,learned tau"
  evals() {  # file name -> the 9 files of the three models x 3 seeds, and their labels
    files=()
    lab=""
    for m in "${three[@]}"; do
      for s in 1 2 3; do
        [ -f "$out/$m-s$s/$1" ] || continue
        files+=("$out/$m-s$s/$1")
        case $m in standard) l="standard" ;; focal-t0.4) l="focal t=0.4" ;; *) l="learned tau" ;; esac
        lab="$lab${lab:+,}$l"
      done
    done
  }
  evals eval.h5
  "$focal" figure retrieval "${files[@]}" --labels "$lab" --kind mqar --layer 1 -o "$img/showcase-retrieval-length.png"
  "$focal" figure retrieval "${files[@]}" --labels "$lab" --kind mqar --layer 1 --metric entropy \
    --title "mqar: query-row entropy, layer 1" -o "$img/showcase-entropy-length.png"
  evals distract.h5
  "$focal" figure retrieval "${files[@]}" --labels "$lab" --kind mqar --layer 1 -o "$img/showcase-retrieval-distractors.png"
  "$focal" figure training "$res"/train_log-{standard,focal-t0.4,focal-learned}-s1.h5 --labels "$labels" \
    -o "$img/showcase-val-loss.png"
  "$focal" figure training "$res"/train_log-{focal-t0.3,focal-t0.4,focal-t0.5,focal-t0.7,standard}-s1.h5 \
    --labels "t=0.3,t=0.4,t=0.5,t=0.7,t=1 (standard)" -o "$img/showcase-sweep-val-loss.png"
  for s in 1 2 3; do  # --tau draws one log: a figure per seed
    [ -f "$res/train_log-focal-learned-s$s.h5" ] || continue
    "$focal" figure training "$res/train_log-focal-learned-s$s.h5" --tau --clip -o "$img/showcase-tau-s$s.png"
  done
fi

if has bundle; then
  # The seed-1 models join the bundle as recall-*: they retrieve, but they were trained on tasks only and cannot
  # continue text, so the text-trained trio (standard, focal-t0.4, focal-learned) stays for everything else.
  for m in standard focal-t0.4 focal-learned; do
    dst="assets/models/recall-$m"
    echo "== bundle $dst (seed 1, bf16)"
    rm -rf "$dst.new"
    "$focal" export "$out/$m-s1" "$dst.new" --dtype BF16
    cmp -s "$data/tokenizer.model" assets/models/tokenizer.model ||
      { echo "showcase: $data/tokenizer.model differs from assets/models/tokenizer.model" >&2; exit 1; }
    rm -f "$dst.new/tokenizer.model"
    ln -s ../tokenizer.model "$dst.new/tokenizer.model"
    # The app's default prompt for this model (prompt.txt): the first 128-token mqar evaluation task, cut after the
    # key of its third query, so that the last token is a query whose value the model has to recall; and its first
    # view (view.txt, "LAYER HEAD"): the last layer's head with the most attention on the queried pair at that row,
    # from a capture of the prompt with the pair's positions marked relevant.
    /usr/bin/python3 - "$data" "$dst.new" "$focal" <<'PY'
import json, subprocess, sys
import h5py
import sentencepiece as spm
data, model, focal = sys.argv[1], sys.argv[2], sys.argv[3]
sp = spm.SentencePieceProcessor(model_file=f"{data}/tokenizer.model")
with open(f"{data}/tasks_eval.jsonl") as f:
    task = next(t for t in map(json.loads, f) if t["kind"] == "mqar" and t["length"] == 128)
answer = task["answers"][2]
with open(f"{model}/prompt.txt", "w") as f:
    f.write(sp.decode(task["ids"][1:answer["answer_pos"]]) + "\n")
cap = f"{model}/view.h5"
subprocess.run([focal, "capture", model, "--prompt-file", f"{model}/prompt.txt", "--store", "metrics",
                "--relevant", ",".join(map(str, answer["relevant"])), "-o", cap], check=True, capture_output=True)
with h5py.File(cap) as h:
    metrics = h["runs"][next(iter(h["runs"]))]["metrics"]  # [layers, heads, T, M]
    layer = metrics.shape[0] - 1
    mass = metrics[layer, :, -1, 7]                         # every head of the last layer, last row: relevant mass
with open(f"{model}/view.txt", "w") as f:
    f.write(f"{layer} {int(mass.argmax())}\n")
print(f"  view.txt: layer {layer}, head {int(mass.argmax())} (relevant mass " +
      " ".join(f"{m:.2f}" for m in mass) + ")")
PY
    rm -f "$dst.new/view.h5"
    rm -rf "$dst.old"
    [ -d "$dst" ] && mv "$dst" "$dst.old"
    mv "$dst.new" "$dst"
    rm -rf "$dst.old"
    # Evaluated where it is bundled, so that eval.h5 and eval.txt record the model's own path (run in "$dst.new",
    # they named "recall-focal-t0.4.new" in every legend and inspect).
    "$focal" eval "$dst" --data "$data" --val-sequences 1 --max-tasks 20 -o "$dst/eval.h5" > "$dst/eval.txt.tmp"
    mv "$dst/eval.txt.tmp" "$dst/eval.txt"
  done
fi
echo "showcase: done ($stages)"

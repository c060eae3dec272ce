#!/usr/bin/env bash
# Makes the stand-in demo model until the trained bundled models exist: a sentencepiece BPE tokenizer trained on
# the King James Bible (Debian bible-kjv, public domain) and a randomly initialised focal (t = 0.4) LLaMA model.
# usage: scripts/make-demo-model.sh OUT_DIR
set -euo pipefail
out=${1:?usage: scripts/make-demo-model.sh OUT_DIR}
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v bible >/dev/null; then echo "make-demo-model: the corpus needs 'bible': apt-get install bible-kjv" >&2; exit 1; fi
if ! command -v spm_train >/dev/null; then echo "make-demo-model: apt-get install sentencepiece" >&2; exit 1; fi
work="$out/.work"
mkdir -p "$work"
if [ ! -f "$work/tokenizer.model" ]; then
  echo "make-demo-model: building the corpus and training a 2000-piece BPE tokenizer..."
  # strip chapter headings and verse numbers, join wrapped lines
  bible "gen1:1-rev22:21" | sed -E 's/^ +[0-9]+ //; /^[1-3]? ?[A-Za-z ]+ [0-9]+$/d; /^ *$/d' | tr -s ' ' > "$work/kjv.txt"
  spm_train --input="$work/kjv.txt" --model_prefix="$work/tokenizer" --vocab_size=2000 --model_type=bpe \
    --byte_fallback=true --character_coverage=1.0 --bos_id=1 --eos_id=2 --unk_id=0 --pad_id=-1 \
    --input_sentence_size=200000 --shuffle_input_sentence=true --num_threads="$(nproc)" --minloglevel=2
fi
"$root/build/cli/focal" init "$out/focal-random" --tokenizer "$work/tokenizer.model" --attn focal --temp 0.4 \
  --hidden 128 --layers 4 --heads 4 --kv-heads 2 --intermediate 352 --context 1024 --seed 1

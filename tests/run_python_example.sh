#!/usr/bin/env bash
# ctest driver: makes a small model with a tokenizer, captures it with the real `focal` CLI, and runs the Python
# example (examples/read_capture.py, h5py) on the capture. usage: run_python_example.sh FOCAL_BIN SOURCE_DIR WORK_DIR
set -euo pipefail
focal=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
for i in $(seq 1 60); do
  echo "The quick brown fox jumps over the lazy dog number $i. A needle sits in the haystack at line $i."
done > "$work/text.txt"
spm_train --input="$work/text.txt" --model_prefix="$work/tok" --vocab_size=400 --model_type=bpe --byte_fallback=true \
  --character_coverage=1.0 --bos_id=1 --eos_id=2 --unk_id=0 --pad_id=-1 --minloglevel=2
"$focal" init "$work/model" --tokenizer "$work/tok.model" --hidden 64 --layers 2 --heads 4 --kv-heads 2 \
  --intermediate 128 --attn focal --temp 0.4
"$focal" capture "$work/model" --prompt "The quick brown fox jumps over the lazy dog." --compare standard \
  --layers 1 --fp16 -o "$work/cap.h5"
/usr/bin/python3 "$src/examples/read_capture.py" "$work/cap.h5"

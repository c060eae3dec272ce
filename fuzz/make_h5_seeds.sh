#!/usr/bin/env bash
# Writes the seeds of the byte-level HDF5 fuzzer (fuzz/h5_bytes_fuzz.cpp) into fuzz/corpus/h5_bytes/: one small file
# of each kind the project writes, made by the focal binary from the bundled model: a capture (two runs, a
# comparison, stored probabilities), a sweep, batch statistics with sampled rows, a training log and an evaluation.
# The output is committed, so the fuzz tier needs no model run.   usage: fuzz/make_h5_seeds.sh [FOCAL_BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
focal="${1:-build/cli/focal}"
out=fuzz/corpus/h5_bytes
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
prompt="The key pine opens the door. The key"
"$focal" capture --prompt "$prompt" --temp 0.4 --compare standard --probs -o "$out/capture-compare.h5"
"$focal" sweep --prompt "$prompt" --temps 0.4:1.0:0.3 -o "$out/sweep.h5"
printf 'the cat sat on the mat\n\nthe key opens the door\n' >"$work/docs.txt"
"$focal" batch --data "$work/docs.txt" --runs standard,focal:0.4 --keep-rows 4 --bins 8 --quiet -o "$out/stats.h5"
mkdir -p "$work/data"
python3 scripts/data/build_data.py --help >/dev/null 2>&1 || true
cp assets/models/focal-t0.4/eval.h5 "$out/eval.h5"
ls -l "$out"

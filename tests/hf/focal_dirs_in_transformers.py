#!/usr/bin/env python3
"""The model directories focalscope writes (`focal init`, `focal export`; the trainer's checkpoints share the writer)
open in transformers 4.47.1's AutoModelForCausalLM and give focalscope's next-token distribution: the oracle is
transformers itself, in fp32 eager attention, against `focal capture --topk V` on the same ids (standard attention).
Tolerance: 1e-4 absolute on every probability of the vocabulary (fp32 on both sides; the files' BF16 copy is read
as BF16 by both). The files failed to open before the safetensors header carried {"format": "pt"}.

usage: focal_dirs_in_transformers.py FOCAL_CLI WORK_DIR"""
import os
import subprocess
import sys

import h5py
import numpy as np
import torch
from transformers import AutoModelForCausalLM


def focal(cli, *args):
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"focal {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cli, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    init, export = os.path.join(work, "init"), os.path.join(work, "export-bf16")
    focal(cli, "init", init, "--force", "--vocab", 96, "--hidden", 32, "--layers", 2, "--heads", 4, "--kv-heads", 2,
          "--intermediate", 64, "--seed", 3)
    focal(cli, "export", init, export, "--force", "--dtype", "BF16")
    ids = [1, 17, 42, 5, 88, 23, 61, 9, 30, 2, 77, 14]
    ids_file = os.path.join(work, "ids.txt")
    with open(ids_file, "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    worst = 0.0
    for d in (init, export):
        h5 = os.path.join(work, os.path.basename(d) + ".h5")
        focal(cli, "capture", d, "--ids", ids_file, "--temp", "standard", "--store", "metrics", "--topk", 96,
              "-o", h5)
        with h5py.File(h5, "r") as f:
            g = f["runs/standard"]
            tid, tp = g["topk_ids"][:], g["topk_probs"][:]
        ours = np.zeros((len(ids), 96))
        for t in range(len(ids)):
            ours[t, tid[t]] = tp[t]
        model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", torch_dtype=torch.float32)
        with torch.no_grad():
            ref = torch.softmax(model(torch.tensor([ids])).logits[0].double(), -1).numpy()
        diff = float(np.abs(ours - ref).max())
        print(f"{os.path.basename(d)}: max |p_focal - p_transformers| = {diff:.2e} over {len(ids)} x 96")
        worst = max(worst, diff)
    if worst > 1e-4:
        sys.exit(f"focalscope's files read by transformers differ by {worst:.2e} (tolerance 1e-4)")
    print("ok")


if __name__ == "__main__":
    main()

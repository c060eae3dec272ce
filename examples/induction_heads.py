#!/usr/bin/python3
"""Ranks the heads of a capture by induction score and reports first-token sink mass, for every run.

The prompt must repeat a passage: pass the position where the repeat starts (the second copy's first token) and the
passage length. Induction score of a head = mean attention probability, over query positions i in the second copy,
on the key i - period + 1 (the token that followed the current token's earlier occurrence). Sink = mean probability
on key 0 over all rows i >= 1. Needs a capture with probabilities of every layer and head (focal capture without
--layers/--heads/--store metrics).

usage: examples/induction_heads.py CAPTURE.h5 REPEAT_START PERIOD [TOP]
"""
import sys

import h5py
import numpy as np


def main():
    if len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    path, start, period = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    with h5py.File(path, "r") as f:
        T = len(f["/tokens/ids"])
        runs = list(f["/runs"].keys())
        stats = {}
        for r in runs:
            P = f[f"/runs/{r}/probs"][:]  # [L, H, Q, T]: all queries stored
            rows = np.arange(start + 1, T)
            ind = P[:, :, rows, rows - period + 1].mean(-1)
            sink = P[:, :, 1:, 0].mean(-1)
            stats[r] = (ind, sink)
    base = runs[0]
    order = np.dstack(np.unravel_index(np.argsort(-stats[base][0].ravel())[:top], stats[base][0].shape))[0]
    print("layer head  " + "  ".join(f"{r}: induction sink" for r in runs))
    for l, h in order:
        print(f"{l:5d} {h:4d}  " + "  ".join(f"{stats[r][0][l, h]:17.3f} {stats[r][1][l, h]:.3f}" for r in runs))
    print("mean sink over all heads: " + ", ".join(f"{r} {stats[r][1].mean():.3f}" for r in runs))


if __name__ == "__main__":
    main()

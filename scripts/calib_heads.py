#!/usr/bin/env python3
"""Which heads a calibration sharpened: each head's kind under standard attention against its calibrated t.

usage: calib_heads.py MODEL --temps A.json [B.json ...] --text FILE -o OUT.json [--focal PATH] [--chars N]

Runs two standard-attention captures with the `focal` CLI (FOCAL_CLI, or build/cli/focal):
- a probe of 100 random token ids repeated twice (no tokenizer): per head the previous-token score (mean p[i, i-1]
  over rows 1..199), the sink score (mean p[i, 0] over rows 8..199) and the induction score (mean p[i, i-99] over
  the second copy, rows 101..199: the token after the same token's first occurrence);
- the first N characters of FILE (default 6000): each head's mean entropy over its rows (nats).
A head is "induction" with an induction score >= 0.3, else "previous-token" with a previous-token score >= 0.3, else
"sink" with a sink score >= 0.5, else "other". For every temperature file: t per class (median, share below 0.9 and
above 1.1), the Spearman correlation of log t with the standard entropy, and between two files the correlation of
their log t and the median |log t_a - log t_b| (their spread). Prints a table and writes everything to OUT.json.
Reads captures with the focalscope Python package (python/, fs.open_capture).
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

import focalscope as fs

REPEAT = 100


def focal_cli():
    return os.environ.get("FOCAL_CLI", os.path.join(os.path.dirname(__file__), "..", "build", "cli", "focal"))


def capture(model, args, out):
    cmd = [focal_cli(), "capture", model, "--temp", "standard", "-o", out] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("calib_heads: %s failed:\n%s" % (" ".join(cmd), r.stderr))


def ranks(x):
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    return r


def spearman(a, b):
    return float(np.corrcoef(ranks(np.asarray(a)), ranks(np.asarray(b)))[0, 1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--temps", nargs="+", required=True, help="temperature files of focal calibrate")
    ap.add_argument("--text", required=True, help="text whose first --chars characters give the entropy")
    ap.add_argument("--chars", type=int, default=6000)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        rng = random.Random(1)
        seq = [rng.randrange(300, 40000) for _ in range(REPEAT)]
        ids_path = os.path.join(tmp, "probe.ids")
        with open(ids_path, "w") as f:
            f.write(" ".join(str(i) for i in seq + seq))
        probe = os.path.join(tmp, "probe.h5")
        capture(a.model, ["--ids", ids_path, "--store", "probs"], probe)
        with open(a.text, encoding="utf-8", errors="replace") as f:
            text = f.read(a.chars)
        text_path = os.path.join(tmp, "text.txt")
        with open(text_path, "w") as f:
            f.write(text)
        ent_cap = os.path.join(tmp, "text.h5")
        capture(a.model, ["--prompt-file", text_path, "--store", "metrics"], ent_cap)

        cap = fs.open_capture(probe)
        p = np.asarray(cap.probs("standard"))  # [L, H, T, T]
        L, H, T, _ = p.shape
        rows = np.arange(1, T)
        prev = p[:, :, rows, rows - 1].mean(axis=2)
        sink = p[:, :, 8:, 0].mean(axis=2)
        second = np.arange(REPEAT + 1, T)
        induction = p[:, :, second, second - REPEAT + 1].mean(axis=2)
        ecap = fs.open_capture(ent_cap)
        summ = ecap.head_summary("entropy_nats")
        entropy = np.asarray(summ["standard"]).reshape(L, H)
        n_text_tokens = int(len(ecap.tokens)) if hasattr(ecap, "tokens") else None

    kind = np.full((L, H), "other", dtype=object)
    kind[sink >= 0.5] = "sink"
    kind[prev >= 0.3] = "previous-token"
    kind[induction >= 0.3] = "induction"
    classes = ["induction", "previous-token", "sink", "other"]

    result = {"model": a.model, "text": a.text, "chars": a.chars, "n_text_tokens": n_text_tokens,
              "heads": [], "files": {}, "pairs": []}
    log_t = {}
    for path in a.temps:
        with open(path) as f:
            tf = json.load(f)
        t = np.asarray(tf["focal_temp"], dtype=np.float64)
        if t.shape != (L, H):
            sys.exit("calib_heads: %s holds t of shape %s, the model has %d x %d heads" % (path, t.shape, L, H))
        log_t[path] = np.log(t)
        per = {}
        for c in classes:
            sel = t[kind == c]
            per[c] = {"n": int(sel.size),
                      "median_t": float(np.median(sel)) if sel.size else None,
                      "share_below_0.9": float((sel < 0.9).mean()) if sel.size else None,
                      "share_above_1.1": float((sel > 1.1).mean()) if sel.size else None}
        result["files"][path] = {
            "granularity": tf.get("granularity"), "val_loss_init": tf["losses"]["val_loss_init"],
            "val_loss": tf["losses"]["val_loss"], "by_kind": per,
            "spearman_log_t_vs_entropy": spearman(np.log(t).ravel(), entropy.ravel())}
    paths = list(log_t)
    for i in range(len(paths)):
        for j in range(i + 1, len(paths)):
            d = np.abs(log_t[paths[i]] - log_t[paths[j]])
            result["pairs"].append({
                "a": paths[i], "b": paths[j],
                "pearson_log_t": float(np.corrcoef(log_t[paths[i]].ravel(), log_t[paths[j]].ravel())[0, 1]),
                "median_abs_log_ratio": float(np.median(d)), "max_abs_log_ratio": float(d.max())})
    for l in range(L):
        for h in range(H):
            result["heads"].append({
                "layer": l, "head": h, "kind": kind[l, h], "prev": float(prev[l, h]), "sink": float(sink[l, h]),
                "induction": float(induction[l, h]), "entropy_nats": float(entropy[l, h]),
                "t": {pth: float(math.exp(log_t[pth][l, h])) for pth in paths}})
    tmp_out = a.output + ".tmp.%d" % os.getpid()
    with open(tmp_out, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp_out, a.output)

    print("heads by kind under standard attention: " +
          ", ".join("%s %d" % (c, int((kind == c).sum())) for c in classes))
    print("| file | kind | heads | median t | t < 0.9 | t > 1.1 |")
    print("|---|---|---|---|---|---|")
    for pth in paths:
        for c in classes:
            e = result["files"][pth]["by_kind"][c]
            if e["n"]:
                print("| %s | %s | %d | %.2f | %.0f %% | %.0f %% |" % (os.path.basename(pth), c, e["n"], e["median_t"],
                                                                 100 * e["share_below_0.9"],
                                                                 100 * e["share_above_1.1"]))
    for pth in paths:
        print("%s: Spearman(log t, standard entropy) = %.2f" %
              (os.path.basename(pth), result["files"][pth]["spearman_log_t_vs_entropy"]))
    for pr in result["pairs"]:
        print("%s vs %s: Pearson(log t) = %.2f, median |log ratio| = %.3f, max %.2f" %
              (os.path.basename(pr["a"]), os.path.basename(pr["b"]), pr["pearson_log_t"],
               pr["median_abs_log_ratio"], pr["max_abs_log_ratio"]))


if __name__ == "__main__":
    main()

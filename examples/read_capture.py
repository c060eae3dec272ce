#!/usr/bin/env python3
"""Reads a focalscope capture (docs/capture-format.md) with h5py and numpy alone, no model needed: prints the header,
tokens and runs, per-layer entropy and sink mass, checks that stored attention rows sum to 1, and re-applies a
temperature to the stored raw scores.

    python3 examples/read_capture.py capture.h5 [--focal-temp 0.5] [--max-tokens 32]
"""

import argparse
import sys

import numpy as np

try:
    import h5py
except ImportError:
    sys.exit("read_capture.py needs h5py (Debian/Ubuntu: apt-get install python3-h5py; otherwise pip install h5py)")

FORMAT = "focalscope-capture"
MAX_FORMAT_VERSION = 1


def as_str(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def open_capture(path):
    """Opens `path` and checks it is a capture this script understands; exits with a message otherwise."""
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        sys.exit(f"{path}: cannot open as HDF5 ({e}); expected a focalscope capture")
    fmt = as_str(f.attrs["format"]) if "format" in f.attrs else None
    if fmt != FORMAT:
        sys.exit(f"{path}: not a focalscope capture (format attribute is {fmt!r}, expected {FORMAT!r})")
    version = int(f.attrs["format_version"])
    if version > MAX_FORMAT_VERSION:
        sys.exit(f"{path}: capture format version {version} is newer than this script reads ({MAX_FORMAT_VERSION})")
    return f


def masked_softmax(logits, queries):
    """Causal softmax over the key axis. logits: [..., Qc, T]; queries: [Qc] positions. Keys beyond the query get 0."""
    n_keys = logits.shape[-1]
    visible = np.arange(n_keys)[None, :] <= np.asarray(queries)[:, None]  # [Qc, T]
    x = np.where(visible, logits.astype(np.float64), -np.inf)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.where(visible, np.exp(x), 0.0)
    return e / e.sum(axis=-1, keepdims=True)


def row_entropy(p):
    """H = -sum p ln p in nats over the last axis; zero entries contribute nothing."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)


def describe_run(name, run, metric_names, focal_temp):
    spec = as_str(run.attrs["temp_spec_json"])
    layers, heads, queries = run["layers"][()], run["heads"][()], run["queries"][()]
    print(f"\nrun '{name}': {spec}")
    print(f"  stored rows: {len(layers)} layers x {len(heads)} heads x {len(queries)} queries;"
          f" datasets: {', '.join(sorted(run.keys()))}")

    metrics = run["metrics"][()]  # [n_layers, n_heads, T, M]
    ent, sink = metric_names.index("entropy_nats"), metric_names.index("sink_mass")
    if metrics.shape[2] > 1:
        rows = metrics[:, :, 1:, :]  # row 0 sees one key only
        print("  layer  mean entropy (nats)  mean sink mass   (over heads and rows >= 1)")
        for layer in range(metrics.shape[0]):
            print(f"  {layer:5d}  {np.nanmean(rows[layer, :, :, ent]):19.4f}  {np.nanmean(rows[layer, :, :, sink]):14.4f}")

    if "probs" not in run:
        return
    probs = run["probs"][()].astype(np.float32)  # [Lc, Hc, Qc, T], float16 or float32 on disk
    sums = probs.sum(axis=-1, dtype=np.float64)
    worst = float(np.abs(sums - 1.0).max()) if sums.size else 0.0
    verdict = "ok" if worst <= 1e-3 else "NOT normalised"
    print(f"  probs ({run['probs'].dtype}): every stored row sums to 1 within {worst:.2e} ({verdict})")

    if "scores" not in run or probs.size == 0:
        return
    scores = run["scores"][()]  # [Lc, Hc, Qc, T] raw q.k/sqrt(d_head), 0 beyond the query
    row_scale = run["row_scale"][()]  # [n_layers, n_heads, T] multiplier the run applied to the raw scores
    mult = row_scale[np.ix_(layers, heads, queries)]  # [Lc, Hc, Qc]
    again = masked_softmax(scores * mult[..., None], queries)
    print(f"  softmax(scores * row_scale) reproduces the stored probs: max |diff| = {np.abs(again - probs).max():.2e}")

    # Re-tempering without the model: focal temperature t means multiplier 1/t on the raw scores.
    tempered = masked_softmax(scores * (1.0 / focal_temp), queries)
    keep = queries >= 1
    if keep.any():
        before = row_entropy(probs.astype(np.float64))[:, :, keep].mean()
        after = row_entropy(tempered)[:, :, keep].mean()
        print(f"  re-tempered at focal_temp={focal_temp:g}: mean entropy over stored rows {before:.4f} -> {after:.4f}"
              f" nats, mean sink mass {probs[:, :, keep, 0].mean():.4f} -> {tempered[:, :, keep, 0].mean():.4f}")


def main():
    ap = argparse.ArgumentParser(description="Summarise a focalscope capture file with h5py + numpy (no model).")
    ap.add_argument("capture", help="capture file (.h5) written by focalscope")
    ap.add_argument("--focal-temp", type=float, default=0.5,
                    help="temperature to re-apply to stored raw scores (multiplier 1/t; default 0.5)")
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens to print (default 32)")
    args = ap.parse_args()
    if not args.focal_temp > 0:
        ap.error("--focal-temp must be > 0")

    with open_capture(args.capture) as f:
        a = f.attrs
        print(f"{args.capture}: {as_str(a['format'])} version {int(a['format_version'])},"
              f" written by focalscope {as_str(a['tool_version'])} at {as_str(a['created_utc'])}")
        print(f"model {as_str(a['model_path'])} (weights fnv1a64 {as_str(a['weights_fnv1a64'])}):"
              f" {int(a['n_layers'])} layers, {int(a['n_heads'])} heads, d_head {int(a['d_head'])}")
        metric_names = [as_str(m) for m in a["metric_names"]]

        ids = f["tokens/ids"][()]
        pieces = f["tokens/pieces"].asstr(errors="replace")[()] if len(f["tokens/pieces"]) else [""] * len(ids)
        shown = " ".join(f"{i}:{p!r}" for i, p in zip(ids[: args.max_tokens], pieces[: args.max_tokens]))
        more = f" ... (+{len(ids) - args.max_tokens})" if len(ids) > args.max_tokens else ""
        print(f"{len(ids)} tokens: {shown}{more}")
        relevant = f["tokens/relevant"][()]
        if len(relevant):
            print(f"relevant keys: {relevant.tolist()}")

        print(f"runs: {', '.join(f['runs'].keys()) or '(none)'}")
        for name, run in f["runs"].items():
            describe_run(name, run, metric_names, args.focal_temp)

        if "compare" in f:
            for c in f["compare"].values():
                kl, js = c["kl"][()], c["js"][()]
                if kl.size:
                    print(f"\ncompare '{as_str(c.attrs['run_a'])}' vs '{as_str(c.attrs['run_b'])}':"
                          f" mean KL {np.nanmean(kl):.4f} nats, mean JS {np.nanmean(js):.4f} nats over {kl.size} rows")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Markdown tables of the showcase comparison (docs/results.md) from the runs of scripts/showcase.sh.

Reads, for every run directory OUT/NAME-sSEED: train_log.h5 (the trainer's log), eval.h5 (`focal eval`, tasks by
context length) and distract.h5 (`focal eval --tasks distract`, tasks by number of distractor pairs). Values over
seeds are written "mean (min-max)" when a model has more than one seed. Formats: docs/capture-format.md.

usage: scripts/results_tables.py OUT_DIR [--kinds K,...] [--layer L] [-o FILE]
"""

import argparse
import json
import math
import os
import re
import sys

MODELS = ("standard", "focal-t0.4", "focal-learned")   # three seeds each
SWEEP = ("focal-t0.3", "focal-t0.5", "focal-t0.7")     # one seed each
LABELS = {"standard": "standard (t = 1)", "focal-t0.3": "focal t = 0.3", "focal-t0.4": "focal t = 0.4",
          "focal-t0.5": "focal t = 0.5", "focal-t0.7": "focal t = 0.7", "focal-learned": "learned τ"}


def fail(msg):
    print(f"results_tables: error: {msg}", file=sys.stderr)
    sys.exit(1)


def runs_of(out):
    """{model: [run dirs by seed]} for every OUT/MODEL-sN directory that holds eval.h5 and distract.h5."""
    found = {}
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"(.+)-s(\d+)", name)
        d = os.path.join(out, name)
        if not m or not os.path.isdir(d):
            continue
        for f in ("train_log.h5", "eval.h5", "distract.h5"):
            if not os.path.exists(os.path.join(d, f)):
                fail(f"'{d}' lacks {f}: run scripts/showcase.sh to the end (it resumes)")
        found.setdefault(m.group(1), []).append(d)
    return found


def fmt(vals, digits, pct=False):
    vals = [v * (100 if pct else 1) for v in vals if not math.isnan(v)]
    if not vals:
        return "—"
    mean = sum(vals) / len(vals)
    s = f"{mean:.{digits}f}"
    if len(vals) > 1:
        s += f" ({min(vals):.{digits}f}–{max(vals):.{digits}f})"
    return s


class Eval:
    def __init__(self, path):
        import h5py
        import numpy as np
        with h5py.File(path, "r") as f:
            self.kinds = [k.decode() if isinstance(k, bytes) else k for k in f["task_kinds"][()]]
            self.xs = [int(x) for x in f["lengths"][()]]
            self.acc = np.array(f["accuracy"][()])            # [kind, x]
            self.rel = np.array(f["relevant_mass"][()])       # [kind, x, layer]
            self.ent = np.array(f["entropy"][()])             # [kind, x, layer]
            self.n = np.array(f["n_answers"][()])
            self.val_loss = float(f["val_loss_ppl"][0])

    def acc_at(self, kind, x):
        k, i = self.kinds.index(kind), self.xs.index(x)
        return float(self.acc[k, i]) if self.n[k, i] > 0 else math.nan

    def rel_at(self, kind, x, layer=None):
        """Relevant mass at layer (None: mean over layers)."""
        k, i = self.kinds.index(kind), self.xs.index(x)
        if self.n[k, i] == 0:
            return math.nan
        return float(self.rel[k, i].mean() if layer is None else self.rel[k, i, layer])

    def ent_layer(self, x, layer, kinds):
        """Query-row entropy at layer, mean over the task kinds (of kinds) evaluated at x."""
        i = self.xs.index(x)
        vals = [float(self.ent[k, i, layer]) for k in range(len(self.kinds))
                if self.n[k, i] > 0 and self.kinds[k] in kinds]
        return sum(vals) / len(vals) if vals else math.nan


class Log:
    def __init__(self, path):
        import h5py
        import numpy as np
        with h5py.File(path, "r") as f:
            self.step = [int(s) for s in f["eval_step"][()]]
            self.val = [float(v) for v in f["val_loss"][()]]
            self.clip = [float(v) for v in f["tau_clip_frac"][()]]
            self.tau = np.array(f["tau_mean"][()])
            self.config = json.loads(f.attrs["train_config_json"])
            self.tokens_per_s = [float(v) for v in f["tokens_per_s"][()]]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="the runs directory of scripts/showcase.sh")
    p.add_argument("--kinds", help="only these task kinds, comma-separated (default: every kind evaluated)")
    p.add_argument("--layer", type=int, help="relevant mass of this layer (default: the mean over layers)")
    p.add_argument("-o", "--output", help="write the tables here (temporary name, then renamed) instead of stdout")
    args = p.parse_args()
    if not os.path.isdir(args.out):
        fail(f"'{args.out}' is not a directory (the OUT_DIR of scripts/showcase.sh)")
    runs = runs_of(args.out)
    missing = [m for m in MODELS if m not in runs]
    if missing:
        fail(f"no finished runs of {', '.join(missing)} in '{args.out}'")
    ev = {m: [Eval(os.path.join(d, "eval.h5")) for d in ds] for m, ds in runs.items()}
    dv = {m: [Eval(os.path.join(d, "distract.h5")) for d in ds] for m, ds in runs.items()}
    logs = {m: [Log(os.path.join(d, "train_log.h5")) for d in ds] for m, ds in runs.items()}
    order = [m for m in MODELS + SWEEP if m in runs]
    train_len = logs["standard"][0].config["seq_len"]
    kinds = ev["standard"][0].kinds
    if args.kinds:
        kinds = args.kinds.split(",")
        unknown = [k for k in kinds if k not in ev["standard"][0].kinds]
        if unknown:
            fail(f"--kinds: {', '.join(unknown)} not evaluated (the evaluations hold {', '.join(ev['standard'][0].kinds)})")
    n_layers = len(ev["standard"][0].ent[0, 0])
    if args.layer is not None and not 0 <= args.layer < n_layers:
        fail(f"--layer {args.layer}: the models have layers 0-{n_layers - 1}")
    tasks_only = all(l.config.get("task_frac", 0) >= 1 for ls in logs.values() for l in ls)
    out = []
    w = out.append

    w("### Validation loss\n")
    if tasks_only:
        # The models never saw text: `focal eval`'s loss on validation text says nothing about them.
        w("Final validation loss of the trainer (its last evaluation): the models train on tasks only, so it is the "
          "loss on the answer rows of held-out evaluation tasks that fit the training length, nats per token.\n")
        w("| model | seeds | val loss |")
        w("|---|---|---|")
        for m in order:
            w(f"| {LABELS.get(m, m)} | {len(runs[m])} | {fmt([l.val[-1] for l in logs[m]], 4)} |")
    else:
        w("Final validation loss of the trainer (its last evaluation) and of `focal eval` (64 windows of 256 tokens "
          "of validation text), nats per token.\n")
        w("| model | seeds | trainer val loss | eval val loss |")
        w("|---|---|---|---|")
        for m in order:
            w(f"| {LABELS.get(m, m)} | {len(runs[m])} | {fmt([l.val[-1] for l in logs[m]], 4)} | "
              f"{fmt([e.val_loss for e in ev[m]], 4)} |")
    w("")
    rel_title = ("Relevant mass (mean over layers and heads)" if args.layer is None
                 else f"Relevant mass of layer {args.layer} (mean over heads)")

    def tables(evals, xs, against, note):
        """Accuracy and relevant mass of every model, one table per task kind, against the x values xs."""
        rel = lambda e, kind, x: e.rel_at(kind, x, args.layer)  # noqa: E731
        for getter, digits, pct, title in ((Eval.acc_at, 1, True, "Retrieval accuracy (%)"),
                                           (rel, 3, False, rel_title)):
            for kind in kinds:
                w(f"### {title} against {against}: {kind}\n")
                w(f"{note}\n")
                w("| model | " + " | ".join(str(x) for x in xs) + " |")
                w("|---|" + "---|" * len(xs))
                for m in order:
                    w(f"| {LABELS.get(m, m)} | " +
                      " | ".join(fmt([getter(e, kind, x) for e in evals[m]], digits, pct) for x in xs) + " |")
                w("")

    lengths = [x for x in ev["standard"][0].xs if any(e.n[:, e.xs.index(x)].sum() > 0 for e in ev["standard"])]
    tables(ev, lengths, "context length", f"Training length {train_len}.")
    tables(dv, dv["standard"][0].xs, "distractor pairs", "Context of 256 tokens: prose, then the pairs.")

    x_ent = train_len if train_len in lengths else lengths[0]
    w(f"### Query-row attention entropy per layer (nats), tasks at {x_ent} tokens\n")
    w(f"Mean over heads, answers and the task kinds ({', '.join(kinds)}).\n")
    w("| model | " + " | ".join(f"layer {l}" for l in range(n_layers)) + " |")
    w("|---|" + "---|" * n_layers)
    for m in order:
        w(f"| {LABELS.get(m, m)} | " +
          " | ".join(fmt([e.ent_layer(x_ent, l, kinds) for e in ev[m]], 3) for l in range(n_layers)) + " |")
    w("")

    if "focal-learned" in logs:
        w("### Learned τ over training: fraction of clipped τ values, and τ per layer at the end\n")
        w("Measured by the trainer at its evaluations, on the " +
          ("held-out tasks of its validation loss" if tasks_only else "validation text") + ".\n")
        steps = logs["focal-learned"][0].step
        pick = sorted({steps[min(len(steps) - 1, round(i * (len(steps) - 1) / 5))] for i in range(6)})
        w("| seed | " + " | ".join(f"step {s}" for s in pick) + " | final τ per layer |")
        w("|---|" + "---|" * len(pick) + "---|")
        for d, l in zip(runs["focal-learned"], logs["focal-learned"]):
            seed = d.rsplit("-s", 1)[1]
            w(f"| {seed} | " + " | ".join(f"{100 * l.clip[l.step.index(s)]:.0f} %" for s in pick) + " | " +
              ", ".join(f"{t:.2f}" for t in l.tau[-1]) + " |")
        w("")

    text = "\n".join(out)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, args.output)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cost of a T = 1024 capture called from Python against the same capture by the `focal` CLI, measured in one run.

    .venv/bin/python bench/python_capture.py [--cli build/cli/focal] [--model assets/models/focal-t0.4] [--reps 5]

For each setting, alternating CLI and Python repetitions: the CLI's wall time as a process (load the model, tokenize,
capture, write the HDF5 file), and from Python the same work in one interpreter — fs.load + model.run + cap.save —
timed around the calls (the interpreter's start and `import focalscope` are reported apart, once). Both write the
same file (checked: equal sizes, equal datasets). The budget (issue 16): Python at most 5 % above the CLI.
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def prompt_of_length(model, n):
    """A text that tokenizes to exactly n tokens (with BOS)."""
    words = ("the quick brown fox jumps over a lazy dog while seven wise owls count silver stars above "
             "quiet hills and the river keeps its slow song").split()
    text, i = "", 0
    while len(model.tokenize(text)) < n:
        text += (" " if text else "") + words[i % len(words)] + (str(i) if i % 7 == 0 else "")
        i += 1
    while len(model.tokenize(text)) > n:
        text = text[:-1]
    if len(model.tokenize(text)) != n:
        raise SystemExit(f"could not make a prompt of exactly {n} tokens")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=str(ROOT / "build" / "cli" / "focal"))
    ap.add_argument("--model", default="assets/models/focal-t0.4")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    os.chdir(ROOT)

    t0 = time.perf_counter()
    import focalscope as fs
    import_s = time.perf_counter() - t0
    model = fs.load(args.model, device="cpu")
    text = prompt_of_length(model, args.tokens)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="focal_pybench_"))
    (tmp / "prompt.txt").write_text(text)

    settings = {
        "probs+scores, all 4x6 heads": ([], {}),
        "metrics only (--store metrics)": (["--store", "metrics"], dict(probs=False, scores=False)),
    }
    print(f"# T = {args.tokens}, model {args.model}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"{args.reps} repetitions each (alternating), import focalscope {import_s * 1e3:.0f} ms (once)")
    print(f"{'setting':34} {'CLI median s':>12} {'Python median s':>15} {'CLI min s':>10} {'Python min s':>12} "
          f"{'Python/CLI (median)':>20}")
    worst = 0.0
    for label, (cli_opts, py_kw) in settings.items():
        cli_t, py_t = [], []
        for _ in range(args.reps):
            t = time.perf_counter()
            subprocess.run([args.cli, "capture", args.model, "--device", "cpu", "--prompt-file", tmp / "prompt.txt",
                            *cli_opts, "-o", tmp / "cli.h5"], check=True, capture_output=True)
            cli_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            m = fs.load(args.model, device="cpu")
            cap = m.run(text, **py_kw)
            cap.save(tmp / "py.h5")
            py_t.append(time.perf_counter() - t)
            del cap, m
        assert cap_equal(tmp / "cli.h5", tmp / "py.h5"), "the Python and CLI files differ"
        ratio = statistics.median(py_t) / statistics.median(cli_t)
        worst = max(worst, ratio)
        print(f"{label:34} {statistics.median(cli_t):12.3f} {statistics.median(py_t):15.3f} {min(cli_t):10.3f} "
              f"{min(py_t):12.3f} {ratio:20.3f}")
    print(f"# worst Python/CLI ratio {worst:.3f}: {'within' if worst <= 1.05 else 'OVER'} the 5 % budget")
    return 0


def cap_equal(a, b):
    import h5py
    import numpy as np
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        names = []
        fa.visit(names.append)
        for n in names:
            if not isinstance(fa[n], h5py.Dataset):
                continue
            x, y = fa[n][()], fb[n][()]
            same = x.tolist() == y.tolist() if x.dtype.kind == "O" else x.tobytes() == y.tobytes()
            if not same or x.dtype != y.dtype:
                return False
    return True


if __name__ == "__main__":
    sys.exit(main())

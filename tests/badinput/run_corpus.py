#!/usr/bin/env python3
"""Runs every CLI entry point (and the app's open path) over the bad-input corpus of make_corpus.py (issue 20).

Each (case, entry point) must (unless the case expects a warning: then exit 0 with a warning naming the field): exit 1 or 2 (not 0, not 3 "internal error", not a signal); print a message that
names the case's file and field; finish within 10 s; stay under a 2 GiB address-space limit (RLIMIT_AS; under
AddressSanitizer, which reserves terabytes of address space, ASan's own per-allocation cap of 2 GiB instead); and
leave no output file behind.

  usage: run_corpus.py --focal BIN --probe APP_PROBE --corpus DIR --kind model|capture [--asan] [-j N]"""
import argparse
import concurrent.futures
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

LIMIT_BYTES = 2 << 30
TIME_LIMIT_S = 10.0


def entry_points(kind, path, out, probe, good_model):
    if kind == "model":
        return [
            ("info", ["info", path]),
            ("capture", ["capture", path, "--prompt", "a b c", "-o", os.path.join(out, "c.h5")]),
            ("generate", ["generate", path, "--prompt", "a b", "-n", "2", "--capture", os.path.join(out, "g.h5")]),
            ("eval", ["eval", path, "--data", os.path.join(out, "no-data"), "-o", os.path.join(out, "e.h5")]),
            ("app-open", None),
        ]
    eps = [("inspect", ["inspect", path])]
    for fig in ["distribution", "heatmap", "grid", "entropy", "sweep", "training", "retrieval"]:
        eps.append(("figure-" + fig, ["figure", fig, path, "-o", os.path.join(out, fig + ".png")]))
    eps.append(("figure-entropy-matrix", ["figure", "entropy", path, "--matrix", "-o", os.path.join(out, "m.svg")]))
    eps.append(("app-open", None))
    return eps


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def run_one(args, case, name, argv):
    out = tempfile.mkdtemp(prefix="badinput-")
    try:
        eps = dict(entry_points(case["kind"], case["path"], out, args.probe, None))
        cmd = [args.probe, args.good_model, case["path"]] if argv is None else [args.focal] + eps[name]
        if argv is not None:
            cmd += case.get("extra", [])
        warning = case.get("expect") == "warning"  # accepted, with a warning that names the field
        env = dict(os.environ, OMP_NUM_THREADS="1")
        if args.asan:
            env["ASAN_OPTIONS"] = "max_allocation_size_mb=2048:allocator_may_return_null=1:detect_leaks=1"
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=TIME_LIMIT_S,
                               preexec_fn=None if args.asan else limit_memory)
        except subprocess.TimeoutExpired:
            return "did not finish within %.0f s: %s" % (TIME_LIMIT_S, " ".join(cmd))
        dt = time.monotonic() - t0
        text = (p.stdout + p.stderr).decode("utf-8", "replace")
        problems = []
        if p.returncode < 0:
            problems.append("killed by signal %s" % signal.Signals(-p.returncode).name)
        elif warning and p.returncode != 0:
            problems.append("exit %d (want 0: accepted with a warning)" % p.returncode)
        elif not warning and p.returncode not in (1, 2):
            problems.append("exit %d (want 1 or 2)" % p.returncode)
        if warning and "warning" not in text.lower():
            problems.append("no warning printed")
        if "internal error" in text:
            problems.append("reached 'internal error'")
        low = text.lower()
        if case["file"].lower() not in low and case["path"].lower() not in low:
            problems.append("message does not name the file '%s'" % case["file"])
        # The figure kinds of other file types (sweep, training, retrieval) refuse a capture by its format.
        need_field = not (name in ("figure-sweep", "figure-training", "figure-retrieval"))
        if need_field and case["field"].lower() not in low:
            problems.append("message does not name the field '%s'" % case["field"])
        left = [f for f in os.listdir(out)]
        if left and not warning:
            problems.append("left output files behind: %s" % ", ".join(left))
        if problems:
            return "%s (%.1f s): %s\n      $ %s\n      > %s" % (
                "; ".join(problems), dt, "", " ".join(cmd), text.strip().replace("\n", "\n      > ")[:1200])
        return None
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--focal", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--kind", choices=["model", "capture"], required=True)
    ap.add_argument("--asan", action="store_true", help="the binaries are ASan builds")
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args()
    with open(os.path.join(args.corpus, "manifest.json")) as f:
        manifest = json.load(f)
    args.good_model = manifest["model"]
    cases = [c for c in manifest["cases"] if c["kind"] == args.kind and args.only in c["name"]]
    if not cases:
        print("run_corpus: no %s cases in %s" % (args.kind, args.corpus), file=sys.stderr)
        return 2
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as pool:
        for c in cases:
            for name, argv in entry_points(c["kind"], c["path"], "", args.probe, None):
                if "entry_points" in c and name not in c["entry_points"]:
                    continue
                jobs.append((c["name"], name, pool.submit(run_one, args, c, name, argv)))
        failures = []
        for cname, name, fut in jobs:
            msg = fut.result()
            if msg:
                failures.append("  %s / %s: %s" % (cname, name, msg))
    print("run_corpus: %d %s cases x entry points = %d runs, %d failed" % (len(cases), args.kind, len(jobs),
                                                                          len(failures)))
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

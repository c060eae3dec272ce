#!/usr/bin/env python3
"""Turns a bench/gpu/device-check.sh log into docs/results/gpu-latest.json (issue 32's keys): every "result KEY VALUE"
line of the log, the ratios the issue names, and null with a reason in "notes" for whatever the log does not hold.
usage: results_json.py DEVICE_CHECK_LOG > gpu-latest.json"""
import datetime
import json
import os
import re
import sys


def main():
    if len(sys.argv) != 2 or sys.argv[1] == "--help":
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    text = open(sys.argv[1], errors="replace").read()
    r = {}
    for m in re.finditer(r"^result (\S+) (.+)$", text, re.M):
        v = m.group(2).strip()
        try:
            r[m.group(1)] = float(v)
        except ValueError:
            r[m.group(1)] = v.strip('"')
    commit_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".devpack", "commit.txt")
    commit = open(commit_file).read().strip() if os.path.exists(commit_file) else None
    notes = []

    def ratio(key, num, den, why):
        a, b = r.get(num), r.get(den)
        if isinstance(a, float) and isinstance(b, float) and b > 0:
            return round(a / b, 3)
        notes.append(f"{key}: null ({why}; {num} = {a}, {den} = {b})")
        return None

    out = {
        "device": r.get("device"),
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "prefill_8b_t2048_vs_torch_sdpa": ratio("prefill_8b_t2048_vs_torch_sdpa", "prefill_fast_metrics_T2048",
                                                "torch_sdpa_T2048", "a run missing from the log"),
        "prefill_8b_t8192_vs_torch_sdpa": ratio("prefill_8b_t8192_vs_torch_sdpa", "prefill_fast_metrics_T8192",
                                                "torch_sdpa_T8192", "a run missing from the log"),
        "capture_8b_t2048_vs_hf_eager": ratio("capture_8b_t2048_vs_hf_eager", "prefill_fast_capture_layer_T2048",
                                              "torch_eager_capture_T2048", "a run missing from the log"),
        "decode_8b_q4k_bandwidth_fraction": r.get("decode_q4k_bandwidth_fraction"),
        "decode_8b_q4k_vs_llamacpp_cuda": ratio("decode_8b_q4k_vs_llamacpp_cuda", "decode_q4k_tok_s",
                                                "llamacpp_cuda_tg128", "a run missing from the log"),
        "propagate_8b_t4096_ms": r.get("propagate_T4096_ms"),
        "device_gib_8b_q4k_t8192": r.get("device_gib_q4k_T8192"),
        "notes": notes,
        "raw": r,
    }
    for k in ("decode_8b_q4k_bandwidth_fraction", "propagate_8b_t4096_ms", "device_gib_8b_q4k_t8192"):
        if out[k] is None:
            notes.append(f"{k}: null (not in the log)")
    for T in (8192, 16384):
        if r.get(f"torch_eager_capture_T{T}") == "oom":
            notes.append(f"transformers eager with output_attentions ran out of device memory at T = {T}")
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

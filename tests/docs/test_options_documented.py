#!/usr/bin/env python3
"""Every option that `focal COMMAND --help` lists is named in the user documentation (docs/*.md other than the
performance logs, and README.md): a new option without a word in the docs fails here, naming it.

usage: test_options_documented.py FOCAL_BINARY SOURCE_DIR"""
import glob
import os
import re
import subprocess
import sys

COMMANDS = ["info", "capture", "sweep", "generate", "inspect", "init", "figure", "demo", "train", "calibrate",
            "batch", "eval", "export"]


def main():
    focal, root = sys.argv[1], sys.argv[2]
    paths = [p for p in glob.glob(os.path.join(root, "docs", "*.md")) if "performance" not in os.path.basename(p)]
    docs = "".join(open(p, encoding="utf-8").read() for p in paths + [os.path.join(root, "README.md")])
    missing = []
    for cmd in COMMANDS + ["eval --positions"]:
        args = [focal, *cmd.split(), "--help"]
        out = subprocess.run(args, capture_output=True, text=True)
        assert out.returncode == 0, f"{' '.join(args)} exited {out.returncode}: {out.stderr}"
        for opt in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", out.stdout))):
            if not re.search(re.escape(opt) + r"(?![a-z0-9-])", docs):
                missing.append(f"focal {cmd} {opt}")
    if missing:
        sys.exit("options in --help that no doc names (docs/*.md, README.md):\n  " + "\n  ".join(missing))
    print(f"every option of {len(COMMANDS) + 1} commands' --help is in the docs")


if __name__ == "__main__":
    main()

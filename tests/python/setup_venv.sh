#!/usr/bin/env bash
# Adds the Python package's build and test tools to the repo-root .venv (Debian python3, --system-site-packages, so
# Debian's numpy and h5py are seen): pinned nanobind and scikit-build-core (to build python/ without build
# isolation), pytest, nbclient/nbformat/ipykernel (to run the example notebook headless), and gguf + safetensors
# (as in tests/hf/setup_venv.sh: scripts/hf_to_gguf.py makes the GGUF file the tests load).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PY=/usr/bin/python3
PINS=(nanobind==2.15.0 scikit-build-core==0.11.6 pytest==8.3.5 nbclient==0.10.2 nbformat==5.10.4 ipykernel==6.29.5
      gguf==0.19.0 safetensors==0.8.0)

die() { echo "tests/python/setup_venv.sh: ERROR: $*" >&2; exit 1; }

"$PY" -c 'import numpy, h5py' 2>/dev/null || die "$PY cannot import numpy and h5py: apt-get install python3-numpy python3-h5py"
[ -x "$VENV/bin/python" ] || "$PY" -m venv --system-site-packages "$VENV" || die "could not create a venv at $VENV"

if "$VENV/bin/python" - "${PINS[@]}" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert version(name) == want, (name, version(name), want)
PYEOF
then
    echo "tests/python/setup_venv.sh: ${PINS[*]} already installed"
else
    echo "tests/python/setup_venv.sh: pip install ${PINS[*]}"
    "$VENV/bin/pip" install -q "${PINS[@]}" || die "pip install ${PINS[*]} failed"
fi

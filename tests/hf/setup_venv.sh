#!/usr/bin/env bash
# Creates the Python venv (repo-root .venv) used to generate Hugging Face reference fixtures
# for focalscope's conformance tests: Debian python3 + system torch 1.13 + pinned transformers.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PY=/usr/bin/python3
PINS=(transformers==4.47.1 safetensors sentencepiece "gguf==0.19.0" "tokenizers>=0.21,<0.22" "protobuf==3.20.3")

die() { echo "setup_venv.sh: ERROR: $*" >&2; exit 1; }

[ -x "$PY" ] || die "$PY not found (Debian's python3 is required; the pyenv python3 cannot see python3-torch)"
"$PY" -c 'import torch' 2>/dev/null \
    || die "$PY cannot import torch; install the Debian package: apt-get install python3-torch"

if [ -x "$VENV/bin/python" ]; then
    echo "setup_venv.sh: venv already exists at $VENV"
else
    echo "setup_venv.sh: creating venv at $VENV (with --system-site-packages)"
    "$PY" -m venv --system-site-packages "$VENV" || die "could not create venv at $VENV"
fi

if "$VENV/bin/python" - <<'PYEOF' 2>/dev/null
import transformers, safetensors, sentencepiece, torch, gguf, tokenizers, google.protobuf
assert transformers.__version__ == "4.47.1", transformers.__version__
# LlamaTokenizerFast's conversion of a tokenizer.model (the sentencepiece-style fixtures) reads Debian's
# sentencepiece_model_pb2, which protobuf 4 and later refuse.
assert google.protobuf.__version__ == "3.20.3", google.protobuf.__version__
from gguf import quants  # the GGUF tests' dequantisation reference
PYEOF
then
    echo "setup_venv.sh: ${PINS[*]} already installed"
else
    echo "setup_venv.sh: pip install ${PINS[*]}"
    "$VENV/bin/pip" install "${PINS[@]}" || die "pip install ${PINS[*]} failed"
fi

"$VENV/bin/python" -c 'import torch, transformers, safetensors; print("setup_venv.sh: ok: torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__)' \
    || die "venv at $VENV is not usable"

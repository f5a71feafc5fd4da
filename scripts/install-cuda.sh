#!/usr/bin/env bash
# Install the CUDA toolkit pieces that `sdr-embed`'s opt-in `cuda` feature (candle's CUDA
# back-end) needs to *build*, from NVIDIA's PyPI wheels, into a project-local prefix laid out
# like a CUDA installation: <repo>/.cuda/{bin,include,lib}. Needs no GPU and no driver.
#
#   nvcc, ptxas, fatbinary, ...  nvidia-cuda-nvcc, nvidia-cuda-crt, nvidia-nvvm (cicc)
#                                (candle-kernels compiles its .cu files)
#   headers, libcudart           nvidia-cuda-runtime, nvidia-cuda-cccl
#   libnvrtc, libcublas(Lt), libcurand   nvidia-cuda-nvrtc, nvidia-cublas, nvidia-curand
#   libcuda.so (link stub)       generated here: the driver library comes with the GPU
#                                driver; the stub only lets the linker resolve cudarc's
#                                `cu*` symbols (same role as the toolkit's lib/stubs).
#
# Then `bash scripts/build-sdr.sh --cuda` builds target-cuda/release/sdr for the GPU machine
# (CUDA_COMPUTE_CAP, default 90 = H100, selects the kernels' architecture). At run time the
# binary loads the real libcuda.so.1 of the driver and libcublas/libcurand/libnvrtc/libcudart
# of CUDA 13 (a CUDA 13 PyTorch carries them: see scripts/cuda-libs.sh).
# Idempotent: a complete prefix of the same version is kept.
#
# Usage: bash scripts/install-cuda.sh [PREFIX]
set -euo pipefail

CUDA_VERSION=13.4.92   # nvcc / runtime / nvrtc; cudarc 0.19 knows CUDA up to 13.4
CUBLAS_VERSION=13.4.3.11
CURAND_VERSION=10.4.4.72
CCCL_VERSION=13.3.4.3.1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${1:-$here/.cuda}
PY=${PYTHON:-python3}
log() { printf 'install-cuda: %s\n' "$*" >&2; }

stamp="$CUDA_VERSION $CUBLAS_VERSION $CURAND_VERSION $CCCL_VERSION"
need=(bin/nvcc include/crt/host_config.h nvvm/bin/cicc include/cuda.h include/cuda_runtime.h lib/libcudart.so lib/libcublas.so
  lib/libcublasLt.so lib/libcurand.so lib/libnvrtc.so lib/libcuda.so)
complete=1
for f in "${need[@]}"; do [[ -e "$PREFIX/$f" ]] || complete=0; done
if [[ $complete == 1 && -f "$PREFIX/.version" && "$(cat "$PREFIX/.version")" == "$stamp" ]]; then
  log "CUDA $CUDA_VERSION already installed at $PREFIX (nothing to do)"
  exit 0
fi

start=$(date +%s)
mkdir -p "$(dirname "$PREFIX")"
work=$(mktemp -d "$(dirname "$PREFIX")/.install-cuda.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "downloading nvidia-cuda-{nvcc,crt,runtime,nvrtc}, nvidia-nvvm $CUDA_VERSION, cublas, curand, cccl from PyPI"
"$PY" -m pip download --no-deps --disable-pip-version-check --quiet --dest "$work/dl" \
  "nvidia-cuda-nvcc==$CUDA_VERSION" "nvidia-cuda-crt==$CUDA_VERSION" "nvidia-nvvm==$CUDA_VERSION" \
  "nvidia-cuda-runtime==$CUDA_VERSION" \
  "nvidia-cuda-nvrtc==$CUDA_VERSION" "nvidia-cublas==$CUBLAS_VERSION" \
  "nvidia-curand==$CURAND_VERSION" "nvidia-cuda-cccl==$CCCL_VERSION"

log "extracting"
"$PY" - "$work/dl" "$work/prefix" <<'PYEOF'
import glob, os, stat, sys, zipfile

dl, prefix = sys.argv[1], sys.argv[2]
# The CUDA 13 wheels share one layout: nvidia/cu13/{bin,include,lib,nvvm,...}.
root = "nvidia/cu13/"
for whl in sorted(glob.glob(os.path.join(dl, "*.whl"))):
    with zipfile.ZipFile(whl) as z:
        for m in z.infolist():
            if not m.filename.startswith(root) or m.is_dir():
                continue
            rest = m.filename[len(root):]
            if rest.endswith("__init__.py") or rest.startswith("lib/cmake"):
                continue
            dst = os.path.join(prefix, rest)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with z.open(m) as src, open(dst, "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            mode = (m.external_attr >> 16) & 0o777
            if mode & 0o111 or rest.startswith("bin/") or "/bin/" in rest:
                os.chmod(dst, os.stat(dst).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PYEOF

lib="$work/prefix/lib"
# The linker wants unversioned names; the wheels ship only the sonames.
for so in libcudart libcublas libcublasLt libcurand libnvrtc; do
  real=$(cd "$lib" && ls "$so".so.* 2>/dev/null | grep -E "^$so\.so\.[0-9]+$" | head -n1 || true)
  [[ -n "$real" ]] || { log "error: $so.so.N missing from the wheels"; exit 1; }
  ln -sfn "$real" "$lib/$so.so"
done

# libcuda.so: a link-time stub exporting the driver API symbols cudarc declares. At run time
# the soname libcuda.so.1 resolves to the driver's real library. Every stub returns 100,
# CUDA_ERROR_NO_DEVICE, so that a stub loaded by mistake fails cleanly ("no CUDA device").
sys_rs=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs 2>/dev/null | tail -n1 || true)
if [[ -z "$sys_rs" ]]; then
  (cd "$here" && cargo fetch -q) && sys_rs=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs | tail -n1)
fi
grep -oE '^pub unsafe fn cu[A-Za-z0-9_]+' "$sys_rs" | sed 's/^pub unsafe fn //' | sort -u \
  | awk '{print "int " $1 "(void) { return 100; }"}' > "$work/cuda_stub.c"
log "libcuda.so stub: $(wc -l < "$work/cuda_stub.c") driver symbols from $sys_rs"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$lib/libcuda.so" "$work/cuda_stub.c"

"$work/prefix/bin/nvcc" --version | tail -n2 >&2
echo "$stamp" > "$work/prefix/.version"
rm -rf "$PREFIX"
mv "$work/prefix" "$PREFIX"
log "installed into $PREFIX ($(du -sh "$PREFIX" | cut -f1)) in $(( $(date +%s) - start )) s"

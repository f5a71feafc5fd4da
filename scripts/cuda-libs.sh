#!/usr/bin/env bash
# Prints an LD_LIBRARY_PATH under which the CUDA build of `sdr` (scripts/build-sdr.sh --cuda)
# finds CUDA 13's libcublas, libcublasLt, libcurand, libnvrtc and libcudart: the folders of a
# CUDA 13 PyTorch (or any Python with NVIDIA's nvidia-* CUDA 13 wheels), then this repository's
# .cuda/lib (scripts/install-cuda.sh), then what was already set. libcuda.so.1 comes from the
# GPU driver. Usage:
#   export LD_LIBRARY_PATH=$(bash scripts/cuda-libs.sh [PYTHON])
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
PY=${1:-${PYTHON:-python3}}
dirs=$("$PY" - <<'PY' 2>/dev/null || true
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
roots = list(getattr(nvidia, "__path__", []))
out = []
for r in roots:
    for pat in ("cu13/lib", "*/lib"):
        for d in sorted(glob.glob(os.path.join(r, pat))):
            if glob.glob(os.path.join(d, "lib*.so.1[0-9]*")) and d not in out:
                out.append(d)
print(":".join(out))
PY
)
path=$dirs
[[ -d "$here/.cuda/lib" ]] && path=${path:+$path:}$here/.cuda/lib
[[ -n "${LD_LIBRARY_PATH:-}" ]] && path=${path:+$path:}$LD_LIBRARY_PATH
echo "$path"

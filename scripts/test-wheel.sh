#!/usr/bin/env bash
# The distributed CPU wheel as a user gets it (issue 54): builds it with
# scripts/build-wheels.sh (or takes the wheel given), then fails unless
#   1. `auditwheel show` says it is consistent with manylinux_2_17_x86_64 (manylinux2014),
#   2. it is at most SDR_WHEEL_MAX_MB (default 12) compressed and SDR_WHEEL_MAX_UNPACKED_MB
#      (default 30) unpacked (measured: 6.0 MB and 13.4 MB; the release-profile wheel it
#      replaces was 31 MB and 144 MB),
#   3. in a fresh venv, with no cargo or rustc on PATH, `pip install` of the wheel (numpy
#      from PyPI or pip's find-links) imports `sdr_rewards` and scores a reward with all-mpnet-base-v2
#      (scripts/fetch-model.sh, run here; idempotent).
#
# Usage: bash scripts/test-wheel.sh [WHEEL]
# Environment: CARGO_TARGET_DIR, SDR_WHEELS_VENV, PYTHON as for scripts/build-wheels.sh;
#   SDR_WHEEL_MAX_MB, SDR_WHEEL_MAX_UNPACKED_MB.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
VENV=${SDR_WHEELS_VENV:-$ROOT/.venv-wheels}
PY=${PYTHON:-python3}
MAX_MB=${SDR_WHEEL_MAX_MB:-12}
MAX_UNPACKED_MB=${SDR_WHEEL_MAX_UNPACKED_MB:-30}
fail() { echo "test-wheel: FAIL: $*" >&2; exit 1; }

if [[ $# -ge 1 ]]; then
  WHEEL=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  [[ -f "$WHEEL" ]] || fail "no wheel $1"
else
  echo "== $(date +%T) building the cpu wheel (scripts/build-wheels.sh cpu)"
  OUT=$CARGO_TARGET_DIR/wheels-test
  rm -rf "$OUT"
  SDR_WHEELS_OUT=$OUT bash scripts/build-wheels.sh cpu
  WHEEL=$(ls "$OUT"/sdr_rewards-*.whl)
fi
echo "== $(date +%T) $WHEEL"

echo "== auditwheel show"
[[ -x "$VENV/bin/auditwheel" ]] || { "$PY" -m venv "$VENV"; "$VENV/bin/python" -m pip install -q auditwheel==6.8.2; }
show=$("$VENV/bin/auditwheel" show "$WHEEL")
echo "$show"
# auditwheel wraps its lines: join them before matching.
echo "$show" | tr '\n' ' ' | grep -q 'is consistent with the following platform tag: "manylinux_2_17_x86_64"' \
  || fail "auditwheel does not report manylinux_2_17_x86_64 (manylinux2014)"

echo "== size (bounds: $MAX_MB MB compressed, $MAX_UNPACKED_MB MB unpacked)"
"$PY" - "$WHEEL" "$MAX_MB" "$MAX_UNPACKED_MB" <<'PY'
import os, sys, zipfile
wheel, max_mb, max_unpacked_mb = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
size = os.path.getsize(wheel) / 1e6
with zipfile.ZipFile(wheel) as z:
    unpacked = sum(i.file_size for i in z.infolist()) / 1e6
print(f"{size:.1f} MB compressed, {unpacked:.1f} MB unpacked")
if size > max_mb or unpacked > max_unpacked_mb:
    sys.exit(f"test-wheel: FAIL: the wheel exceeds {max_mb} MB / {max_unpacked_mb} MB unpacked")
PY

bash scripts/fetch-model.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== fresh venv, pip install $(basename "$WHEEL")"
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q "$WHEEL"
# PATH without any folder that holds cargo or rustc (~/.cargo/bin, a system Rust).
clean=
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [[ -n "$d" && ! -e "$d/cargo" && ! -e "$d/rustc" ]] && clean=${clean:+$clean:}$d
done
cd "$tmp"   # not the repository: `import sdr_rewards` must find the installed package
env -u RUSTUP_HOME -u CARGO_HOME PATH="$tmp/venv/bin:$clean" bash -c '
  if command -v cargo || command -v rustc; then echo "test-wheel: FAIL: a Rust toolchain on PATH" >&2; exit 1; fi
  python -c "import sdr_rewards, sys; r = sdr_rewards.SDRReward(); ref = \"<think>Heart size is normal. No pleural effusion.</think><answer>No acute disease.</answer>\"; s = r.score([ref, \"<think>Large left pleural effusion.</think><answer>Effusion.</answer>\", \"no template\"], references=[ref] * 3); print(sdr_rewards.__file__, sdr_rewards.__version__, [round(x, 4) for x in s[\"reward\"]]); rw = s[\"reward\"]; sys.exit(0 if abs(rw[0] - 3) < 1e-4 and 1 < rw[1] < 3 and rw[2] == 0 else \"unexpected rewards\")"
'
echo "== $(date +%T) test-wheel: passed"

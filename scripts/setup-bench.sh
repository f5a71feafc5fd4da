#!/usr/bin/env bash
# The benchmarks' venv (bench/README.md): the Python side of every comparison in bench/
# that does not need the trainers (those run from .venv-trainers, scripts/install-trainers.sh:
# bench/per_sample.py, bench/cost_table.py).
#
#   scripts/requirements-fixtures.txt        numpy, SciPy, POT (bench/distances.py, bench/selection.py)
#   scripts/requirements-embed-fixtures.txt  sentence-transformers, torch, transformers
#                                            (bench/embed.py, bench/rewards.py, bench/embed_gpu.py)
#   tools/requirements-yardstick.txt         safetensors, nltk, rouge-score (tools/yardstick.py,
#                                            docs/results/yardstick.md)
#   maturin                                  builds the sdr-rewards wheel
#   sdr-rewards                              this checkout's wheel (maturin, release), as
#                                            scripts/install-trainers.sh builds it
# and the model (scripts/fetch-model.sh).
#
# torch: the CPU build from PyTorch's index when reachable, else PyPI's (the CUDA build,
# which runs on CPU too); SDR_TORCH_INDEX=pypi skips the attempt.
# Environment: SDR_BENCH_VENV (default ./.venv-bench), PYTHON (default python3),
# CARGO_TARGET_DIR (default ./target), SDR_WHEEL=FILE (install that wheel instead of
# building one, e.g. SDR_WHEEL=$(ls target/wheels-trainers/sdr_rewards-*.whl)), SDR_SKIP_WHEEL=1
# (leave the installed sdr-rewards as it is). Idempotent; prints the venv's path last:
#   VENV=$(bash scripts/setup-bench.sh | tail -n 1)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${SDR_BENCH_VENV:-$ROOT/.venv-bench}
PY=${PYTHON:-python3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TORCH_INDEX=${SDR_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
REQS=(scripts/requirements-fixtures.txt scripts/requirements-embed-fixtures.txt tools/requirements-yardstick.txt)

[ -x "$VENV/bin/python" ] || { echo "== creating $VENV" >&2; "$PY" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip install -q)

# torch first, from the CPU index when it answers; the requirements' pin (torch==X) then
# holds for the CPU build too (X+cpu).
TORCH=$(grep -E '^torch==' scripts/requirements-embed-fixtures.txt)
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  if [ "$TORCH_INDEX" != pypi ] && "${PIP[@]}" --timeout 20 --index-url "$TORCH_INDEX" "$TORCH" >&2 2>/dev/null; then
    echo "== $TORCH (CPU build) from $TORCH_INDEX" >&2
  else
    echo "== $TORCH from PyPI (the CUDA build, which also runs on CPU)" >&2
    "${PIP[@]}" "$TORCH" >&2
  fi
fi

# Every `name==version` line of the requirements installed at that version, every other
# line's package installed, and maturin.
have() { "$VENV/bin/python" - "$@" <<'PY' 2>/dev/null
import importlib.metadata as m, re, sys
for path in sys.argv[1:]:
    for line in open(path):
        line = line.split("#")[0].strip()
        if not line:
            continue
        name, op, version = re.match(r"([A-Za-z0-9_.-]+)\s*(==|>=|<=|~=|<|>)?\s*(.*)", line).groups()
        installed = m.version(name).split("+")[0]
        if op == "==" and installed != version:
            sys.exit(1)
m.version("maturin")
PY
}
if ! have "${REQS[@]}"; then
  echo "== pip install -r ${REQS[*]} maturin" >&2
  "${PIP[@]}" "${REQS[@]/#/-r}" "maturin>=1.9,<2" >&2
fi

bash scripts/fetch-model.sh >/dev/null
if [ -n "${SDR_WHEEL:-}" ]; then
  echo "== installing $SDR_WHEEL" >&2
  "${PIP[@]}" --force-reinstall --no-deps "$SDR_WHEEL" >&2
elif [ "${SDR_SKIP_WHEEL:-0}" != 1 ]; then
  echo "== building the sdr-rewards wheel (maturin, release)" >&2
  WHEELS=$CARGO_TARGET_DIR/wheels-bench
  rm -rf "$WHEELS"
  "$VENV/bin/maturin" build --release -q -m bindings/python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS" >&2
  "${PIP[@]}" --force-reinstall --no-deps "$WHEELS"/sdr_rewards-*.whl >&2
fi
echo "$VENV"

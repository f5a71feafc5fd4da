#!/usr/bin/env bash
# The environment of recipes/ray_corpus.py: a venv of its own (default ./.venv-ray,
# git-ignored) with Ray Data from PyPI (`ray[data]`) and the `sdr-rewards` wheel built from
# this checkout. Idempotent; prints the venv's path on its last line.
#
# Every node of a real cluster needs the same: run this script on each, or install
# the wheel it builds ($CARGO_TARGET_DIR/wheels-ray/sdr_rewards-*.whl) into the Python that
# runs the Ray workers.
#
# Environment: SDR_RAY_VENV (default ./.venv-ray), PYTHON (default python3),
# CARGO_TARGET_DIR (default ./target).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${SDR_RAY_VENV:-$ROOT/.venv-ray}
PY=${PYTHON:-python3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

[ -x "$VENV/bin/python" ] || { echo "== creating $VENV" >&2; "$PY" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip install -q)
if ! "$VENV/bin/python" -c "import ray.data, maturin" 2>/dev/null; then
  echo "== pip install ray[data] maturin" >&2
  "${PIP[@]}" "ray[data]>=2.40,<3" "maturin>=1.9,<2" >&2
fi
echo "== building the sdr-rewards wheel (maturin, release)" >&2
WHEELS=$CARGO_TARGET_DIR/wheels-ray
rm -rf "$WHEELS"
"$VENV/bin/maturin" build --release -q -m bindings/python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS" >&2
# Until 0.2.0 the distribution was called `sdr` (issue 54): drop that one, whose `sdr` package would linger.
"$VENV/bin/python" -m pip show sdr 2>/dev/null | grep "^Summary: Set-distance rewards" >/dev/null && "$VENV/bin/python" -m pip uninstall -q -y sdr >&2
"${PIP[@]}" --force-reinstall --no-deps "$WHEELS"/sdr_rewards-*.whl >&2
echo "$VENV"

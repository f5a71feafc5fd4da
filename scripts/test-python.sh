#!/usr/bin/env bash
# Python bindings: build the `sdr-rewards` wheel with maturin, install it into a venv,
# run pytest (bindings/python/tests). Called by scripts/test.sh; also runs alone.
#
# Environment:
#   CARGO_TARGET_DIR  cargo/maturin target folder (default: ./target); reused, so
#                     a warm folder makes this a few-seconds rebuild
#   SDR_PY_VENV       the venv (default: ./.venv; created when missing)
#   PYTHON            interpreter that creates the venv (default: python3)
#   SDR_BIN           the CLI the tests compare against; when unset, built here
#                     (cargo build --release). scripts/test.sh passes the one
#                     `cargo test` just built, instead of a second full build.
#   SDR_PY_PROFILE    cargo profile of the wheel (default: release). scripts/test.sh
#                     passes `dev` (optimised, with debug assertions and overflow
#                     checks, as the CLI under test): the checks caught numpy
#                     buffers a release wheel read misaligned without a word.
# Needs PyPI for maturin, numpy and pytest on the first run, and the model
# (scripts/fetch-model.sh, run here; idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
VENV=${SDR_PY_VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating venv $VENV"
  "$PY" -m venv "$VENV"
fi
# cloudpickle: how Ray (verl's remote reward manager) sends sdr_rewards/verl.py's functions.
if ! "$VENV/bin/python" -c "import maturin, numpy, pytest, cloudpickle" 2>/dev/null; then
  echo "== pip install maturin numpy pytest cloudpickle"
  "$VENV/bin/python" -m pip install -q "maturin>=1.9,<2" numpy pytest cloudpickle
fi

bash scripts/fetch-model.sh

if [ -z "${SDR_BIN:-}" ]; then
  echo "== cargo build --release -p sdr-cli (the CLI the tests compare against)"
  cargo build --release -q -p sdr-cli
  SDR_BIN=$CARGO_TARGET_DIR/release/sdr
fi
[ -x "$SDR_BIN" ] || { echo "test-python: SDR_BIN=$SDR_BIN is not an executable" >&2; exit 1; }
echo "== the CLI under test: $SDR_BIN"

PROFILE=${SDR_PY_PROFILE:-release}
echo "== maturin build --profile $PROFILE"
WHEELS=$CARGO_TARGET_DIR/wheels-sdr
rm -rf "$WHEELS"
"$VENV/bin/maturin" build --profile "$PROFILE" -q -m bindings/python/Cargo.toml \
  -i "$VENV/bin/python" -o "$WHEELS"
# Until 0.2.0 the distribution was called `sdr` (issue 54): drop that one, whose `sdr` package would linger.
"$VENV/bin/python" -m pip show sdr 2>/dev/null | grep "^Summary: Set-distance rewards" >/dev/null && "$VENV/bin/python" -m pip uninstall -q -y sdr >&2
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$WHEELS"/sdr_rewards-*.whl

echo "== pytest bindings/python/tests"
cd bindings/python
SDR_BIN=$SDR_BIN "$VENV/bin/python" -m pytest -q tests "$@"

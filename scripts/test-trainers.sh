#!/usr/bin/env bash
# The trainer part of the integration tier: the reward driven through pinned releases of
# TRL (1.16.0, transformers 5.24.0), verl (0.9.1) and OpenRLHF (0.11.2), through their own
# code, on a CPU (scripts/install-trainers.sh says what is installed how, and why verl and
# OpenRLHF go in with --no-deps). Prints each check's JSON report and "ok" or its failures;
# exits non-zero on the first failing check. Called by scripts/test-integration.sh.
#
# Environment: SDR_TRAINERS_VENV (default ./.venv-trainers), CARGO_TARGET_DIR, SDR_BIN
# (the CLI for `sdr serve`; default: built here with scripts/build-sdr.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(bash scripts/install-trainers.sh | tail -n 1)
PY=$VENV/bin/python
if [ -z "${SDR_BIN:-}" ]; then
  bash scripts/build-sdr.sh -q
  SDR_BIN=${CARGO_TARGET_DIR:-target}/release/sdr
fi
export SDR_BIN
"$PY" -c "import importlib.metadata as m; print('==', ', '.join(p + ' ' + m.version(p) for p in ('trl', 'transformers', 'verl', 'openrlhf', 'ray', 'torch')))"
echo "== TRL: GRPOTrainer (plain, Qwen3 response schema), AsyncGRPOTrainer scoring"
"$PY" recipes/trl_integration.py
echo "== verl: loader, reward-loop managers, RewardLoopManager on a local Ray"
"$PY" recipes/verl_integration.py
echo "== OpenRLHF: SingleTurnAgentExecutor with the reward file and with sdr serve"
"$PY" recipes/openrlhf_integration.py
echo "trainers: ok"

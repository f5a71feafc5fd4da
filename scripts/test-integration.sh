#!/usr/bin/env bash
# The integration tier: installs llama-cpp-python's OpenAI-compatible server
# and the SmolLM2-135M-Instruct GGUF (scripts/install-llama-server.sh), then
# runs the ignored tests, which start that server on 127.0.0.1; the encoder's tests in
# the MKL build that scripts/setup.sh makes; finally the
# trainers (scripts/test-trainers.sh: TRL, verl, OpenRLHF in .venv-trainers), and the sharded
# corpus build on a local Ray cluster (scripts/test-ray-corpus.sh), the CUDA build's
# `cargo check` (scripts/check-cuda.sh), and the page of `sdr explain --html` in headless
# Chromium (scripts/test-explain-page.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=$(bash scripts/install-llama-server.sh | tail -n 1)
[[ "$VENV" = /* ]] || VENV=$PWD/$VENV
export SDR_LLAMA_PYTHON=${SDR_LLAMA_PYTHON:-$VENV/bin/python}
export SDR_SMOLLM2_GGUF=${SDR_SMOLLM2_GGUF:-$(bash scripts/fetch-smollm2.sh)}

cargo test --release -p sdr-gen -- --ignored --nocapture

# The CLI against the same server: `sdr generate` and live `sdr prune` with the
# openai back-end on a few test studies.
bash scripts/build-sdr.sh -q
SDR="${CARGO_TARGET_DIR:-target}/release/sdr"
# The encoder of that build (MKL's sgemm and AMX bf16 GEMM, where build-sdr.sh linked MKL)
# against the same sentence-transformers fixtures as the default build in scripts/test.sh.
if [[ "$(uname -m)" == x86_64 && "${SDR_NO_MKL:-0}" != 1 ]] && bash scripts/install-mkl.sh; then
  cargo test --release -q -p sdr-embed --features mkl
fi
bash scripts/fetch-model.sh >/dev/null
PORT=${SDR_LLAMA_PORT:-18089}
OUT=results/integration
mkdir -p "$OUT"
"$SDR_LLAMA_PYTHON" -m llama_cpp.server --model "$SDR_SMOLLM2_GGUF" --host 127.0.0.1 \
  --port "$PORT" --n_ctx 2048 --interrupt_requests False > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break
  sleep 1
done
API=(--backend openai --base-url "http://127.0.0.1:$PORT/v1" --api-model smollm2 --timeout 300)
"$SDR" generate "${API[@]}" --limit 2 -k 4 --prompt p2 --context indication --max-tokens 96 \
  -o "$OUT/gen-openai.jsonl"
CORPUS=results/main-job/iu-train.safetensors
if ! "$SDR" corpus info "$CORPUS" >/dev/null 2>&1; then
  mkdir -p results/main-job
  "$SDR" corpus build --input data/iu-xray/indiana_reports.csv --format csv --split train --out "$CORPUS"
fi
"$SDR" prune "${API[@]}" --corpus "$CORPUS" --limit 3 -k 4 --prompt p2 --context indication \
  --max-tokens 96 -o "$OUT/prune-openai.jsonl"
python3 - "$OUT/prune-openai.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    assert r["mode"] == "live" and r["text"], r
    print(f"study {r['id']}: chose {r['chosen']}, tokens used {r['tokens_used']}, "
          f"streamed by the server {r['tokens_produced']}, per candidate {r['candidate_tokens']}")
PY
# The reward inside pinned releases of TRL, verl and OpenRLHF, through their own code, on a
# tiny model: a trainer upgrade that changes how the reward is called is caught in minutes.
echo "== trainers: TRL 1.16.0, verl 0.9.1, OpenRLHF 0.11.2"
SDR_BIN="$SDR" bash scripts/test-trainers.sh
# A sharded corpus build on a local three-node Ray cluster, merged, against one build.
echo "== Ray: sharded corpus build"
bash scripts/test-ray-corpus.sh
# The CUDA encoder compiles (toolkit from PyPI; no GPU needed to build).
echo "== CUDA build check"
bash scripts/check-cuda.sh
# The explanation page in a real browser: DOM checks and a screenshot.
echo "== sdr explain --html in headless Chromium"
bash scripts/test-explain-page.sh
echo "integration: ok"

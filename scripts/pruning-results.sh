#!/usr/bin/env bash
# Distance-guided pruning on IU X-ray (paper §4.2, Alg. 1; SPEC §6): random vs
# standard best-of-K vs pruning, on generated candidates.
#
#   bash scripts/pruning-results.sh            # uses the committed generations
#   REGENERATE=1 bash scripts/pruning-results.sh
#
# 1. candidates: data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl, made by
#      sdr generate --gguf GEMMA --limit 50 -k 8 --prompt p2 --context indication \
#        --max-tokens 160 --seed 0 --prefill Findings: --repetition-penalty 1.2
#    (Gemma 3 270M Q4_K_M from scripts/fetch-gemma3.sh, local back-end; REGENERATE=1 remakes
#    it, ~12 min on 2 cores; tools/candidate_stats.py compares its format with SmolLM2's
#    generations under the same settings and without prefill and penalty);
# 2. the train-split corpus (shared with scripts/main-job.sh);
# 3. `sdr prune --replay` under several policies and warm-ups, each with
#    standard best-of-K under the same policy alongside;
# 4. live pruning with the local back-end for one policy, checked to pick the
#    same candidates with the same token counts as the replay;
# 5. one `sdr eval` table over every policy (BLEU-4, ROUGE-L, BERTScore-F1,
#    CheXpert-rule F1; tokens saved), each candidate scored once, into
#    results/pruning/ and docs/results/pruning.md, with a second table of each
#    pruning run's change against standard best-of-K under the same policy, with
#    95 % paired-bootstrap intervals over the studies. BERTScore is judged by
#    all-MiniLM-L6-v2 (scripts/fetch-minilm.sh), not by the reward's own encoder.
#
# STUDIES=N keeps the first N studies (a smoke run: the report then goes to
# results/pruning/pruning.md, not docs/); LIVE_STUDIES=N runs the live check on
# the first N studies only (default: all); SKIP_LIVE=1 reuses the previous live
# paragraph; REUSE=1 reuses replays newer than the candidates; SDR_BIN=PATH uses that
# binary instead of building one (e.g. to re-score existing replays with a new judge).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=results/pruning
CSV=data/iu-xray/indiana_reports.csv
GEN=data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl
GEN_ARGS=(--limit 100 -k 8 --prompt p2 --context indication --max-tokens 160 --seed 0
  --prefill Findings: --repetition-penalty 1.2)
SMOL_GEN=data/candidates/iu-test-smollm2-k8-p2-prefill-rp1.2.jsonl  # SmolLM2-135M, same settings
OLD_GEN=data/candidates/iu-test-smollm2-k8-p2.jsonl  # SmolLM2, without prefill and penalty
STANDINS=data/candidates/iu-test-k5.jsonl             # format-keeping stand-ins, K = 5
mkdir -p "$OUT" docs/results
REPORT=docs/results/pruning.md

bash scripts/fetch-model.sh >/dev/null
bash scripts/fetch-minilm.sh >/dev/null
# The BERTScore judge of every table: independent of the reward's all-mpnet-base-v2.
JUDGE=(--bertscore-model "${SDR_HOME:-$HOME/.cache/sdr}/models/all-MiniLM-L6-v2" --judge-f1)
GGUF=$(bash scripts/fetch-gemma3.sh)
MODEL_ARGS=(--gguf "$GGUF")
if [ -n "${SDR_BIN:-}" ]; then
  SDR=$SDR_BIN
else
  bash scripts/build-sdr.sh -q
  SDR="${CARGO_TARGET_DIR:-target}/release/sdr"
fi

if [ -n "${REGENERATE:-}" ] || [ ! -s "$GEN" ]; then
  echo "== generating candidates: sdr generate ${GEN_ARGS[*]}"
  "$SDR" generate "${MODEL_ARGS[@]}" "${GEN_ARGS[@]}" -o "$GEN"
fi

if [ -n "${STUDIES:-}" ]; then
  head -n "$STUDIES" "$GEN" > "$OUT/candidates.jsonl"
  GEN="$OUT/candidates.jsonl"
  REPORT="$OUT/pruning.md"
fi

CORPUS=results/main-job/iu-train.safetensors
# Sentence embeddings shared by every step and run (scripts/main-job.sh sets the same folder).
CACHE_DIR=${SDR_CACHE_DIR:-results/sentence-cache}
mkdir -p results/main-job
if ! "$SDR" corpus info "$CORPUS" >/dev/null 2>&1; then
  echo "== building the train-split corpus"
  "$SDR" corpus build --input "$CSV" --format csv --split train --out "$CORPUS"
fi

TMP_REPORT="$OUT/.pruning.md.tmp"
{
  echo "# Distance-guided pruning on IU X-ray (generated candidates)"
  echo
  # Filled by scripts/results.py from the comparison tables below (scripts/pages/pruning_judge.py).
  echo "<!-- results:judge-verdict:begin -->"
  echo "<!-- results:judge-verdict:end -->"
  echo
  echo "Made by \`bash scripts/pruning-results.sh\` on $(date -u +%Y-%m-%d). Candidates: \`$GEN\`,"
  echo "from \`sdr generate --gguf gemma-3-270m-q4_k_m.gguf ${GEN_ARGS[*]}\` (Gemma 3 270M,"
  echo "pretrained, Q4_K_M, local back-end; \`scripts/fetch-gemma3.sh\` fetches it; a text-only model,"
  echo "so the prompt carries the study's indication instead of an image)."
  echo "Corpus: IU X-ray train split. Pruning fraction p = 0.5. Random = expectation of a uniform"
  echo "pick among the K = 8 candidates; standard = best-of-K on the full candidates under the"
  echo "same policy; tokens saved = 1 - tokens generated / tokens of the 8 full candidates."
  echo
  echo "Reading the tables: a malformed report scores 0 on every metric. Standard selection sees"
  echo "the whole text and discards malformed candidates; pruning decides after the first sentences,"
  echo "when no candidate has yet shown whether it will end well-formed. The \"well-formed %\" column"
  echo "shows how much of the gap between pruning and standard selection comes from that."
  echo
  echo "BERTScore-F1 is judged by all-MiniLM-L6-v2 (layer 6, no idf, not rescaled), independent of the reward's all-mpnet-base-v2 that versions of this page before 2026-11-28 used (their values are not comparable with these)."
  echo
  # Filled by scripts/results.py from the change tables below (scripts/pages/pruning_text.py):
  # the wording follows the intervals (lower / higher only where the interval excludes 0).
  echo "<!-- results:intervals:begin -->"
  echo "<!-- results:intervals:end -->"
  echo
  echo "### How well the generator keeps the format (\`tools/candidate_stats.py\`)"
  echo
  echo "Gemma 3 270M against SmolLM2-135M-Instruct (Q4_1) with the same prompt, seeds, prefilled"
  echo "\`Findings:\` header and repetition penalty (1.2), and SmolLM2 without prefill and penalty:"
  echo
  if [ "$REPORT" = docs/results/pruning.md ]; then
    # Each candidate's parse, committed; the table is filled by scripts/results.py from it
    # (scripts/pages/candidates.py, the one source of these shares on every page).
    python3 tools/candidate_stats.py --sdr "$SDR" --parse-json docs/results/candidates/parse.json \
      "$GEN" "$SMOL_GEN" "$OLD_GEN" > /dev/null
    echo "<!-- results:candidate-stats:begin -->"
    echo "<!-- results:candidate-stats:end -->"
  else
    python3 tools/candidate_stats.py --sdr "$SDR" "$GEN" "$SMOL_GEN" "$OLD_GEN"
  fi
  echo
} > "$TMP_REPORT"

# Replays first; then one `sdr eval` over all runs, so each candidate's
# metrics (BERTScore above all) are computed once rather than once per policy.
RUNS=()
NOTES=()
COMPARE=()
run_policy() { # metric agg warmup [survivors]
  local metric=$1 agg=$2 wu=$3 s=${4:-1}
  local tag="${metric//[:=,]/_}-${agg//[:=,]/_}-wu$wu"
  local name="$metric@${agg//=/}"
  local label="pruning wu$wu"
  if [ "$s" != 1 ]; then tag="$tag-s$s"; label="$label s$s"; fi
  if [ -n "${REUSE:-}" ] && [ -s "$OUT/prune-$tag.jsonl" ] && [ "$OUT/prune-$tag.jsonl" -nt "$GEN" ]; then
    echo "== reusing $OUT/prune-$tag.jsonl (REUSE=1)"
  else
    echo "== [${SECONDS} s] sdr prune --replay: $metric@$agg, warm-up $wu, survivors $s"
    "$SDR" prune --replay "$GEN" --cache-dir "$CACHE_DIR" --corpus "$CORPUS" --metric "$metric" --agg "$agg" \
      --warmup "$wu" --survivors "$s" --quiet -o "$OUT/prune-$tag.jsonl"
  fi
  # Standard best-of-K does not depend on the warm-up: one row per policy.
  if [ "$wu" = 1 ] && [ "$s" = 1 ]; then
    RUNS+=(--run "$name standard=$OUT/prune-$tag.jsonl#standard_text")
  fi
  RUNS+=(--run "$name $label=$OUT/prune-$tag.jsonl")
  COMPARE+=(--compare "$name $label=$name standard")
  NOTES+=(--note "$name $label: sdr prune --replay $GEN --corpus $CORPUS --metric $metric --agg $agg --warmup $wu --survivors $s")
}

# The paper's three distances; `s2` = two survivors decoded to their end (beyond Alg. 1).
for metric in chamfer hausdorff hung-nn; do
  run_policy "$metric" min 1
  run_policy "$metric" min 1 2
done
run_policy chamfer min 2

echo "== [${SECONDS} s] sdr eval (all runs in one table)"
"$SDR" eval --candidates "$GEN" "${RUNS[@]}" "${COMPARE[@]}" "${JUDGE[@]}" \
  --title "Random vs standard best-of-K vs pruning (wu = warm-up sentences), per policy ($(wc -l < "$GEN") studies)" \
  "${NOTES[@]}" -o "$OUT/table.md" > /dev/null
cat "$OUT/table.md" >> "$TMP_REPORT"
echo >> "$TMP_REPORT"

# The same policies on the format-keeping stand-ins (reports of other studies, K = 5): the
# policy's quality apart from the generator's. No token boundaries are stored there, so
# tokens are pseudo-tokens (words and punctuation; `estimated` in the output).
RUNS=()
COMPARE=()
for metric in chamfer hausdorff hung-nn; do
  echo "== [${SECONDS} s] sdr prune --replay (stand-ins): $metric@min, warm-up 1"
  "$SDR" prune --replay "$STANDINS" --cache-dir "$CACHE_DIR" --corpus "$CORPUS" --metric "$metric" --agg min \
    --warmup 1 --quiet -o "$OUT/standins-prune-$metric.jsonl"
  RUNS+=(--run "$metric@min standard=$OUT/standins-prune-$metric.jsonl#standard_text")
  RUNS+=(--run "$metric@min pruning wu1=$OUT/standins-prune-$metric.jsonl")
  COMPARE+=(--compare "$metric@min pruning wu1=$metric@min standard")
done
"$SDR" eval --candidates "$STANDINS" "${RUNS[@]}" "${COMPARE[@]}" "${JUDGE[@]}" \
  --title "Format-keeping stand-ins ($STANDINS, K = 5, pseudo-tokens; $(wc -l < "$STANDINS") studies): standard vs pruning" \
  -o "$OUT/standins-table.md" > /dev/null
cat "$OUT/standins-table.md" >> "$TMP_REPORT"
echo >> "$TMP_REPORT"

# SKIP_LIVE=1 reuses the previous live run's paragraph (the live run takes ~10 min).
if [ -z "${SKIP_LIVE:-}" ] || [ ! -s "$OUT/live.md" ]; then
  LIVE_ARGS=("${GEN_ARGS[@]}")
  LIVE_N=$(wc -l < "$GEN")
  if [ -n "${LIVE_STUDIES:-}" ] && [ "$LIVE_STUDIES" -lt "$LIVE_N" ]; then LIVE_N=$LIVE_STUDIES; fi
  LIVE_ARGS[1]=$LIVE_N  # --limit
  echo "== [${SECONDS} s] live pruning (local back-end), chamfer@min, warm-up 1, first $LIVE_N studies"
  start=$(date +%s)
  "$SDR" prune --cache-dir "$CACHE_DIR" --corpus "$CORPUS" --metric chamfer --agg min --warmup 1 "${MODEL_ARGS[@]}" "${LIVE_ARGS[@]}" \
    --full "$GEN" --quiet -o "$OUT/prune-live-chamfer-min-wu1.jsonl"
  secs=$(( $(date +%s) - start ))
  python3 - "$OUT/prune-chamfer-min-wu1.jsonl" "$OUT/prune-live-chamfer-min-wu1.jsonl" "$secs" > "$OUT/live.md" <<'PY'
import json, sys
rep = [json.loads(l) for l in open(sys.argv[1])]
live = [json.loads(l) for l in open(sys.argv[2])]
same = sum(r["chosen"] == l["chosen"] and r["tokens_used"] == l["tokens_used"] and r["text"] == l["text"] for r, l in zip(rep, live))
used = sum(l["tokens_used"] for l in live); full = sum(l["tokens_full"] for l in live)
print("## Live pruning with the local back-end\n")
print(f"`sdr prune` live (chamfer@min, warm-up 1) over the first {len(live)} of the same studies and seeds: "
      f"{used} tokens generated against {full} for the full candidates "
      f"({100 * (1 - used / full):.1f} % saved) in {sys.argv[3]} s; same pick, same text and same "
      f"token count as the replay in {same}/{len(live)} studies.\n")
PY
fi
cat "$OUT/live.md" >> "$TMP_REPORT"
tail -n 2 "$TMP_REPORT"
mv "$TMP_REPORT" "$REPORT"
if [ "$REPORT" = docs/results/pruning.md ]; then python3 scripts/results.py >/dev/null; fi
echo "== wrote $REPORT"
